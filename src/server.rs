//! Wiring: the store, the ClaimService, health, reflection and shutdown. [`Application`]
//! binds first and serves later, so tests can bind port 0 and read the address.

use crate::api::{ClaimsApi, Tenant};
use crate::config::Config;
use crate::pb::{self, claim_service_server::ClaimServiceServer};
use crate::store::{self, Store};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// The gRPC service name health reports on, besides `""`.
pub const SERVICE_NAME: &str = "claimd.v1.ClaimService";

/// A bound, ready-to-serve claimd.
pub struct Application {
    listener: TcpListener,
    store: Arc<dyn Store>,
    config: Config,
}

impl Application {
    /// Connects the store, applies migrations (unless disabled) and binds the listener.
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        let store = store::open(&config.database_url, &config.store).await?;
        if config.migrate {
            store.migrate().await?;
        }
        let listener = TcpListener::bind(config.listen).await?;
        Ok(Application {
            listener,
            store,
            config,
        })
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        // A bound TCP listener always has a local address.
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// Serves until `shutdown` completes, then reports NOT_SERVING, stops accepting calls and
    /// gives in-flight calls the grace period to finish.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let (reporter, health_service) = tonic_health::server::health_reporter();
        let reflection_v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;
        let reflection_v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()?;
        let api = ClaimsApi::new(
            self.store.clone(),
            Arc::new(self.config.policies.clone()),
            self.config.max_blob,
        );
        let claims = ClaimServiceServer::with_interceptor(api, |mut req: tonic::Request<()>| {
            req.extensions_mut().insert(Tenant::default());
            Ok(req)
        });
        let probe = tokio::spawn(probe_health(
            self.store.clone(),
            reporter.clone(),
            self.config.health_interval,
        ));

        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let incoming = TcpListenerStream::new(self.listener);
        let server = tokio::spawn(
            Server::builder()
                .layer(tower::util::MapResponseLayer::new(
                    oversized_is_resource_exhausted,
                ))
                .add_service(health_service)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
                .add_service(claims)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop_rx.await;
                }),
        );
        tracing::info!("serving");
        shutdown.await;
        tracing::info!("shutting down: refusing new calls, draining in-flight calls");
        probe.abort();
        set_status(&reporter, ServingStatus::NotServing).await;
        let _ = stop_tx.send(());
        match tokio::time::timeout(self.config.shutdown_grace, server).await {
            Ok(joined) => joined??,
            Err(_) => tracing::warn!("grace period over; exiting with calls still in flight"),
        }
        Ok(())
    }
}

/// tonic rejects a request over the message size limit with OUT_OF_RANGE before any
/// handler runs; the contract (and grpc-go, grpc-java) says RESOURCE_EXHAUSTED.
fn oversized_is_resource_exhausted<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let out_of_range = headers.get("grpc-status").is_some_and(|s| s == "11");
    let too_large = headers
        .get("grpc-message")
        .is_some_and(|m| m.as_bytes().windows(17).any(|w| w == b"length%20too%20la"));
    if out_of_range && too_large {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}

async fn set_status(reporter: &HealthReporter, status: ServingStatus) {
    reporter.set_service_status("", status).await;
    reporter.set_service_status(SERVICE_NAME, status).await;
}

/// Reports SERVING while the database answers and NOT_SERVING while it does not.
async fn probe_health(store: Arc<dyn Store>, reporter: HealthReporter, every: Duration) {
    let mut last = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let answered = tokio::time::timeout(every.max(Duration::from_secs(1)), store.ping()).await;
        let status = match answered {
            Ok(Ok(())) => ServingStatus::Serving,
            _ => ServingStatus::NotServing,
        };
        if last != Some(status) {
            match status {
                ServingStatus::Serving => tracing::info!("database answers: SERVING"),
                _ => tracing::warn!("database does not answer: NOT_SERVING"),
            }
            set_status(&reporter, status).await;
            last = Some(status);
        }
    }
}
