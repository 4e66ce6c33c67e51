//! Logs and metrics.
//!
//! Logs: `tracing` with text or JSON lines, filtered by `RUST_LOG` (default `info`). Every
//! ClaimService call runs in one `rpc` span (method, namespace, decision, code,
//! latency_ms) and ends with a debug line `rpc finished` (target `claimd::rpc`).
//!
//! Traces: OpenTelemetry spans over OTLP when the standard `OTEL_*` environment asks for
//! them ([`traces`]); W3C trace context from the caller is the call span's parent.
//!
//! Metrics: the `metrics` facade with the Prometheus exporter's recorder, served on
//! `--metrics-listen` at `/metrics` ([`exporter`]); namespace labels are bounded
//! ([`NamespaceLabels`]). No key, token or payload is ever a label or a log field, and no
//! tenant id but in the quota metrics, bounded there too ([`quotas`]).

pub mod activity;
mod calls;
pub mod exporter;
mod gauges;
mod labels;
pub mod quotas;
mod rpc;
pub mod traces;
pub mod waits;

pub use activity::Activity;
pub use calls::{ClaimTelemetry, WARN_EVERY, decision_name, note_namespace, store_error};
pub use exporter::{Exporter, STORE_ERROR_KINDS, bind as bind_metrics, recorder};
pub use gauges::refresh;
pub use labels::{DEFAULT_NAMESPACE_LIMIT, NamespaceLabels, OTHER};
pub use rpc::{RpcLayer, code_name};

use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Log line format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber; call once, from `main`, inside the runtime. Logs go to
/// stderr filtered by `RUST_LOG`; with traces configured (`traces::configured`), claimd's
/// spans also go to the OTLP exporter, whatever `RUST_LOG` says. The provider, if any, is
/// returned to be shut down at exit ([`traces::shutdown`]).
pub fn init(format: LogFormat) -> Result<Option<SdkTracerProvider>, traces::TracesError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    let provider = traces::init()?;
    let Some(tracer) = &provider else {
        // Traces off: the filter is the subscriber's own, so a disabled callsite (a debug
        // line at `info`) costs no more than a cached check.
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr);
        match format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
        return Ok(None);
    };
    // Only claimd's own spans and events become OpenTelemetry spans: its dependencies' go to
    // the logs alone.
    let ours =
        tracing_subscriber::filter::Targets::new().with_target("claimd", tracing::Level::INFO);
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(traces::layer(tracer).with_filter(ours))
        .init();
    Ok(provider)
}
