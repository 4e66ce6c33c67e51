//! Command line, environment (`CLAIMD_*`) → one validated [`Config`]. Every default is
//! written once, in [`defaults`]; every duration is parsed by [`duration`]. The other
//! modules get the pieces they need (`tls::TlsFiles`, `store::StoreOptions`, …), never the
//! whole configuration.

use crate::domain::Policies;
use crate::seal::Sealer;
use crate::store::StoreOptions;
use crate::telemetry::LogFormat;
use crate::tls::TlsFiles;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod auth;
mod bodies;
mod database;
pub mod defaults;
pub mod duration;
mod limits;
pub mod mesh;
mod metrics;
pub mod policies;
mod quotas;
mod sealing;
pub use auth::AuthArgs;
pub use bodies::BodyArgs;
pub use database::open::{DatabaseError, migrate, open as open_store};
pub use database::{DatabaseArgs, ResealArgs};
pub use duration::parse_duration;
pub use limits::LimitArgs;
pub use metrics::{MetricsListen, parse_metrics_listen};
pub use policies::{CheckConfigArgs, PolicyArgs, PolicyFileError};
pub use sealing::{KeyUse, SEAL_KEYS_VAR, SealArgs, SealKeysError};

/// claimd: durable claims for webhook handlers, over gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "claimd",
    version = concat!(
        env!("CARGO_PKG_VERSION"),
        " (proto claimd.v1 ",
        env!("CLAIMD_PROTO_VERSION"),
        ")"
    ),
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options of `serve`, accepted without the word `serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// claimd's commands.
#[derive(Debug, Subcommand)]
// Parsed once at start: boxing `ServeArgs` would save nothing worth the indirection.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Serve gRPC (the default).
    Serve(ServeArgs),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
    /// Seal every stored payload again under the current seal key (after adding a new key
    /// in front of the old ones), in batches; rows already under it are skipped, so it can
    /// be run again after an interruption.
    Reseal(ResealArgs),
    /// Create, list and revoke API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Validate a policy file and print the effective policies of every namespace.
    CheckConfig(CheckConfigArgs),
}

/// `claimd keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a tenant and print it (only this once).
    Create {
        /// The tenant every call with this key acts for.
        #[arg(long)]
        tenant: String,
        /// Limit the key to these namespaces (comma-separated); default: all.
        #[arg(long, value_delimiter = ',')]
        namespaces: Vec<String>,
        /// A note for `keys list`, e.g. which service holds the key.
        #[arg(long)]
        label: Option<String>,
        /// The database.
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List keys: ids, tenants, labels, namespaces, creation, last use, revocation.
    List {
        /// The database.
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke a key by id.
    Revoke {
        /// The key's id (from `keys create` or `keys list`).
        id: String,
        /// The database.
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

/// Options of `claimd serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The address gRPC listens on.
    #[arg(long, env = "CLAIMD_LISTEN", default_value = defaults::LISTEN)]
    pub listen: SocketAddr,
    /// The database.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Seal keys.
    #[command(flatten)]
    pub seal: SealArgs,
    /// Namespace policies and the janitor.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Connection and page limits.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Request-body limits: the read timeout and the buffered bytes.
    #[command(flatten)]
    pub bodies: BodyArgs,
    /// Do not apply migrations at start.
    #[arg(long, env = "CLAIMD_NO_MIGRATE")]
    pub no_migrate: bool,
    /// Log line format.
    #[arg(long, env = "CLAIMD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How often the health check asks the database whether it answers.
    #[arg(long, env = "CLAIMD_HEALTH_INTERVAL", default_value = defaults::HEALTH_INTERVAL,
          value_parser = parse_duration)]
    pub health_interval: Duration,
    /// Serve without API keys on a non-loopback address (every caller is tenant `default`).
    #[arg(long, env = "CLAIMD_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// How long API-key lookups are cached: a revoked key stops working within this time.
    #[arg(long, env = "CLAIMD_KEY_CACHE_TTL", default_value = defaults::KEY_CACHE_TTL,
          value_parser = parse_duration)]
    pub key_cache_ttl: Duration,
    /// The failed-authentication limit and the `last_used_at` flush.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// How long in-flight calls may run after SIGTERM/SIGINT before the process exits.
    #[arg(long, env = "CLAIMD_SHUTDOWN_GRACE", default_value = defaults::SHUTDOWN_GRACE,
          value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// The server's TLS certificate chain (PEM); with `--tls-key`, gRPC is served over TLS.
    #[arg(long, env = "CLAIMD_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, env = "CLAIMD_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM) for mTLS: clients without a certificate from one of them are
    /// refused at the handshake.
    #[arg(long, env = "CLAIMD_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// A second, plaintext listener serving only grpc.health.v1.Health, for probes that
    /// cannot do (m)TLS (the main listener answers health without an API key too).
    #[arg(long, env = "CLAIMD_HEALTH_LISTEN")]
    pub health_listen: Option<SocketAddr>,
    /// Where Prometheus scrapes `/metrics` (plain HTTP), or `off`.
    #[arg(long, env = "CLAIMD_METRICS_LISTEN", default_value = defaults::METRICS_LISTEN,
          value_parser = parse_metrics_listen)]
    pub metrics_listen: MetricsListen,
    /// How many namespaces (besides those in the policy file) get their own metric label;
    /// later ones are counted as `other`.
    #[arg(long, env = "CLAIMD_METRICS_NAMESPACE_LIMIT",
          default_value_t = defaults::METRICS_NAMESPACE_LIMIT)]
    pub metrics_namespace_limit: usize,
    /// How often the orphan and connection-pool gauges are refreshed.
    #[arg(long, env = "CLAIMD_METRICS_INTERVAL", default_value = defaults::METRICS_INTERVAL,
          value_parser = parse_duration)]
    pub metrics_interval: Duration,
    /// Origins (`https://admin.example.com`) whose browser pages may call claimd over
    /// gRPC-Web or Connect (CORS), comma-separated; none by default (no CORS headers).
    #[arg(long, env = "CLAIMD_CORS_ALLOW_ORIGIN", value_delimiter = ',')]
    pub cors_allow_origin: Vec<String>,
    /// Where the operator's console (a web page: sign in with an API key) listens; off
    /// unless set. Its own address, never the gRPC port; TLS when the gRPC listener has it.
    #[arg(long, env = "CLAIMD_CONSOLE_LISTEN")]
    pub console_listen: Option<SocketAddr>,
    /// Namespaces whose payloads (recovery payload, checkpoint, response) the console shows,
    /// comma-separated; `*` for every namespace. None by default: sizes only.
    #[arg(long, env = "CLAIMD_CONSOLE_SHOW_PAYLOADS", value_delimiter = ',')]
    pub console_show_payloads: Vec<String>,
}

