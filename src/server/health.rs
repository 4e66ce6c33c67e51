//! Health: the probe that reports SERVING while the database answers (for `""` and
//! [`super::SERVICE_NAME`]), and the plaintext health-only listener of `--health-listen`.

use super::SERVICE_NAME;
use super::serve::Serving;
use crate::listener::ConnectionLimits;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The plaintext health-only listener: its own service, so neither the main listener's
/// TLS nor its layers (API keys) apply but the body limits (sharing the main listener's
/// budget); it serves nothing but grpc.health.v1.Health, over HTTP/2 only.
pub(super) async fn serve_health_only<S>(
    listener: TcpListener,
    limits: ConnectionLimits,
    bodies: crate::body_limit::BodyLimitLayer,
    health_service: S,
    stop: tokio::sync::oneshot::Receiver<()>,
) where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let routes = Routes::new(health_service).prepare();
    let serving = Serving {
        service: tower::ServiceBuilder::new()
            .layer(bodies.clone())
            .service(routes),
        budget: bodies.budget(),
        http1: false,
        limits: limits.clone(),
    };
    // Probes connect directly: no PROXY header, and no peer trusted with many callers.
    let direct = crate::listener::ConnectionLimits {
        trusted_proxies: Default::default(),
        proxy_protocol: false,
        ..limits.clone()
    };
    super::serve::serve(direct.incoming(listener), serving, async {
        let _ = stop.await;
    })
    .await;
}

/// Reports `status` for `""` and ClaimService.
pub(super) async fn set_status(reporter: &HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter.set_service_status(SERVICE_NAME, status).await;
}

/// Reports SERVING while the database answers and NOT_SERVING while it does not.
pub(super) async fn probe_health(store: Arc<dyn Store>, reporter: HealthReporter, every: Duration) {
    let mut last = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let answered = tokio::time::timeout(every.max(Duration::from_secs(1)), store.ping()).await;
        let status = match &answered {
            Ok(Ok(())) => ServingStatus::Serving,
            _ => ServingStatus::NotServing,
        };
        // Logged once per change, with its cause; the calls failed meanwhile are counted
        // (`claimd_store_errors_total`), not logged one by one.
        if last != Some(status) {
            match answered {
                Ok(Ok(())) => tracing::info!("database answers: SERVING"),
                Ok(Err(e)) => tracing::warn!(cause = %e, source = ?std::error::Error::source(&e),
                    "database unavailable: NOT_SERVING"),
                Err(_) => tracing::warn!(
                    cause = "no answer within the probe's interval",
                    "database unavailable: NOT_SERVING"
                ),
            }
            set_status(&reporter, status).await;
            last = Some(status);
        }
    }
}
