//! The bench's own statements on the databases, outside the timed calls: PostgreSQL's
//! counters around each round ([`Pg::costs`]), the SQL baseline's table, and `--prefill` (completed
//! receipts under keys `prefill-<n>` written straight into claimd's `receipts`, matching
//! migrations/postgres and migrations/sqlite with NULL sealed columns and a random 16-byte
//! `life_id`, and into `bench_receipts`; rows already there are kept).

use crate::grpc::NAMESPACE;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::Path;

/// Rows per prefill statement (one transaction each).
const PREFILL_BATCH: u64 = 1_000_000;

/// Completed rows in claimd's PostgreSQL table, keys `prefill-$2` to `prefill-$3`.
const PREFILL_RECEIPTS: &str = "INSERT INTO receipts (tenant_id, namespace, key, state, attempt,
    fingerprint, claim_token, created_at, updated_at, completed_at, life_id)
SELECT 'default', $1, 'prefill-' || i, 'completed', 1, sha256(('prefill-' || i)::bytea),
    gen_random_uuid(), now(), now(), now(), uuid_send(gen_random_uuid())
FROM generate_series($2::bigint, $3::bigint) AS i
ON CONFLICT DO NOTHING";

/// The same keys in the SQL baseline's table.
const PREFILL_BASELINE: &str =
    "INSERT INTO bench_receipts (key, fingerprint, token, state, attempt)
SELECT 'prefill-' || i, sha256(('prefill-' || i)::bytea), gen_random_uuid(), 'completed', 1
FROM generate_series($1::bigint, $2::bigint) AS i
ON CONFLICT DO NOTHING";

/// Completed rows in claimd's SQLite table (times in microseconds, as claimd stores them).
const PREFILL_SQLITE: &str =
    "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i < ?2)
INSERT OR IGNORE INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint,
    claim_token, created_at, updated_at, completed_at, life_id)
SELECT 'default', ?3, 'prefill-' || i, 'completed', 1, randomblob(32), randomblob(16),
    ?4, ?4, ?4, randomblob(16)
FROM s";

/// Prefilled rows in claimd's table.
const COUNT_RECEIPTS: &str = "SELECT count(*) FROM receipts WHERE key LIKE 'prefill-%'";
/// Prefilled rows in the baseline's table.
const COUNT_BASELINE: &str = "SELECT count(*) FROM bench_receipts WHERE key LIKE 'prefill-%'";

/// Checks that `table` holds at least the `n` prefilled rows (`count`), and says so.
fn prefilled(n: u64, count: i64, table: &str) -> anyhow::Result<()> {
    if u64::try_from(count).unwrap_or(0) < n {
        anyhow::bail!("prefill: {table} holds {count} prefilled rows, not {n}");
    }
    eprintln!("prefill: {table} holds {count} prefilled rows");
    Ok(())
}

/// A small pool for the bench's own PostgreSQL statements, and where PostgreSQL's costs
/// are read when it runs on this machine.
pub struct Pg {
    pool: PgPool,
    /// The postmaster's pid, if its processes are visible in this machine's `/proc`.
    postmaster: Option<u32>,
    /// The block device under the data directory, if readable and listed in
    /// `/proc/diskstats`.
    device: Option<(u64, u64)>,
}

/// PostgreSQL's counters at one moment; see [`Pg::costs`]. Each is `None` where it cannot
/// be read.
#[derive(Debug, Clone, Copy)]
pub struct PgCosts {
    /// WAL insert position, bytes since the start.
    pub wal: i64,
    /// The next transaction id: its difference counts the transactions that wrote (each
    /// writes a commit record and, with synchronous_commit on, waits for its WAL flush);
    /// read-only statements get no id.
    pub next_xid: i64,
    /// CPU seconds of the postmaster's process tree.
    pub cpu: Option<f64>,
    /// Flush requests completed by the data directory's disk.
    pub flushes: Option<u64>,
}

