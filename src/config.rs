//! Command line, environment (`CLAIMD_*`) → one validated [`Config`].

use crate::domain::Policies;
use crate::store::StoreOptions;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod metrics;
pub mod policies;
mod sealing;
pub use metrics::{MetricsListen, parse_metrics_listen};
pub use policies::{CheckConfigArgs, PolicyArgs, PolicyFileError};
pub use sealing::{KeyUse, SEAL_KEYS_VAR, SealArgs};

/// claimd: durable claims for webhook handlers, over gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "claimd",
    version,
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

/// Where the receipts live.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// The database: `postgres://user@host/claimd` or `sqlite://path/to/claimd.db`.
    /// Default: the embedded SQLite database `claimd.db` in `--data-dir`.
    #[arg(long, env = "CLAIMD_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where the embedded database lives when no `--database-url` is given (created on
    /// first start).
    #[arg(long, env = "CLAIMD_DATA_DIR", default_value = "claimd-data")]
    pub data_dir: std::path::PathBuf,
    /// Most database connections per process.
    #[arg(long, env = "CLAIMD_DB_POOL_SIZE", default_value_t = 16)]
    pub db_pool_size: u32,
    /// How long a call waits for a database connection before it fails with UNAVAILABLE.
    #[arg(long, env = "CLAIMD_DB_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub db_timeout: Duration,
}

impl DatabaseArgs {
    /// The database URL: the one given, or the embedded database in the data directory.
    pub fn url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database_url {
            return Ok(url.clone());
        }
        let file = self.data_dir.join("claimd.db");
        let file = file
            .to_str()
            .ok_or_else(|| anyhow::anyhow!("--data-dir must be valid UTF-8"))?;
        Ok(format!("sqlite://{file}"))
    }

    /// Pool settings for these arguments.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            max_connections: self.db_pool_size.max(1),
            acquire_timeout: self.db_timeout,
            ..StoreOptions::default()
        }
    }
}

/// Options of `claimd reseal`.
#[derive(Debug, Clone, Args)]
pub struct ResealArgs {
    /// The database.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Seal keys: the current (new) key first, then every key rows may still be sealed under.
    #[command(flatten)]
    pub seal: SealArgs,
    /// Rows per transaction.
    #[arg(long, env = "CLAIMD_RESEAL_BATCH_SIZE", default_value_t = 500)]
    pub batch_size: u32,
    /// Scan the same batches and print how many rows and values would be sealed again (in
    /// the old format, under an old key, in plaintext), writing nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options of `claimd serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The address gRPC listens on.
    #[arg(long, env = "CLAIMD_LISTEN", default_value = "127.0.0.1:50051")]
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
    /// Do not apply migrations at start.
    #[arg(long, env = "CLAIMD_NO_MIGRATE")]
    pub no_migrate: bool,
    /// Log line format.
    #[arg(long, env = "CLAIMD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How often the health check asks the database whether it answers.
    #[arg(long, env = "CLAIMD_HEALTH_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub health_interval: Duration,
    /// Serve without API keys on a non-loopback address (every caller is tenant `default`).
    #[arg(long, env = "CLAIMD_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// How long API-key lookups are cached: a revoked key stops working within this time.
    #[arg(long, env = "CLAIMD_KEY_CACHE_TTL", default_value = "5s", value_parser = parse_duration)]
    pub key_cache_ttl: Duration,
    /// How long in-flight calls may run after SIGTERM/SIGINT before the process exits.
    #[arg(long, env = "CLAIMD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
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
    /// cannot do (m)TLS or API keys.
    #[arg(long, env = "CLAIMD_HEALTH_LISTEN")]
    pub health_listen: Option<SocketAddr>,
    /// Where Prometheus scrapes `/metrics` (plain HTTP), or `off`.
    #[arg(long, env = "CLAIMD_METRICS_LISTEN", default_value = "127.0.0.1:9464",
          value_parser = parse_metrics_listen)]
    pub metrics_listen: MetricsListen,
    /// How many namespaces (besides those in the policy file) get their own metric label;
    /// later ones are counted as `other`.
    #[arg(long, env = "CLAIMD_METRICS_NAMESPACE_LIMIT", default_value_t = crate::telemetry::DEFAULT_NAMESPACE_LIMIT)]
    pub metrics_namespace_limit: usize,
    /// How often the orphan and connection-pool gauges are refreshed.
    #[arg(long, env = "CLAIMD_METRICS_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    pub metrics_interval: Duration,
}

/// Parses `500ms`, `5s`, `2m` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 5s"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("{s:?}: unit must be ms, s or m")),
    }
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
    /// Pool size, timeouts and the clock offset.
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
    /// Byte limit of each blob.
    pub max_blob: usize,
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
}

impl Config {
    /// The configuration for the given database with every other setting at its default;
    /// tests start from here.
    pub fn for_database(url: impl Into<String>) -> Config {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            database_url: url.into(),
            migrate: true,
            store: StoreOptions::default(),
            health_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
            policies: Policies::default(),
            policy_file: None,
            janitor: crate::janitor::JanitorOptions::default(),
            max_blob: crate::api::DEFAULT_MAX_BLOB,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            health_listen: None,
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9464))),
            metrics_namespace_limit: crate::telemetry::DEFAULT_NAMESPACE_LIMIT,
            metrics_interval: Duration::from_secs(15),
            allow_unauthenticated: false,
            key_cache_ttl: Duration::from_secs(5),
        }
    }

    /// Whether a call without credentials may act as tenant `default` while no keys exist:
    /// on loopback, or when explicitly allowed.
    pub fn allows_calls_without_keys(&self) -> bool {
        self.listen.ip().is_loopback() || self.allow_unauthenticated
    }

    /// Validates `serve`'s arguments.
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<Config> {
        let db = &args.database;
        let mut config = Config::for_database(db.url()?);
        config.listen = args.listen;
        config.migrate = !args.no_migrate;
        config.policies = args.policy.policies()?;
        config.policy_file = args.policy.config.clone();
        config.janitor = args.policy.janitor();
        // TLS first: a wrong flag combination or a bad PEM file stops claimd before anything
        // touches disk (`Application::build` reads the files again to serve them).
        config.tls_cert = args.tls_cert.clone();
        config.tls_key = args.tls_key.clone();
        config.tls_client_ca = args.tls_client_ca.clone();
        config.health_listen = args.health_listen;
        config.metrics_listen = args.metrics_listen.0;
        config.metrics_namespace_limit = args.metrics_namespace_limit;
        config.metrics_interval = args.metrics_interval;
        crate::tls::load(&config)?;
        config.store = StoreOptions {
            exclusive: true,
            ..db.store_options()
        };
        config.health_interval = args.health_interval;
        config.shutdown_grace = args.shutdown_grace;
        config.allow_unauthenticated = args.allow_unauthenticated;
        config.key_cache_ttl = args.key_cache_ttl;
        // Last: the embedded store's key file is generated only once every flag is valid.
        let sealer = args.seal.sealer(&config.database_url, KeyUse::Serve)?;
        config.store.seal = std::sync::Arc::new(sealer);
        Ok(config)
    }
}
