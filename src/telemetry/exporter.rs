//! The Prometheus side of claimd: every metric's name and help text (the one list), the
//! process-wide recorder behind the `metrics` macros, and the plain-HTTP `/metrics` route.
//!
//! The recorder is global (the `metrics` facade has one per process), so every part of
//! claimd — the janitor included — records with the usual `metrics::counter!` macros and
//! the route renders whatever was recorded.
//!
//! The `/metrics` listener is our own (hyper), not the exporter crate's: it binds in
//! `Application::build` like every other listener (port 0 in tests, the address readable, a
//! bind error naming `--metrics-listen`). The exporter crate is built without default
//! features, so neither its HTTP listener nor its push gateway (which would bring aws-lc-rs
//! next to ring) is compiled.

use crate::store::Store;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// `claimd_claim_decisions_total{namespace, decision}`: Claim decisions.
pub const CLAIM_DECISIONS: &str = "claimd_claim_decisions_total";
/// `claimd_rpc_duration_seconds{method, code}`: ClaimService call latency (histogram).
pub const RPC_DURATION: &str = "claimd_rpc_duration_seconds";
/// `claimd_orphans{reason}`: receipts nobody works on although they are not done.
pub const ORPHANS: &str = "claimd_orphans";
/// `claimd_receipts_pruned_total{kind}`: the janitor's work (`deleted`, `stripped`).
pub const RECEIPTS_PRUNED: &str = "claimd_receipts_pruned_total";
/// `claimd_redelivery_hints_total{namespace}`: Claims with `delivery_attempt > 0`.
pub const REDELIVERY_HINTS: &str = "claimd_redelivery_hints_total";
/// `claimd_db_pool_connections{state}`: database connections `in_use` and `idle`.
pub const DB_POOL_CONNECTIONS: &str = "claimd_db_pool_connections";
/// `claimd_store_errors_total{kind}`: store failures answered with an error status.
pub const STORE_ERRORS: &str = "claimd_store_errors_total";

/// `claimd_notify_queue_usage`: PostgreSQL's notification queue, the fraction in use.
pub const NOTIFY_QUEUE_USAGE: &str = "claimd_notify_queue_usage";
/// `claimd_notify_listeners_terminated_total`: other claimd processes' listening
/// connections this one terminated (silent while the queue filled).
pub const NOTIFY_LISTENERS_TERMINATED: &str = "claimd_notify_listeners_terminated_total";

/// `claimd_claim_waiting`: Claims with `wait` waiting right now.
pub const CLAIM_WAITING: &str = "claimd_claim_waiting";
/// `claimd_claim_wakeups_total{cause}`: waiting Claims woken (`settled`, `lease_end`).
pub const CLAIM_WAKEUPS: &str = "claimd_claim_wakeups_total";
/// `claimd_claim_waits_total{ended}`: how waits ended (`telemetry::waits::Ended`).
pub const CLAIM_WAITS: &str = "claimd_claim_waits_total";

/// `claimd_connections_refused_total{reason}`: connections closed as soon as they were
/// accepted, by the limit that closed them (`listener::Refused`, which counts them).
pub use crate::listener::CONNECTIONS_REFUSED;
/// `claimd_auth_throttled_sources_total`: times a source (an IPv4 address, an IPv6 /64) ran
/// out of failed authentications (`--auth-failure-limit`).
pub const AUTH_THROTTLED_SOURCES: &str = "claimd_auth_throttled_sources_total";
/// `claimd_auth_throttled_total`: calls refused because their source ran out of failed
/// authentications.
pub const AUTH_THROTTLED: &str = "claimd_auth_throttled_total";

/// `claimd_quota_refusals_total{tenant, quota}`: calls refused by a tenant quota
/// (`claims_per_second`, `writes_per_second`, `max_waiting`).
pub const QUOTA_REFUSALS: &str = "claimd_quota_refusals_total";
/// `claimd_quota_waiting{tenant}`: Claims parked in `wait` now, of tenants under a
/// `max_waiting` quota.
pub const QUOTA_WAITING: &str = "claimd_quota_waiting";

/// The `kind` values ([`crate::store::StoreError::kind`]) of the failures [`STORE_ERRORS`]
/// counts, registered at zero so rates exist from the start.
pub const STORE_ERROR_KINDS: [&str; 6] = [
    "unavailable",
    "database",
    "corrupt",
    "sealed",
    "contended",
    "late_lease",
];

/// Upper bounds (seconds) of the latency histogram's buckets: 0.5 ms to 10 s.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The handle that renders the process-wide recorder, installed on first use.
pub fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(RPC_DURATION.into()), &BUCKETS)
            // The bucket list is a non-empty constant, the only thing this checks.
            .expect("latency buckets are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("another metrics recorder is installed: /metrics stays empty");
        }
        describe();
        handle
    })
}