/// Everything `serve` needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// gRPC address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The database URL.
    pub database_url: String,
    /// Apply migrations at start.
    pub migrate: bool,
    /// Pool size, timeouts, the clock offset and the sealer.
    pub store: StoreOptions,
    /// Health probe period.
    pub health_interval: Duration,
    /// Drain time after a shutdown signal.
    pub shutdown_grace: Duration,
    /// Namespace policies (from `policy_file`, else the built-in defaults).
    pub policies: Policies,
    /// The policy file, reloaded on SIGHUP.
    pub policy_file: Option<PathBuf>,
    /// How often and in what batches the janitor prunes.
    pub janitor: crate::janitor::JanitorOptions,
    /// TLS certificate chain (PEM); TLS is on when this and `tls_key` are set.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM) client certificates must chain to (mTLS).
    pub tls_client_ca: Option<PathBuf>,
    /// Address of the plaintext health-only listener, if any; port 0 picks a free port.
    pub health_listen: Option<SocketAddr>,
    /// Address of the Prometheus `/metrics` listener, `None` for off; port 0 picks a free
    /// port.
    pub metrics_listen: Option<SocketAddr>,
    /// Namespaces (besides the policy file's) with their own metric label.
    pub metrics_namespace_limit: usize,
    /// Refresh period of the orphan and pool gauges.
    pub metrics_interval: Duration,
    /// Serve without keys on a non-loopback address.
    pub allow_unauthenticated: bool,
    /// API-key cache lifetime (bounds how long a revoked key keeps working).
    pub key_cache_ttl: Duration,
    /// The limits of each gRPC listener's connections.
    pub connections: crate::listener::ConnectionLimits,
    /// What reading request bodies may cost on the gRPC listeners.
    pub bodies: crate::body_limit::BodyLimits,
    /// Most bytes of receipts in one List or ListOrphaned page.
    pub list_page_bytes: usize,
    /// Most Claims waiting at once (`wait`).
    pub max_waiting_claims: usize,
    /// Origins allowed by CORS (none: no CORS headers).
    pub cors_allow_origins: Vec<http::HeaderValue>,
    /// The console's address, if it is on; port 0 picks a free port.
    pub console_listen: Option<SocketAddr>,
    /// Namespaces whose payloads the console shows (`*`: all).
    pub console_show_payloads: Vec<String>,
    /// Failed authentications per peer address per window; 0: no limit.
    pub auth_failure_limit: u32,
    /// Refill time of the failure limit.
    pub auth_failure_window: Duration,
    /// How often `last_used_at` is written.
    pub key_touch_interval: Duration,
    /// The `[mesh]` table of `--config`: trusted proxies, PROXY protocol, SPIFFE IDs.
    pub mesh: crate::mesh::MeshOptions,
}

