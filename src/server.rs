//! Wiring: the store, the ClaimService, health, reflection, TLS and shutdown. [`Application`]
//! binds first and serves later, so tests can bind port 0 and read the address. Health
//! Check and Watch need no API key on the main listener (`auth`); with `health_listen`, a
//! second plaintext listener serves only grpc.health.v1.Health (the same reporter) for
//! probes that cannot do (m)TLS or want their own port. With `metrics_listen`, Prometheus
//! scrapes `/metrics` there (`telemetry::Exporter`). Both gRPC listeners serve under the
//! connection limits of `listener`, and every service decodes requests of at most
//! `api::MAX_REQUEST_BYTES`.

use crate::api::{ClaimsApi, MAX_REQUEST_BYTES, max_response_bytes};
use crate::auth::{AuthLayer, Authenticator};
use crate::config::Config;
use crate::deadline::DeadlineLayer;
use crate::domain::PolicyHandle;
use crate::drain::Drain;
use crate::janitor::{Janitor, JanitorTask};
use crate::pb::{self, claim_service_server::ClaimServiceServer};
use crate::store::Store;
use health::{probe_health, serve_health_only, set_status};
use serve::Serving;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::ServingStatus;

mod heads;
mod health;
mod serve;

/// The gRPC service name health reports on, besides `""`.
pub const SERVICE_NAME: &str = "claimd.v1.ClaimService";

/// A bound, ready-to-serve claimd.
pub struct Application {
    listener: TcpListener,
    health_listener: Option<TcpListener>,
    metrics_listener: Option<TcpListener>,
    console_listener: Option<TcpListener>,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    store: Arc<dyn Store>,
    policies: PolicyHandle,
    config: Config,
}

impl Application {
    /// Reads the TLS files, connects the store, applies migrations (unless disabled) and
    /// binds the listener (and the health-only listener, if configured).
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        let tls = crate::tls::load(&config.tls_files())?;
        let store = crate::config::open_store(&config.database_url, &config.store).await?;
        if config.migrate {
            crate::config::migrate(store.as_ref(), &config.database_url).await?;
        }
        protected_mode(&config, store.as_ref()).await?;
        let listener = crate::listener::bind("--listen", config.listen).await?;
        let health_listener = match config.health_listen {
            Some(addr) => Some(crate::listener::bind("--health-listen", addr).await?),
            None => None,
        };
        let metrics_listener = crate::telemetry::bind_metrics(config.metrics_listen).await?;
        let console_listener = match config.console_listen {
            Some(addr) => Some(crate::listener::bind("--console-listen", addr).await?),
            None => None,
        };
        Ok(Application {
            listener,
            health_listener,
            metrics_listener,
            console_listener,
            tls,
            store,
            policies: PolicyHandle::new(config.policies.clone()),
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

    /// The address of the plaintext health-only listener, if one is configured.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        // A bound TCP listener always has a local address.
        self.health_listener
            .as_ref()
            .map(|l| l.local_addr().expect("bound listener has an address"))
    }

    /// The address of the Prometheus `/metrics` listener, unless metrics are off.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        // A bound TCP listener always has a local address.
        self.metrics_listener
            .as_ref()
            .map(|l| l.local_addr().expect("bound listener has an address"))
    }

    /// The address of the operator's console, if it is on.
    pub fn console_addr(&self) -> Option<SocketAddr> {
        // A bound TCP listener always has a local address.
        self.console_listener
            .as_ref()
            .map(|l| l.local_addr().expect("bound listener has an address"))
    }

