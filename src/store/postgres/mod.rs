//! The PostgreSQL driver: the production store, shared by any number of claimd replicas.
//! Statements only — what is composed of them lives in `store::receipts`.
//!
//! `batch.rs` runs a group commit's read and write statements (every Claim, holder call and
//! Redrive goes through them; `writes.rs` holds the write statements, `arrays.rs` their
//! parameters, `turn.rs` a batch that a storage quota checks); `rows.rs` reads one row and runs reseal; `pages.rs` reads List and ListOrphaned
//! pages and the gauges; `prune.rs` is the janitor's; `keys.rs` the API keys'; `gap.rs`
//! measures how far the database's clock is from claimd's, for deadlines; `listen.rs` keeps
//! the one `LISTEN` connection that wakes waiting Claims. Every time is the
//! database's clock, shifted by the store's [`Clock`], through one SQL expression
//! ([`clock!`]).

mod arrays;
mod batch;
mod citus;
mod gap;
mod keys;
mod listen;
mod pages;
mod prune;
mod read_only;
mod rows;
mod turn;
mod writes;

use super::{Lifecycle, StoreError, StoreOptions};
use crate::seal::Sealer;
use crate::store::Clock;
use crate::store::batch::Batcher;
use crate::store::settles::Settles;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Executor};
use std::str::FromStr;
use std::sync::Arc;

/// `--group-commit-lanes` on PostgreSQL unless set: most group-commit batches in flight at
/// once.
pub const DEFAULT_LANES: usize = 4;

pub use listen::NotifyOptions;
pub use prune::JANITOR_LOCK_KEY;

/// The group commit's statements (the batch read and the three writes), for the test that
/// checks each finds its rows through the primary key in a generic plan, whatever the
/// table's size when the plan was made (`tests/it/plans.rs`).
#[doc(hidden)]
pub fn batch_statements() -> [(&'static str, &'static str); 4] {
    [
        ("READ_MANY", batch::READ_MANY),
        ("INSERT_MANY", &writes::INSERT_MANY.sql),
        ("UPDATE_MANY", &writes::UPDATE_MANY.sql),
        ("WRITE_MANY", &writes::WRITE_MANY.sql),
    ]
}

/// The store's clock in SQL: the frozen base time (the parameter named first, NULL for the
/// database's `now()`) plus the offset in microseconds (the parameter named second). Every
/// statement that reads the time uses it; bind the two with [`PgDriver::frozen`] and
/// [`PgDriver::offset`] (or the offset shifted by an age).
///
/// `clock!(after_lock: …)` reads the wall clock when evaluated (`clock_timestamp()`), not
/// the statement's start: for times taken after a lock wait, so a lease runs from when the
/// row was had.
macro_rules! clock {
    ($frozen:literal, $offset:literal) => {
        clock!(@ "now()", $frozen, $offset)
    };
    (after_lock: $frozen:literal, $offset:literal) => {
        clock!(@ "clock_timestamp()", $frozen, $offset)
    };
    (@ $base:literal, $frozen:literal, $offset:literal) => {
        concat!(
            "(COALESCE(",
            $frozen,
            "::timestamptz, ",
            $base,
            ") + ",
            $offset,
            "::bigint * interval '1 microsecond')"
        )
    };
}
use clock;

/// The stored bytes of the row `$r` (`store::usage`): its sealed columns' lengths.
macro_rules! size {
    ($r:literal) => {
        concat!(
            "(COALESCE(octet_length(",
            $r,
            ".last_error), 0) + COALESCE(octet_length(",
            $r,
            ".checkpoint), 0) + COALESCE(octet_length(",
            $r,
            ".response), 0) + ",
            "COALESCE(octet_length(",
            $r,
            ".recovery_payload), 0))"
        )
    };
}

