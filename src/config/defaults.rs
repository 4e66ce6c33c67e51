//! The default of every flag, each written once: the `#[arg]` attributes name these, and
//! nothing else states a default (tests build their configuration by parsing a command line,
//! so they get exactly these). Durations are spelled as on the command line
//! (`config::duration`).

/// `--listen`: loopback, so a fresh install is never reachable from outside by accident.
pub const LISTEN: &str = "127.0.0.1:50051";
/// `--data-dir`: where the embedded database lives.
pub const DATA_DIR: &str = "claimd-data";
/// `--db-pool-size`.
pub const DB_POOL_SIZE: u32 = 16;
/// `--db-timeout`.
pub const DB_TIMEOUT: &str = "5s";
/// `--health-interval`.
pub const HEALTH_INTERVAL: &str = "1s";
/// `--key-cache-ttl`.
pub const KEY_CACHE_TTL: &str = "5s";
/// `--shutdown-grace`.
pub const SHUTDOWN_GRACE: &str = "10s";
/// `--metrics-listen`.
pub const METRICS_LISTEN: &str = "127.0.0.1:9464";
/// `--metrics-namespace-limit`.
pub const METRICS_NAMESPACE_LIMIT: usize = crate::telemetry::DEFAULT_NAMESPACE_LIMIT;
/// `--metrics-interval`.
pub const METRICS_INTERVAL: &str = "15s";
/// `--janitor-interval`.
pub const JANITOR_INTERVAL: &str = "60s";
/// `--janitor-batch`.
pub const JANITOR_BATCH: u32 = 500;
/// `claimd reseal --batch-size`.
pub const RESEAL_BATCH: u32 = 500;
