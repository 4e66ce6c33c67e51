//! Where the receipts live (`--database-url`, `--data-dir`, the pool) and the options of
//! `claimd reseal`.

use super::defaults;
use super::duration::parse_duration;
use super::sealing::SealArgs;
use crate::seal::Sealer;
use crate::store::{BatchOptions, Clock, StoreOptions};
use clap::Args;
use std::sync::Arc;
use std::time::Duration;

/// Where the receipts live.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// The database: `postgres://user@host/claimd` or `sqlite://path/to/claimd.db`.
    /// Default: the embedded SQLite database `claimd.db` in `--data-dir`.
    #[arg(long, env = "CLAIMD_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where the embedded database lives when no `--database-url` is given (created on
    /// first start).
    #[arg(long, env = "CLAIMD_DATA_DIR", default_value = defaults::DATA_DIR)]
    pub data_dir: std::path::PathBuf,
    /// Most database connections per process.
    #[arg(long, env = "CLAIMD_DB_POOL_SIZE", default_value_t = defaults::DB_POOL_SIZE)]
    pub db_pool_size: u32,
    /// How long a call waits for a database connection before it fails with UNAVAILABLE.
    #[arg(long, env = "CLAIMD_DB_TIMEOUT", default_value = defaults::DB_TIMEOUT,
          value_parser = parse_duration)]
    pub db_timeout: Duration,
    /// Group commit: at most how many batches of Claims and holder calls are in flight at
    /// once. A call that arrives while none runs starts a batch at once; calls arriving
    /// meanwhile queue and go together in the next. Another batch starts only when more
    /// calls wait than the running ones' next batches take, or a running batch is stuck
    /// (50 ms: a lock wait) (docs/DESIGN.md §4.2). Default: 4 on PostgreSQL, 1 on SQLite
    /// (its one writer serializes batches anyway).
    #[arg(long, env = "CLAIMD_GROUP_COMMIT_LANES",
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub group_commit_lanes: Option<u16>,
    /// Group commit: most calls in one batch (one read and one write statement).
    #[arg(long, env = "CLAIMD_GROUP_COMMIT_SIZE", default_value_t = defaults::GROUP_COMMIT_SIZE,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub group_commit_size: u16,
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

    /// Pool settings for these arguments, payloads sealed by `seal`; the real clock, and no
    /// file lock on the embedded database (`serve` takes it).
    pub fn store_options(&self, seal: Arc<Sealer>) -> StoreOptions {
        StoreOptions {
            max_connections: self.db_pool_size.max(1),
            acquire_timeout: self.db_timeout,
            clock: Clock::default(),
            exclusive: false,
            seal,
            batch: BatchOptions {
                lanes: self.group_commit_lanes.map(usize::from),
                size: usize::from(self.group_commit_size),
            },
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
    #[arg(long, env = "CLAIMD_RESEAL_BATCH_SIZE", default_value_t = defaults::RESEAL_BATCH)]
    pub batch_size: u32,
    /// Scan the same batches and print how many rows and values would be sealed again (in
    /// the old format, under an old key, in plaintext), writing nothing; exits 1, as the
    /// real run does, when rows do not open with the keys given.
    #[arg(long)]
    pub dry_run: bool,
}
