//! Where the receipts live (`--database-url`, `--data-dir`, the pool) and the options of
//! `claimd reseal`. Opening the database at start, with errors that name the flag and what
//! to do, is [`open`]'s.

pub mod open;

use super::defaults;
use super::duration::parse_duration;
use super::sealing::SealArgs;
use crate::seal::Sealer;
use crate::store::{BatchOptions, Clock, NotifyOptions, StoreOptions};
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
    /// PostgreSQL: the share of the notification queue (0–1, of 8 GB, one per cluster)
    /// from which settling writes stop notifying other replicas' waiting Claims (they fall
    /// back to the holder's lease end and their wait's end) and claimd terminates other
    /// claimd processes' listening connections that have shown no life for
    /// `--notify-listener-stale-after`: a session that stopped reading holds the queue,
    /// and a full queue would fail every settling write (docs/DESIGN.md §2.9).
    #[arg(long, env = "CLAIMD_NOTIFY_QUEUE_MAX_USAGE",
          default_value_t = defaults::NOTIFY_QUEUE_MAX_USAGE, value_parser = parse_usage)]
    pub notify_queue_max_usage: f64,
    /// PostgreSQL: how long another claimd's listening connection may show no life (each
    /// runs a heartbeat at least every second) before it is terminated while the
    /// notification queue is fuller than `--notify-queue-max-usage`.
    #[arg(long, env = "CLAIMD_NOTIFY_LISTENER_STALE_AFTER",
          default_value = defaults::NOTIFY_LISTENER_STALE_AFTER, value_parser = parse_stale_after)]
    pub notify_listener_stale_after: Duration,
}

/// `--notify-queue-max-usage`: a fraction strictly between 0 and 1.
fn parse_usage(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(usage) if usage > 0.0 && usage < 1.0 => Ok(usage),
        _ => Err("must be a fraction of the queue above 0 and below 1, like 0.5".to_owned()),
    }
}

/// `--notify-listener-stale-after`: a duration of at least a second.
fn parse_stale_after(text: &str) -> Result<Duration, String> {
    let stale_after = parse_duration(text)?;
    if stale_after < Duration::from_secs(1) {
        return Err("must be at least 1s".to_owned());
    }
    Ok(stale_after)
}

impl DatabaseArgs {
    /// The database URL: the one given, or the embedded database in the data directory.
    pub fn url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.database_url {
            let known = ["postgres://", "postgresql://", "sqlite:"];
            anyhow::ensure!(
                known.iter().any(|scheme| url.starts_with(scheme)),
                "--database-url: {} names no database claimd has: expected \
                 postgres://user@host/database or sqlite://path/to/claimd.db",
                open::without_password(url)
            );
            return Ok(url.clone());
        }
        let file = self.data_dir.join("claimd.db");
        let file = file.to_str().ok_or_else(|| {
            anyhow::anyhow!("--data-dir must be valid UTF-8: rename the directory or pick another")
        })?;
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
            notify: NotifyOptions {
                max_usage: self.notify_queue_max_usage,
                stale_after: self.notify_listener_stale_after,
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

#[cfg(test)]
mod tests {
    use crate::config::Cli;
    use clap::Parser;
    use std::time::Duration;

    fn notify(args: &[&str]) -> Result<crate::store::NotifyOptions, clap::Error> {
        let cli = Cli::try_parse_from([&["claimd"], args].concat())?;
        let seal = std::sync::Arc::new(crate::seal::Sealer::ephemeral());
        Ok(cli.serve.database.store_options(seal).notify)
    }

    #[test]
    fn the_notification_queue_flags_default_to_half_the_queue_and_thirty_seconds_and_refuse_nonsense()
     {
        let defaults = notify(&[]).unwrap();
        assert_eq!(defaults.max_usage, 0.5);
        assert_eq!(defaults.stale_after, Duration::from_secs(30));
        let set = notify(&[
            "--notify-queue-max-usage",
            "0.00002",
            "--notify-listener-stale-after",
            "2s",
        ])
        .unwrap();
        assert_eq!(set.max_usage, 0.00002);
        assert_eq!(set.stale_after, Duration::from_secs(2));
        for (flag, value) in [
            ("--notify-queue-max-usage", "0"),
            ("--notify-queue-max-usage", "1"),
            ("--notify-queue-max-usage", "-0.1"),
            ("--notify-queue-max-usage", "NaN"),
            ("--notify-queue-max-usage", "half"),
            ("--notify-listener-stale-after", "500ms"),
            ("--notify-listener-stale-after", "soon"),
        ] {
            let err = notify(&[&format!("{flag}={value}")])
                .unwrap_err()
                .to_string();
            assert!(err.contains(flag), "{flag} {value}: {err}");
        }
    }
}
