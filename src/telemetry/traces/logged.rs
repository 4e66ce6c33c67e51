//! [`Logged`]: the span exporter, its failures logged. The OpenTelemetry SDK reports a failed
//! export to its own diagnostics only, which claimd does not turn on, so a collector that is
//! down, refuses or never answers would lose every span without a word. Here each failed
//! export is counted and a warning is logged at most once a minute ([`WARN_EVERY`]) — how
//! many exports and spans failed since the last one, and the error of the last (its kind and
//! text: the exporter's, never a span's content) — and once when exports succeed again.

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often, at most, failed exports are logged.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// The most of an export error's text that is logged.
const ERROR_CHARS: usize = 200;

/// Failed exports not yet logged.
#[derive(Debug, Default)]
struct Failures {
    exports: u64,
    spans: u64,
    warned_at: Option<Instant>,
    /// Whether the last export failed (so that a success is logged once).
    failing: bool,
}

/// `E`, its failed exports logged (see the module).
#[derive(Debug)]
pub struct Logged<E> {
    inner: E,
    failures: Mutex<Failures>,
}

impl<E> Logged<E> {
    /// `inner`, logged.
    pub fn new(inner: E) -> Logged<E> {
        Logged {
            inner,
            failures: Mutex::default(),
        }
    }

    /// Notes an export of `spans` spans that ended with `result`; logs as the module says.
    fn note(&self, spans: usize, result: &OTelSdkResult) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let Err(error) = result else {
            if failures.failing {
                tracing::info!("traces: exporting spans to the collector works again");
            }
            failures.failing = false;
            return;
        };
        failures.failing = true;
        failures.exports += 1;
        failures.spans += spans as u64;
        let now = Instant::now();
        if failures
            .warned_at
            .is_some_and(|at| now.duration_since(at) < WARN_EVERY)
        {
            return;
        }
        let text: String = error.to_string().chars().take(ERROR_CHARS).collect();
        tracing::warn!(
            failed_exports = failures.exports,
            lost_spans = failures.spans,
            error = %text,
            "traces: exporting spans to the collector failed (logged at most once a minute)"
        );
        failures.warned_at = Some(now);
        failures.exports = 0;
        failures.spans = 0;
    }
}

impl<E: SpanExporter> SpanExporter for Logged<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.note(spans, &result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
