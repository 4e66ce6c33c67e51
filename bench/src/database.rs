//! The bench's own statements on the databases, outside the timed calls: the WAL position
//! of PostgreSQL around each round, the SQL baseline's table, and `--prefill` (completed
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

/// A small pool for the bench's own PostgreSQL statements.
pub struct Pg {
    pool: PgPool,
}

impl Pg {
    /// Connects to `url`.
    pub async fn connect(url: &str) -> anyhow::Result<Pg> {
        let pool = PgPoolOptions::new().max_connections(2).connect(url).await?;
        Ok(Pg { pool })
    }

    /// The current WAL insert position, in bytes since the start.
    pub async fn wal_position(&self) -> anyhow::Result<i64> {
        let sql = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";
        Ok(sqlx::query_scalar(sql).fetch_one(&self.pool).await?)
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
