//! The spans of the group commit (docs/DESIGN.md §5.13), made only while traces are on:
//! the switch ([`on`], turned on once by `telemetry::traces::init`), a batch's and its
//! statements' spans with the database conventions' attributes, and the two-way link
//! between a batch and each call it served. Here, apart from `telemetry`, because the
//! store makes these spans and `telemetry` reads the store (its gauges): this module
//! depends on nothing of claimd's.

use opentelemetry::trace::TraceContextExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether traces are on in this process: with them off, claimd makes none of the spans
/// that only traces need (the wait, batch and statement spans, the call span's
/// OpenTelemetry fields), so tracing off costs nothing per call.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether traces are on in this process.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns the spans on (`telemetry::traces::init`, once the exporter is installed).
pub fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// Links `a` and `b` both ways (a batch and a call's span): a slow call shows the
/// batch it rode, and the batch shows every call it served.
pub fn link_both(a: &Span, b: &Span) {
    let (ca, cb) = (a.context(), b.context());
    let (ia, ib) = (
        ca.span().span_context().clone(),
        cb.span().span_context().clone(),
    );
    if ia.is_valid() && ib.is_valid() {
        a.add_link(ib);
        b.add_link(ia);
    }
}

/// The database conventions' attributes of a batch or one of its statements: the system
/// (`postgresql`, `sqlite`), the operation, how many rows or jobs.
pub fn database(span: &Span, system: &'static str, operation: &'static str, size: usize) {
    if !span.context().has_active_span() {
        return;
    }
    span.set_attribute("db.system.name", system);
    span.set_attribute("db.operation.name", operation);
    span.set_attribute("db.operation.batch.size", size as i64);
}

/// A batch statement's span (`db.read`, `db.write`; kind CLIENT), or none with traces off.
pub fn statement(name: &'static str) -> Span {
    if !on() {
        return Span::none();
    }
    match name {
        "db.read" => tracing::info_span!(target: "claimd::store", "db.read", otel.kind = "client"),
        _ => tracing::info_span!(target: "claimd::store", "db.write", otel.kind = "client"),
    }
}
