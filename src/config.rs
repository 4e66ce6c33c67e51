//! Command line, environment (`CLAIMD_*`) → one validated [`Config`].

use crate::domain::Policies;
use crate::store::StoreOptions;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;

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
pub enum Command {
    /// Serve gRPC (the default).
    Serve(ServeArgs),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
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
    /// Do not apply migrations at start.
    #[arg(long, env = "CLAIMD_NO_MIGRATE")]
    pub no_migrate: bool,
    /// Log line format.
    #[arg(long, env = "CLAIMD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How often the health check asks the database whether it answers.
    #[arg(long, env = "CLAIMD_HEALTH_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub health_interval: Duration,
    /// How long in-flight calls may run after SIGTERM/SIGINT before the process exits.
    #[arg(long, env = "CLAIMD_SHUTDOWN_GRACE", default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
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
    /// Namespace policies.
    pub policies: Policies,
    /// Byte limit of each blob.
    pub max_blob: usize,
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
            max_blob: crate::api::DEFAULT_MAX_BLOB,
        }
    }

    /// Validates `serve`'s arguments.
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<Config> {
        let db = &args.database;
        let mut config = Config::for_database(db.url()?);
        config.listen = args.listen;
        config.migrate = !args.no_migrate;
        config.store = StoreOptions {
            exclusive: true,
            ..db.store_options()
        };
        config.health_interval = args.health_interval;
        config.shutdown_grace = args.shutdown_grace;
        Ok(config)
    }
}