impl Pg {
    /// Connects to `url`, and finds the postmaster (the parent of this connection's
    /// backend) and the data directory's disk when PostgreSQL runs here.
    pub async fn connect(url: &str) -> anyhow::Result<Pg> {
        let pool = PgPoolOptions::new().max_connections(2).connect(url).await?;
        let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&pool)
            .await?;
        // Another machine's (or container's) pid may name an unrelated process here.
        let postmaster = u32::try_from(backend)
            .ok()
            .filter(|pid| {
                crate::procstat::command_name(*pid).is_some_and(|c| c.starts_with("postgres"))
            })
            .and_then(crate::procstat::parent_pid)
            .filter(|pid| crate::procstat::tree_cpu_seconds(*pid).is_ok());
        // Superusers and pg_read_all_settings only.
        let data_dir: Option<String> = sqlx::query_scalar("SHOW data_directory")
            .fetch_one(&pool)
            .await
            .ok();
        let device = match (postmaster, data_dir) {
            (Some(_), Some(dir)) => crate::procstat::device_of(Path::new(&dir))
                .filter(|d| crate::procstat::disk_flushes(*d).is_some()),
            _ => None,
        };
        eprintln!(
            "PostgreSQL: {}, {}",
            match postmaster {
                Some(pid) => format!("postmaster {pid} (its CPU is measured)"),
                None => "not on this machine (its CPU is not measured)".to_owned(),
            },
            match device {
                Some((major, minor)) => format!("data directory on disk {major}:{minor}"),
                None => "its disk's flushes are not measured".to_owned(),
            }
        );
        Ok(Pg {
            pool,
            postmaster,
            device,
        })
    }

    /// PostgreSQL's counters now. The statement reading them writes nothing (no
    /// transaction id, no WAL).
    pub async fn costs(&self) -> anyhow::Result<PgCosts> {
        let sql = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
            pg_snapshot_xmax(pg_current_snapshot())::text::bigint";
        let (wal, next_xid): (i64, i64) = sqlx::query_as(sql).fetch_one(&self.pool).await?;
        Ok(PgCosts {
            wal,
            next_xid,
            cpu: self
                .postmaster
                .and_then(|pid| crate::procstat::tree_cpu_seconds(pid).ok()),
            flushes: self.device.and_then(crate::procstat::disk_flushes),
        })
    }

    /// Creates the SQL baseline's table if it is missing.
    pub async fn create_baseline(&self) -> anyhow::Result<()> {
        sqlx::raw_sql(crate::sql::SCHEMA)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// `n` completed receipts in claimd's table (migrated by then) and the baseline's.
    pub async fn prefill(&self, n: u64) -> anyhow::Result<()> {
        let mut from = 0u64;
        while from < n {
            let to = (from + PREFILL_BATCH).min(n) - 1;
            let (a, b) = (i64::try_from(from)?, i64::try_from(to)?);
            sqlx::query(PREFILL_RECEIPTS)
                .bind(NAMESPACE)
                .bind(a)
                .bind(b)
                .execute(&self.pool)
                .await?;
            sqlx::query(PREFILL_BASELINE)
                .bind(a)
                .bind(b)
                .execute(&self.pool)
                .await?;
            eprintln!("prefill: {} of {n} receipts", to + 1);
            from = to + 1;
        }
        // Both tables start with their visibility map set and fresh statistics.
        // One statement each: several in one string would run as one transaction.
        for vacuum in ["VACUUM ANALYZE receipts", "VACUUM ANALYZE bench_receipts"] {
            sqlx::raw_sql(vacuum).execute(&self.pool).await?;
        }
        let count = |sql| sqlx::query_scalar::<_, i64>(sql).fetch_one(&self.pool);
        let claimd = count(COUNT_RECEIPTS).await?;
        let baseline = count(COUNT_BASELINE).await?;
        prefilled(n, claimd, "receipts")?;
        prefilled(n, baseline, "bench_receipts")
    }
}

/// `n` completed receipts in the embedded store at `db` (migrated, claimd not running).
pub async fn prefill_sqlite(db: &Path, n: u64) -> anyhow::Result<()> {
    let mut conn = SqliteConnectOptions::new()
        .filename(db)
        .create_if_missing(false)
        .connect()
        .await?;
    let now = chrono::Utc::now().timestamp_micros();
    let mut from = 0u64;
    while from < n {
        let to = (from + PREFILL_BATCH).min(n) - 1;
        sqlx::query(PREFILL_SQLITE)
            .bind(i64::try_from(from)?)
            .bind(i64::try_from(to)?)
            .bind(NAMESPACE)
            .bind(now)
            .execute(&mut conn)
            .await?;
        eprintln!("prefill: {} of {n} receipts", to + 1);
        from = to + 1;
    }
    sqlx::raw_sql("ANALYZE").execute(&mut conn).await?;
    let count: i64 = sqlx::query_scalar(COUNT_RECEIPTS)
        .fetch_one(&mut conn)
        .await?;
    conn.close().await?;
    prefilled(n, count, "receipts")
}
