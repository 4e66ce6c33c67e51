//! Traces (docs/DESIGN.md §5.13): W3C trace context in, OpenTelemetry spans out over OTLP.
//!
//! Off unless the standard environment asks for it: `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, and neither `OTEL_SDK_DISABLED=true` nor
//! `OTEL_TRACES_EXPORTER=none`. Then [`init`] builds an OTLP/gRPC exporter (its endpoint,
//! headers and timeout from the `OTEL_EXPORTER_OTLP_*` variables), a batch processor (its
//! queue bounded by `OTEL_BSP_MAX_QUEUE_SIZE`, 2,048 spans by default: a full queue drops
//! spans, it never makes a call wait; the export runs on a thread of its own), the sampler
//! of `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`, so a
//! caller's sampling decision holds) and the resource of `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES` (service name `claimd` unless they name one), and installs the
//! W3C trace-context propagator. Failed exports are logged, at most once a minute
//! ([`logged`]); at exit the spans still queued are sent within what is left of
//! `--shutdown-grace` ([`shutdown`]).
//!
//! The spans the store makes (wait, batch, statements) and the switch that says whether
//! to make them are `crate::spans`, which depends on nothing of claimd's.
//!
//! Spans: `rpc` (the call, kind SERVER, named `claimd.v1.ClaimService/<Method>`, its parent
//! the caller's `traceparent`; `telemetry::rpc`), `group_commit.wait` (from a call's job
//! queued to its batch taking it) and `group_commit.batch` with `db.read` and `db.write`
//! (`store::batch`, `store::rounds`). A batch span links to the call span of every job it
//! took, and each call span links back to its batch. Attributes: RPC and database semantic conventions and
//! `claimd.*` (namespace, decision, batch size) — never a key, a token, a payload or an API
//! key.

mod logged;

use opentelemetry::trace::TraceContextExt as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Why tracing could not start: the exporter's configuration.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names a protocol claimd does not export.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0:?}: claimd exports traces over OTLP/gRPC only; set \
         it to grpc (and the endpoint to the collector's gRPC port, usually 4317)"
    )]
    Protocol(String),
    /// The exporter could not be built (a malformed endpoint, say).
    #[error("the OTLP exporter: {0}")]
    Exporter(String),
}

fn set(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether the environment turns traces on.
pub fn configured() -> bool {
    let endpoint = set("OTEL_EXPORTER_OTLP_ENDPOINT")
        .or_else(|| set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .is_some();
    let disabled = set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let none = set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    endpoint && !disabled && !none
}

/// The tracer provider the environment asks for, or `None` when traces are off. Call
/// inside the runtime (the exporter's channel lives on it); keep the provider and
/// [`shutdown`] it at exit, so the last spans are sent.
pub fn init() -> Result<Option<SdkTracerProvider>, TracesError> {
    if !configured() {
        return Ok(None);
    }
    let protocol =
        set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(protocol) = protocol.filter(|p| p != "grpc") {
        return Err(TracesError::Protocol(protocol));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .map_err(|e| TracesError::Exporter(e.to_string()))?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    let named = set("OTEL_SERVICE_NAME").is_some()
        || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name("claimd");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(logged::Logged::new(exporter))
        .with_resource(resource.build())
        .build();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    crate::spans::turn_on();
    Ok(Some(provider))
}

/// The `tracing` layer that turns claimd's spans into OpenTelemetry spans of `provider`.
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("claimd"))
        .with_tracked_inactivity(false)
}

/// Sends the spans still queued and stops the exporter, waiting at most `within` (what is
/// left of `--shutdown-grace`): a collector that does not answer cannot hold up the exit.
/// Blocks: call it off the runtime's threads, which the export itself needs.
pub fn shutdown(provider: SdkTracerProvider, within: std::time::Duration) {
    if let Err(e) = provider.shutdown_with_timeout(within) {
        tracing::warn!(
            error = %e,
            "traces: the last spans could not be sent within what was left of \
             --shutdown-grace ({within:?})"
        );
    }
}

/// Makes the caller's context in `headers` (W3C `traceparent`, `tracestate`) the parent
/// of `span`. Without a propagator installed (traces off) there is nothing to extract.
pub fn adopt_parent(span: &Span, headers: &http::HeaderMap) {
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Headers(headers))
    });
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// A request's headers as the propagator reads them.
struct Headers<'a>(&'a http::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The span's trace and span ids as hex, when it is an exported span.
pub fn ids(span: &Span) -> Option<(String, String)> {
    let context = span.context();
    let otel = context.span();
    let ids = otel.span_context();
    ids.is_valid()
        .then(|| (ids.trace_id().to_string(), ids.span_id().to_string()))
}

/// What a call span learns at its end: `rpc.grpc.status_code`, and status ERROR for the
/// codes the RPC conventions count as a server's error.
pub fn end_call(span: &Span, code: tonic::Code) {
    use tonic::Code;
    span.set_attribute("rpc.grpc.status_code", i64::from(code as i32));
    let failed = matches!(
        code,
        Code::Unknown
            | Code::DeadlineExceeded
            | Code::Unimplemented
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss
    );
    if failed {
        span.set_status(opentelemetry::trace::Status::error(super::code_name(code)));
    }
}

/// Records `name = value` as an OpenTelemetry attribute of the current span (no-op with
/// traces off): the namespace and the decision, as `claimd.namespace`, `claimd.decision`.
pub fn attribute(name: &'static str, value: &str) {
    if crate::spans::on() {
        Span::current().set_attribute(name, value.to_owned());
    }
}