/// The `# HELP` texts, and the store-error series at zero.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        CLAIM_DECISIONS,
        "Claim decisions, by namespace (bounded: see docs/OPERATIONS.md) and decision"
    );
    describe_histogram!(
        RPC_DURATION,
        metrics::Unit::Seconds,
        "ClaimService call latency in seconds, by RPC method and gRPC status code"
    );
    describe_gauge!(
        ORPHANS,
        "Receipts nobody works on although they are not done (all tenants), by reason"
    );
    describe_counter!(
        RECEIPTS_PRUNED,
        "Receipts pruned by the janitor, by kind (deleted, or stripped of their response)"
    );
    describe_counter!(
        REDELIVERY_HINTS,
        "Claims the platform marked as a redelivery (delivery_attempt > 0), by namespace"
    );
    describe_gauge!(
        DB_POOL_CONNECTIONS,
        "Database connections of this process, by state (in_use, idle)"
    );
    describe_counter!(
        STORE_ERRORS,
        "Store failures answered with an error status, by kind"
    );
    for kind in STORE_ERROR_KINDS {
        metrics::counter!(STORE_ERRORS, "kind" => kind).increment(0);
    }
    describe_gauge!(
        NOTIFY_QUEUE_USAGE,
        "PostgreSQL's notification queue (one per cluster), the fraction in use, as this \
         process's listening connection last read it"
    );
    describe_counter!(
        NOTIFY_LISTENERS_TERMINATED,
        "Listening connections of other claimd processes this one terminated because they \
         showed no life while the notification queue was fuller than --notify-queue-max-usage"
    );
    describe_gauge!(
        CLAIM_WAITING,
        "Claims with wait waiting for their receipt right now"
    );
    describe_counter!(
        CLAIM_WAKEUPS,
        "Waiting Claims woken, by cause (settled: a write settled the receipt; lease_end)"
    );
    describe_counter!(
        CLAIM_WAITS,
        "Waits of Claims with wait, by how they ended (settled, claimed, timed_out, drained, \
         full, abandoned)"
    );
    describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections closed as soon as they were accepted, by the limit that closed them \
         (max_connections, per_source, tls_handshakes, tls_handshakes_per_source)"
    );
    for reason in crate::listener::Refused::ALL {
        metrics::counter!(CONNECTIONS_REFUSED, "reason" => reason.name()).increment(0);
    }
    describe_counter!(
        AUTH_THROTTLED_SOURCES,
        "Times a source (an IPv4 address or an IPv6 /64) ran out of failed authentications"
    );
    describe_counter!(
        AUTH_THROTTLED,
        "Calls refused because their source ran out of failed authentications"
    );
    describe_counter!(
        QUOTA_REFUSALS,
        "Calls refused by a tenant quota (nothing written), by tenant (bounded: see \
         docs/OPERATIONS.md) and quota (claims_per_second, writes_per_second, max_waiting)"
    );
    describe_gauge!(
        QUOTA_WAITING,
        "Claims with wait parked right now, by tenant, for tenants under a max_waiting quota"
    );
    metrics::counter!(AUTH_THROTTLED_SOURCES).increment(0);
    metrics::counter!(AUTH_THROTTLED).increment(0);
    metrics::gauge!(CLAIM_WAITING).set(0.0);
    for ended in super::waits::Ended::ALL {
        metrics::counter!(CLAIM_WAITS, "ended" => ended.name()).increment(0);
    }
}

/// Binds `--metrics-listen`, if it is not `off`; the error names the flag.
pub async fn bind(
    addr: Option<SocketAddr>,
) -> Result<Option<TcpListener>, crate::listener::BindError> {
    let Some(addr) = addr else { return Ok(None) };
    Ok(Some(crate::listener::bind("--metrics-listen", addr).await?))
}

/// The `/metrics` route and the gauge refresher, running until this is dropped.
#[derive(Debug)]
pub struct Exporter {
    tasks: [JoinHandle<()>; 2],
}

impl Exporter {
    /// Installs the recorder (once per process), serves `/metrics` on `listener` and
    /// refreshes the gauges from `store` every `every`.
    pub fn start(listener: TcpListener, store: Arc<dyn Store>, every: Duration) -> Exporter {
        let handle = recorder().clone();
        let refresh = super::gauges::refresh(store, handle.clone(), every);
        Exporter {
            tasks: [tokio::spawn(serve(listener, handle)), tokio::spawn(refresh)],
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped: plain HTTP/1.1, one task
/// per connection, 10 s to send the request head, of about 16 KiB at most.
async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: try again shortly, never spin.
                tracing::warn!(error = %e, "metrics listener cannot accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = respond(&request, &handle);
                async move { Ok::<_, Infallible>(response) }
            });
            // A scrape's head is a few hundred bytes: hyper's buffer is held to the gRPC
            // listeners' head limit rather than its default of about 400 KB.
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .max_buf_size(crate::listener::MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

/// `/metrics` → the exposition; anything else → 404 (or 405 for another method).
fn respond<B>(request: &Request<B>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    let (status, content_type, body) = if request.uri().path() != "/metrics" {
        (
            StatusCode::NOT_FOUND,
            "text/plain",
            "metrics are at /metrics\n".to_owned(),
        )
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".to_owned(),
        )
    } else {
        let exposition = "text/plain; version=0.0.4; charset=utf-8";
        (StatusCode::OK, exposition, handle.render())
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}
