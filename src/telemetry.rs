//! Logs and metrics.
//!
//! Logs: `tracing` with text or JSON lines, filtered by `RUST_LOG` (default `info`). Every
//! ClaimService call runs in one `rpc` span (method, namespace, decision, code,
//! latency_ms) and ends with a debug line `rpc finished` (target `claimd::rpc`).
//!
//! Metrics: the `metrics` facade with the Prometheus exporter's recorder, served on
//! `--metrics-listen` at `/metrics` ([`exporter`]); namespace labels are bounded
//! ([`NamespaceLabels`]). No tenant id, key, token or payload is ever a label or a log field.

pub mod activity;
mod calls;
pub mod exporter;
mod gauges;
mod labels;
mod rpc;
pub mod waits;

pub use activity::Activity;
pub use calls::{ClaimTelemetry, WARN_EVERY, decision_name, note_namespace, store_error};
pub use exporter::{Exporter, STORE_ERROR_KINDS, bind as bind_metrics, recorder};
pub use gauges::refresh;
pub use labels::{DEFAULT_NAMESPACE_LIMIT, NamespaceLabels, OTHER};
pub use rpc::{RpcLayer, code_name};

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

/// Installs the global subscriber; call once, from `main`.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