/// What the writes made add to each tenant's receipts and stored bytes (`$parts`: rows of
/// tenant, receipts added, bytes added), added to `tenant_usage` in the same statement, on
/// the slot of this connection (migration 0010), in tenant order; a tenant whose figures
/// did not change is not written.
macro_rules! counted {
    ($parts:expr) => {
        concat!(
            "
used AS (
    INSERT INTO tenant_usage AS u (tenant_id, slot, receipts, stored_bytes)
    SELECT g.tenant, (pg_backend_pid() % 16)::smallint, sum(g.n), sum(g.bytes) FROM (",
            $parts,
            "
    ) g(tenant, n, bytes)
    GROUP BY g.tenant HAVING sum(g.n) <> 0 OR sum(g.bytes) <> 0 ORDER BY g.tenant
    ON CONFLICT (tenant_id, slot) DO UPDATE SET receipts = u.receipts + excluded.receipts,
        stored_bytes = u.stored_bytes + excluded.stored_bytes
)"
        )
    };
}

use counted;
use size;

/// The `receipts` columns claimd reads, as PostgreSQL returns them: counts are `integer`,
/// times `timestamptz`.
type ReceiptRow = crate::store::row::ReceiptRow<i32, crate::domain::Timestamp>;

/// How long a pooled connection may sit idle before it is pinged on its way out of the pool.
const IDLE_PING_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// How long past `--db-timeout` claimd waits for an answer from the database before it gives
/// up on the connection: the server's `statement_timeout` answers first when the database is
/// there, this when it is not (a partition, a blackholed link, a half-open connection).
const NO_ANSWER_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Receipts in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgDriver {
    pool: PgPool,
    /// The longest claimd waits for one statement, connection included (`--db-timeout`
    /// plus [`NO_ANSWER_GRACE`]).
    bound: std::time::Duration,
    clock: Clock,
    seal: Arc<Sealer>,
    batcher: Batcher,
    /// The database's wall clock less claimd's, as the last write statement found it.
    gap: gap::ClockGap,
    /// The receipts waiting Claims watch.
    settles: Arc<Settles>,
    /// What the listening connection last saw of the notification queue.
    queue: Arc<listen::QueueWatch>,
    /// Wakes them when another replica settles one (`listen.rs`).
    _listener: Arc<listen::Listener>,
    /// When the server was last found read-only: older connections are dropped.
    read_only: Arc<read_only::Seen>,
    /// The database is a Citus coordinator (the `citus` extension is installed): every
    /// statement on `receipts` names one tenant (`citus.rs`).
    citus: bool,
}

