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
/// `--group-commit-lanes` on PostgreSQL (owned by the driver).
pub const GROUP_COMMIT_LANES_POSTGRES: usize = crate::store::postgres::DEFAULT_LANES;
/// `--group-commit-lanes` on SQLite (owned by the driver).
pub const GROUP_COMMIT_LANES_SQLITE: usize = crate::store::sqlite::DEFAULT_LANES;
/// `--group-commit-size`: most calls in one group-commit batch.
pub const GROUP_COMMIT_SIZE: u16 = 128;
/// `--notify-queue-max-usage`: half of PostgreSQL's notification queue (4 of its 8 GB), the
/// point from which PostgreSQL itself warns.
pub const NOTIFY_QUEUE_MAX_USAGE: f64 = 0.5;
/// `--notify-listener-stale-after`: thirty heartbeats of a listening connection.
pub const NOTIFY_LISTENER_STALE_AFTER: &str = "30s";
/// `--health-interval`.
pub const HEALTH_INTERVAL: &str = "1s";
/// `--key-cache-ttl`.
pub const KEY_CACHE_TTL: &str = "5s";
// Issue 17 §5 (authentication floods): begin.
/// `--auth-failure-limit`: failed authentications per peer address per window (0: off).
pub const AUTH_FAILURE_LIMIT: u32 = 30;
/// `--auth-failure-window`: how long a peer's failure allowance takes to refill.
pub const AUTH_FAILURE_WINDOW: &str = "60s";
/// `--key-touch-interval`: how often `last_used_at` of the keys in use is written.
pub const KEY_TOUCH_INTERVAL: &str = "60s";
// Issue 17 §5: end.
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
/// `--max-connections`: well above what a few client pools open, below a common open-file
/// limit of 1024 (the database pool and files need descriptors too).
pub const MAX_CONNECTIONS: u32 = 1000;
/// `--max-connections-per-source`: a tenth of the cap, so ten sources are needed to fill
/// it; far more than a client's pool opens.
pub const MAX_CONNECTIONS_PER_SOURCE: u32 = 100;
/// `--max-tls-handshakes`: a quarter of the cap: stalled handshakes leave three quarters to
/// connections whose handshake is done (under mTLS: clients with a valid certificate).
pub const MAX_TLS_HANDSHAKES: u32 = 250;
/// `--max-tls-handshakes-per-source`: a handshake takes a round trip or two, so a client
/// seldom has more than a few in progress.
pub const MAX_TLS_HANDSHAKES_PER_SOURCE: u32 = 32;
/// `--first-bytes-timeout`: a client sends the HTTP/2 preface at once.
pub const FIRST_BYTES_TIMEOUT: &str = "10s";
/// `--keepalive-interval`.
pub const KEEPALIVE_INTERVAL: &str = "60s";
/// `--keepalive-timeout` (gRPC's own default).
pub const KEEPALIVE_TIMEOUT: &str = "20s";
/// `--max-connection-age`.
pub const MAX_CONNECTION_AGE: &str = "30m";
/// `--max-connection-age-grace`: as long as `--shutdown-grace`.
pub const MAX_CONNECTION_AGE_GRACE: &str = "10s";
/// `--max-concurrent-streams` (what RFC 9113 recommends as the least to allow).
pub const MAX_CONCURRENT_STREAMS: u32 = 100;
/// `--max-calls-per-connection`: as many as the streams, so by default a client meets the
/// stream limit (its own queue) first.
pub const MAX_CALLS_PER_CONNECTION: u32 = 100;
// Issue 27 §1, §2 (request bodies): begin.
/// `--body-read-timeout`: a client sends a request body at once; a body of the largest
/// size (256 KiB) then needs about 26 KiB/s.
pub const BODY_READ_TIMEOUT: &str = "10s";
/// `--max-buffered-body-bytes`: 64 MiB, 256 bodies of the largest size at once (a Claim
/// with a full 64 KiB payload takes about 66 KiB).
pub const MAX_BUFFERED_BODY_BYTES: u64 = 64 * 1024 * 1024;
/// `--max-buffered-body-bytes-per-source`: a quarter of the whole.
pub const MAX_BUFFERED_BODY_BYTES_PER_SOURCE: u64 = 16 * 1024 * 1024;
// Issue 27 §1, §2: end.
/// `--list-page-bytes`: 4 MiB, 64 receipts with a 64 KiB payload each.
pub const LIST_PAGE_BYTES: u32 = crate::store::DEFAULT_PAGE_BYTES as u32;
/// `--max-waiting-claims`: a waiting Claim holds a stream and about a kilobyte, no
/// connection and no task.
pub const MAX_WAITING_CLAIMS: u32 = crate::api::DEFAULT_MAX_WAITING_CLAIMS;