    /// How the main listener serves: `plaintext`, `tls` or `mtls` (client certificates
    /// required).
    pub fn tls_mode(&self) -> &'static str {
        match (&self.tls, &self.config.tls_client_ca) {
            (None, _) => "plaintext",
            (Some(_), None) => "tls",
            (Some(_), Some(_)) => "mtls",
        }
    }

    /// The policies in force: the API and the janitor read them per call, so replacing them
    /// (as SIGHUP does) applies to the next call.
    pub fn policies(&self) -> PolicyHandle {
        self.policies.clone()
    }

    /// A janitor over this application's store and policies, e.g. to run one pass now.
    pub fn janitor(&self) -> Janitor {
        Janitor::new(
            self.store.clone(),
            self.policies(),
            self.config.janitor.batch,
        )
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
        let drain = Drain::default();
        let api = ClaimsApi::new(
            self.store.clone(),
            self.policies.clone(),
            crate::api::DEFAULT_MAX_BLOB,
        )
        .with_namespace_limit(self.config.metrics_namespace_limit)
        .with_page_bytes(self.config.list_page_bytes)
        .with_waits(self.config.max_waiting_claims, drain.clone())
        .with_quota_clock(self.config.store.clock.clone());
        let auth = Arc::new(
            Authenticator::new(
                self.store.clone(),
                self.config.allows_calls_without_keys(),
                self.config.auth_options(),
            )
            .with_identities(self.config.mesh.spiffe.clone()),
        );
        // Requests no larger than the largest valid one; answers as large as a full page.
        let claims = ClaimServiceServer::new(api.clone())
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(max_response_bytes(self.config.list_page_bytes));
        let health_service = health_service.max_decoding_message_size(MAX_REQUEST_BYTES);
        let reflection_v1 = reflection_v1.max_decoding_message_size(MAX_REQUEST_BYTES);
        let reflection_v1alpha = reflection_v1alpha.max_decoding_message_size(MAX_REQUEST_BYTES);
        let touch = auth.spawn_touch();
        let probe = tokio::spawn(probe_health(
            self.store.clone(),
            reporter.clone(),
            self.config.health_interval,
        ));
        let janitor = JanitorTask::spawn(self.janitor(), self.config.janitor.interval);
        // Served until run_until returns (dropping the guard aborts it).
        let (console_tls, shown) = (self.tls.clone(), &self.config.console_show_payloads);
        let _console = self.console_listener.map(|listener| {
            let tls = console_tls.is_some();
            let console =
                crate::console::Console::new(api.clone(), auth.clone(), shown.clone(), tls);
            let serve = crate::console::serve(listener, Arc::new(console), console_tls);
            AbortOnDrop(tokio::spawn(serve))
        });

        let (health_stop_tx, health_stop_rx) = tokio::sync::oneshot::channel::<()>();
        let limits = self.config.connections.clone();
        // Nothing reads a body before `auth`; the body limits apply once something does.
        let bodies = crate::body_limit::BodyLimitLayer::new(self.config.bodies);
        let health_only = self.health_listener.map(|l| {
            let serve = serve_health_only(
                l,
                limits.clone(),
                bodies.clone(),
                health_service.clone(),
                health_stop_rx,
            );
            tokio::spawn(serve)
        });

        // Scraped until run_until returns (dropping it stops both tasks).
        let _exporter = self.metrics_listener.map(|listener| {
            crate::telemetry::Exporter::start(
                listener,
                self.store.clone(),
                self.config.metrics_interval,
            )
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let incoming = crate::tls::accept::Accepting::new(limits.incoming(self.listener), self.tls);
        // HTTP/1.1 too: Connect's JSON form over plain HTTP (`connect`) and gRPC-Web.
        let connect = crate::connect::ConnectLayer::new()?;
        let cors = crate::connect::cors(&self.config.cors_allow_origins);
        let mut auth_layer = AuthLayer::new(auth.clone());
        if !self.config.allow_unauthenticated {
            auth_layer = auth_layer.local_only(&self.config.cors_allow_origins);
        }
        let routes = Routes::new(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(claims)
            .prepare();
        // Outermost first.
        let service = tower::ServiceBuilder::new()
            .option_layer(cors)
            .layer(bodies.clone())
            .layer(connect)
            .layer(tonic_web::GrpcWebLayer::new())
            .layer(crate::telemetry::RpcLayer)
            .map_response(crate::api::oversized_is_resource_exhausted)
            .map_response(crate::api::undecodable_is_invalid_argument)
            .layer(drain.clone())
            .layer(DeadlineLayer)
            .layer(auth_layer)
            .service(routes);
        let serving = Serving {
            service,
            limits,
            http1: true,
            budget: bodies.budget(),
        };
        let mut server = tokio::spawn(serve::serve(incoming, serving, async {
            let _ = stop_rx.await;
        }));
        tracing::info!("serving");
        shutdown.await;
        tracing::info!("shutting down: refusing new calls, draining in-flight calls");
        probe.abort();
        // Told now, awaited last: a janitor statement never holds up the drain.
        let janitor = janitor.map(JanitorTask::stop);
        drain.start();
        set_status(&reporter, ServingStatus::NotServing).await;
        let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
        // Connections stay open (new calls get UNAVAILABLE) until the last call is done.
        let _ = tokio::time::timeout_at(deadline, drain.idle()).await;
        let _ = stop_tx.send(());
        match tokio::time::timeout_at(deadline, &mut server).await {
            Ok(joined) => joined?,
            Err(_) => {
                tracing::warn!("grace period over; exiting with calls still in flight");
                // Closes every connection still open.
                server.abort();
            }
        }
        // The key uses of the last interval are written before exiting.
        touch.abort();
        let _ = tokio::time::timeout_at(deadline, auth.flush_uses()).await;
        // Probes keep seeing NOT_SERVING until the main listener has drained.
        let _ = health_stop_tx.send(());
        if let Some(mut health_only) = health_only {
            match tokio::time::timeout_at(deadline, &mut health_only).await {
                Ok(joined) => joined?,
                Err(_) => health_only.abort(),
            }
        }
        if let Some(mut janitor) = janitor
            && tokio::time::timeout_at(deadline, &mut janitor)
                .await
                .is_err()
        {
            janitor.abort();
        }
        Ok(())
    }
}

/// Aborts the task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Protected mode (docs/DESIGN.md §5): without API keys claimd serves only on loopback, as tenant
/// `default`, unless told `--allow-unauthenticated`.
async fn protected_mode(config: &Config, store: &dyn Store) -> anyhow::Result<()> {
    if store.keys_exist().await? {
        return Ok(());
    }
    if !config.allows_calls_without_keys() {
        anyhow::bail!(
            "refusing to serve on {} without API keys: create one with `claimd keys create \
             --tenant NAME`, listen on a loopback address, or pass --allow-unauthenticated",
            config.listen
        );
    }
    tracing::warn!(
        listen = %config.listen,
        "no API keys: every caller acts as tenant `default` until a key is created"
    );
    Ok(())
}