impl PgDriver {
    /// Connects a pool to `url`.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<PgDriver, StoreError> {
        // No statement runs longer than a call may wait for the database: the server cancels
        // it (and its transaction rolls back) instead of finishing work nobody waits for.
        // A batch's statements take arrays; a custom plan would be made for every execution
        // (about a millisecond each: the planner prefers the plans it can fit to the arrays'
        // lengths), a generic plan once per connection. Every query with a partial index
        // names the index's condition literally. Set on each new session rather than sent as
        // startup `options`, which PgBouncer refuses (or, told to ignore them, drops).
        // The write statements notify only while the notification queue is emptier than
        // `--notify-queue-max-usage` (`listen::queue`), read from the session like these.
        // On Citus, custom plans instead: it routes a statement to a shard only with the
        // tenant's value in hand (`citus.rs`).
        let connect = PgConnectOptions::from_str(url).map_err(interpret)?;
        let bound = options.acquire_timeout + NO_ANSWER_GRACE;
        let checked = async {
            own_sessions(&connect).await?;
            citus::detect(&connect).await
        };
        let citus = match tokio::time::timeout(bound, checked).await {
            Ok(checked) => checked?,
            Err(_) => return Err(no_answer()),
        };
        let plans = match citus {
            true => citus::PLANS,
            false => "SET plan_cache_mode = force_generic_plan",
        };
        let timeout_ms = options.acquire_timeout.as_millis().max(1);
        let session = format!(
            "SET statement_timeout = {timeout_ms}; {plans}; SET {} = '{}'",
            listen::USAGE_SETTING,
            options.notify.max_usage
        );
        let read_only = Arc::new(read_only::Seen::default());
        let seen = read_only.clone();
        let pool = PgPoolOptions::new()
            .after_connect(move |conn, _| {
                let session = AssertSqlSafe(session.clone());
                Box::pin(async move { conn.execute(session).await.map(drop) })
            })
            .max_connections(options.max_connections)
            // sqlx pings a connection (one round trip) on every acquire by default: a third
            // of a group commit's time at one caller. Only a connection that sat idle is
            // checked; one that broke since its last statement fails that statement, which
            // is answered UNAVAILABLE and retried like any other database error.
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                let stale = seen.made_before(meta.age);
                Box::pin(async move {
                    if stale {
                        return Ok(false);
                    }
                    if meta.idle_for >= IDLE_PING_AFTER {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await
            .map_err(interpret)?;
        let settles = Settles::new();
        let queue = Arc::new(listen::QueueWatch::new(options.notify));
        let listener = listen::Listener::spawn(connect, bound, settles.clone(), queue.clone());
        Ok(PgDriver {
            pool,
            bound: options.acquire_timeout + NO_ANSWER_GRACE,
            clock: options.clock.clone(),
            seal: options.seal.clone(),
            batcher: match citus {
                true => Batcher::new(options.batch, DEFAULT_LANES).one_tenant_per_batch(),
                false => Batcher::new(options.batch, DEFAULT_LANES),
            },
            read_only,
            citus,
            gap: gap::ClockGap::new(),
            settles,
            queue,
            _listener: Arc::new(listener),
        })
    }

    /// `statement`, given up as [`StoreError::Unavailable`] when the database has not
    /// answered within [`PgDriver::bound`]. `statement_timeout` is the server's: a server
    /// that never receives the statement, or whose answer never arrives, cancels nothing,
    /// and a connection waits for it forever. The connection given up on is tested by sqlx
    /// on its way back to the pool and dropped if it does not answer. A write given up on
    /// may still commit, as one whose answer is lost: the caller is told UNAVAILABLE, which
    /// does not say that nothing happened (docs/DESIGN.md §4.1).
    async fn bounded<T>(
        &self,
        statement: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.bound, statement).await {
            Ok(answer) => answer,
            Err(_) => Err(no_answer()),
        }
    }

    /// The clock's offset, the second parameter of [`clock!`].
    fn offset(&self) -> i64 {
        self.clock.offset_micros()
    }

    /// The clock's frozen base time, the first parameter of [`clock!`].
    fn frozen(&self) -> Option<crate::domain::Timestamp> {
        self.clock.frozen()
    }
}

/// What a statement given up on answers (see [`PgDriver::bounded`]).
fn no_answer() -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the database did not answer within --db-timeout",
    )))
}

/// Why claimd refuses a pooler in transaction mode.
pub const TRANSACTION_POOLING: &str = "the database URL leads to a connection pooler in \
    transaction pool mode (PgBouncer pool_mode = transaction): claimd's session settings \
    (statement_timeout, plan_cache_mode), its prepared statements and the janitor's advisory \
    lock each need a session of their own. Connect claimd to PostgreSQL directly, or through \
    PgBouncer in session mode (pool_mode = session)";