impl Config {
    /// Whether a call without credentials may act as tenant `default` while no keys exist:
    /// on loopback, or when explicitly allowed.
    pub fn allows_calls_without_keys(&self) -> bool {
        self.listen.ip().is_loopback() || self.allow_unauthenticated
    }

    /// How the authenticator caches, limits failures and records key use.
    pub fn auth_options(&self) -> crate::auth::AuthOptions {
        crate::auth::AuthOptions {
            cache_ttl: self.key_cache_ttl,
            failure_limit: self.auth_failure_limit,
            failure_window: self.auth_failure_window,
            touch_interval: self.key_touch_interval,
        }
    }

    /// The TLS files of the main listener.
    pub fn tls_files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            client_ca: self.tls_client_ca.clone(),
        }
    }

    /// Validates `serve`'s arguments; the seal keys come from `--seal-key-file`,
    /// `CLAIMD_SEAL_KEYS` or the embedded store's key file.
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<Config> {
        Config::from_args_sealed_by(args, |url| Ok(args.seal.sealer(url, KeyUse::Serve)?))
    }

    /// Validates `serve`'s arguments except the seal keys: `sealer` makes the sealer for the
    /// database URL, once every other argument is valid (so the embedded store's key file
    /// is generated only then). Holds the file lock of the embedded database when serving.
    pub fn from_args_sealed_by(
        args: &ServeArgs,
        sealer: impl FnOnce(&str) -> anyhow::Result<Sealer>,
    ) -> anyhow::Result<Config> {
        let database_url = args.database.url()?;
        let policies = args.policy.policies()?;
        let mut connections = args.limits.connections()?;
        let bodies = args.bodies.limits()?;
        args.auth.validate()?;
        let mesh = mesh::load(args.policy.config.as_deref())?;
        connections.trusted_proxies = mesh.trusted_proxies.clone();
        connections.proxy_protocol = mesh.proxy_protocol;
        // TLS first: a wrong flag combination or a bad PEM file stops claimd before anything
        // touches disk (`Application::build` reads the files again to serve them).
        let tls = TlsFiles {
            cert: args.tls_cert.clone(),
            key: args.tls_key.clone(),
            client_ca: args.tls_client_ca.clone(),
        };
        crate::tls::load(&tls)?;
        // Last: the embedded store's key file is generated only once every flag is valid.
        let seal = Arc::new(sealer(&database_url)?);
        Ok(Config {
            listen: args.listen,
            database_url,
            migrate: !args.no_migrate,
            store: StoreOptions {
                exclusive: true,
                ..args.database.store_options(seal)
            },
            health_interval: args.health_interval,
            shutdown_grace: args.shutdown_grace,
            policies,
            policy_file: args.policy.config.clone(),
            janitor: args.policy.janitor(),
            tls_cert: tls.cert,
            tls_key: tls.key,
            tls_client_ca: tls.client_ca,
            health_listen: args.health_listen,
            metrics_listen: args.metrics_listen.0,
            metrics_namespace_limit: args.metrics_namespace_limit,
            cors_allow_origins: cors_origins(&args.cors_allow_origin)?,
            console_listen: args.console_listen,
            console_show_payloads: console_payloads(&args.console_show_payloads)?,
            metrics_interval: args.metrics_interval,
            allow_unauthenticated: args.allow_unauthenticated,
            key_cache_ttl: args.key_cache_ttl,
            connections,
            bodies,
            list_page_bytes: args.limits.list_page_bytes as usize,
            max_waiting_claims: args.limits.max_waiting_claims as usize,
            auth_failure_limit: args.auth.auth_failure_limit,
            auth_failure_window: args.auth.auth_failure_window,
            key_touch_interval: args.auth.key_touch_interval,
            mesh,
        })
    }
}

/// `--console-show-payloads`' values: namespace names, or `*`; an error names the flag.
fn console_payloads(namespaces: &[String]) -> anyhow::Result<Vec<String>> {
    namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| {
            if n != "*" {
                crate::domain::check_name(n, crate::domain::MAX_NAMESPACE).map_err(|e| {
                    anyhow::anyhow!("--console-show-payloads: {n:?} is not a namespace: {e}")
                })?;
            }
            Ok(n.to_owned())
        })
        .collect()
}

/// `--cors-allow-origin`'s values as header values; an error names the flag.
fn cors_origins(origins: &[String]) -> anyhow::Result<Vec<http::HeaderValue>> {
    origins
        .iter()
        .map(|o| o.trim())
        .filter(|o| !o.is_empty())
        .map(|o| {
            let ok = (o.starts_with("https://") || o.starts_with("http://")) && !o.ends_with('/');
            anyhow::ensure!(
                ok,
                "--cors-allow-origin: {o:?} is not an origin (scheme://host[:port], no path)"
            );
            http::HeaderValue::from_str(o)
                .map_err(|_| anyhow::anyhow!("--cors-allow-origin: {o:?} is not a valid origin"))
        })
        .collect()
}