/// Refuses a pooler that hands one client's statements to different server sessions
/// (PgBouncer in transaction or statement mode). Two connections: the second holds a
/// transaction on the server session the first one just used (a pooler reuses its most
/// recently released server connection first), then the first asks again which backend
/// serves it. Directly or in session mode it is always the same. Simple-protocol queries
/// only: a prepared statement would fail on the other session before the check could tell.
async fn own_sessions(connect: &PgConnectOptions) -> Result<(), StoreError> {
    use sqlx::{Connection, Row};
    async fn pid(conn: &mut sqlx::PgConnection, sql: &'static str) -> Result<i32, StoreError> {
        let row = sqlx::raw_sql(sql)
            .fetch_one(conn)
            .await
            .map_err(interpret)?;
        row.try_get(0).map_err(interpret)
    }
    let mut first = sqlx::PgConnection::connect_with(connect)
        .await
        .map_err(interpret)?;
    let mut second = sqlx::PgConnection::connect_with(connect)
        .await
        .map_err(interpret)?;
    let before = pid(&mut first, "SELECT pg_backend_pid()").await?;
    pid(&mut second, "BEGIN; SELECT pg_backend_pid()").await?;
    let after = pid(&mut first, "SELECT pg_backend_pid()").await?;
    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut second).await;
    let _ = first.close().await;
    let _ = second.close().await;
    if before != after {
        return Err(StoreError::Open(TRANSACTION_POOLING.into()));
    }
    Ok(())
}

/// The SQLSTATE `claimd_in_time` (migration 0007) raises once a call's deadline passed; no
/// statement calls it since the group commit (which skips a late write instead), but a
/// replica of the previous version may, during a rolling upgrade.
const DEADLINE_PASSED: &str = "CLD01";

/// SQLSTATE 25006, read_only_sql_transaction: a write on a standby, on a primary still
/// being promoted, or under `default_transaction_read_only`.
const READ_ONLY_TRANSACTION: &str = "25006";
const READ_ONLY_WRITE: &str = "a write was refused as a read-only transaction (SQLSTATE \
                               25006): the server is a standby or still being promoted";

/// Every PostgreSQL error goes through here: a statement stopped at the caller's deadline is
/// [`StoreError::DeadlinePassed`], a write a read-only server refused
/// [`StoreError::ReadOnly`], what means "the database is not there" becomes
/// [`StoreError::Unavailable`], everything else [`StoreError::Database`].
fn interpret(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        match db.code().as_deref() {
            Some(DEADLINE_PASSED) => return StoreError::DeadlinePassed,
            Some(READ_ONLY_TRANSACTION) => return StoreError::ReadOnly(READ_ONLY_WRITE),
            _ => {}
        }
    }
    let unavailable = match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // 08: connection exception, 53: insufficient resources, 57P: operator intervention
        // (shutdown, crash, cannot connect now), 57014: statement_timeout cancelled a statement
        // stuck behind a lock, 40001/40P01: retryable serialization failures; and Citus
        // reporting a worker it cannot reach as XX000 (`citus::unreachable`).
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|c| {
                c.starts_with("08")
                    || c.starts_with("53")
                    || c.starts_with("57P")
                    || c == "57014"
                    || c == "40001"
                    || c == "40P01"
            }) || citus::unreachable(db.as_ref())
        }
        _ => false,
    };
    if unavailable {
        StoreError::Unavailable(e)
    } else {
        StoreError::Database(e)
    }
}

fn micros(d: chrono::TimeDelta) -> i64 {
    d.num_microseconds().unwrap_or(i64::MAX)
}

#[async_trait]
impl Lifecycle for PgDriver {
    /// Answers, and accepts writes: not in recovery, not read-only. A server found read-only
    /// marks every pooled connection made before now to be dropped (`read_only::Seen`).
    async fn ping(&self) -> Result<(), StoreError> {
        let ping = sqlx::query_scalar::<_, bool>(read_only::PROBE).fetch_one(&self.pool);
        let read_only = self
            .bounded(async { ping.await.map_err(interpret) })
            .await?;
        if read_only {
            self.read_only.seen();
            return Err(StoreError::ReadOnly(read_only::REFUSES_WRITES));
        }
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        if self.citus {
            for &statement in citus::DISTRIBUTE {
                sqlx::raw_sql(statement)
                    .execute(&self.pool)
                    .await
                    .map_err(interpret)?;
            }
        }
        Ok(())
    }
}
