//! The storage boundary. Callers see role traits ([`Claims`], [`DeadLetters`],
//! [`Retention`], [`Reseal`], [`Gauges`], [`Lifecycle`], [`keys::KeyStore`]) and [`Store`],
//! all of them at once. What is composed of row operations is written once (`receipts`) over
//! a [`driver::Driver`]; the two drivers, [`postgres`] and [`sqlite`], only run statements. All SQL
//! lives below this module; every database error goes through its driver's one
//! interpreting function and comes out as a [`StoreError`].

mod batch;
mod clock;
mod dead_letters;
pub mod driver;
pub mod keys;
mod orphans;
mod page;
pub mod postgres;
mod prune;
mod receipts;
mod recent;
mod reseal;
mod rounds;
mod row;
mod sealed;
pub mod settles;
pub mod sqlite;
pub(crate) mod usage;
mod write;

pub use batch::BatchOptions;
pub use clock::Clock;
pub(crate) use dead_letters::same_sealed_fields;
pub use dead_letters::{ListCursor, ListPage, ListQuery};
pub use orphans::{NamespaceCounts, OrphanCounts, OrphanCursor, OrphanPage, OrphanQuery};
pub(crate) use page::PageBudget;
pub use page::{DEFAULT_PAGE_BYTES, RECEIPT_OVERHEAD, receipt_bytes};
pub use postgres::NotifyOptions;
pub use prune::{JanitorLock, PruneScope, PruneStep};
pub use reseal::{ResealBatch, ResealCursor, reseal_all};
pub use sealed::{StoredBlobs, UNREADABLE};

use crate::domain::{
    Action, ActionError, ClaimInput, ClaimOutcome, NotQuarantined, Policy, Receipt, ReceiptKey,
    Seen,
};
use async_trait::async_trait;
use keys::KeyStore;
use std::sync::Arc;
use uuid::Uuid;

/// What the storage layer can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No receipt for that (tenant, namespace, key).
    #[error("no receipt for that namespace and key")]
    NotFound,
    /// The domain refused the action (lease lost, wrong state).
    #[error(transparent)]
    Refused(#[from] ActionError),
    /// The database cannot be reached or is shutting down; the caller may retry.
    #[error("the database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// The database server accepts no writes: a standby (in recovery), a primary still being
    /// promoted, or a server set `default_transaction_read_only`; the caller may retry, and
    /// the pool follows the leader (docs/DESIGN.md §4.3).
    #[error("the database accepts no writes: {0}")]
    ReadOnly(&'static str),
    /// The database's files cannot be written (or read): the disk is full, the filesystem is
    /// read-only, or an I/O error (the embedded store); the caller may retry.
    #[error("the database's storage failed: disk full, read-only or an I/O error")]
    Storage(#[source] sqlx::Error),
    /// The database answered with something claimd did not expect.
    #[error("database error")]
    Database(#[source] sqlx::Error),
    /// A migration failed.
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The call's deadline passed before its write could commit; the write was rolled back.
    #[error("the call's deadline passed before its write could commit; nothing was written")]
    DeadlinePassed,
    /// The call's write may have committed: its statement's answer was lost, and running it
    /// again alone failed too, or found the receipt past the attempt the write would have
    /// granted (taken over since: whether by this write's holder-to-be is not known). The
    /// outcome is not known (a `Get` tells); the caller may retry. The attempt a Claim's
    /// write would have granted, if any: a waiting Claim goes on only while no later
    /// attempt shows (docs/DESIGN.md §4.2.1).
    #[error("the database did not confirm whether the write committed")]
    Unsure(Option<u32>),
    /// Claim lost the race to concurrent commits too many times in a row: nothing was
    /// written.
    #[error("too much contention on one key; try again")]
    Contended,
    /// The call's write committed, but so late that the lease it set may end before the
    /// answer arrives (a commit that waited for a synchronous standby, say): a Claim's
    /// attempt may have been granted, a Heartbeat's lease extended and its checkpoint
    /// replaced (docs/DESIGN.md §2.7, §4.1). The caller retries.
    #[error("the write committed too late to leave a usable lease")]
    LateLease(LeaseCall),
    /// The embedded database cannot be opened, or another process serves it.
    #[error("{0}")]
    Open(String),
    /// The database URL names no store claimd has.
    #[error("unsupported database URL: expected postgres://… or sqlite://…")]
    UnsupportedUrl,
    /// A stored row violates claimd's own rules.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The write would have taken the tenant over a storage limit (`max_receipts`,
    /// `max_stored_bytes`): nothing was written.
    #[error(transparent)]
    OverQuota(#[from] crate::domain::StorageRefusal),
    /// The store cannot do what the configuration asks of it (storage quotas on Citus):
    /// nothing was written.
    #[error("{0}")]
    Unsupported(&'static str),
    /// A sealed field did not verify (tampered, moved, or under a key not configured):
    /// DATA_LOSS, and never the plaintext.
    #[error("a sealed field failed authentication")]
    Sealed(#[from] crate::seal::SealError),
}

/// The call whose lease came too late ([`StoreError::LateLease`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCall {
    /// A Claim: its attempt may have been granted.
    Claim,
    /// A Heartbeat: its lease may have been extended, its checkpoint replaced.
    Heartbeat,
}

/// Refuses to commit once the current call's deadline has passed ([`crate::deadline`]): the
/// caller is answered DEADLINE_EXCEEDED, so its write must not land. Every write
/// transaction checks this right before its COMMIT ([`driver::Driver::commit`]).
pub(crate) fn still_in_time() -> Result<(), StoreError> {
    match crate::deadline::remaining() {
        Some(left) if left.is_zero() => Err(StoreError::DeadlinePassed),
        _ => Ok(()),
    }
}

/// Connections of a store's pools (both of the embedded store's pools together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections lent out to a query or transaction.
    pub in_use: u32,
    /// Open connections waiting in the pool.
    pub idle: u32,
}

impl PoolStats {
    /// The stats of a pool with `size` open connections of which `idle` are idle.
    pub fn of(size: u32, idle: usize) -> PoolStats {
        let idle = u32::try_from(idle).unwrap_or(u32::MAX).min(size);
        PoolStats {
            in_use: size - idle,
            idle,
        }
    }
}

/// Claim and the holder's calls: the hot path. Every method is scoped by the tenant from
/// the credentials, and every time comparison uses the store's clock (the database's,
/// shifted by [`Clock`]).
#[async_trait]
pub trait Claims: Send + Sync {
    /// Decides a Claim (`docs/DESIGN.md` §2); a duplicate costs one read and writes and
    /// seals nothing.
    async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError>;

    /// Applies Complete, Heartbeat, Retry or Quarantine for the holder of `token`.
    async fn act(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        token: Uuid,
        action: &Action,
        policy: &Policy,
    ) -> Result<Receipt, StoreError>;

    /// The receipt, if there is one.
    async fn get(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Receipt>, StoreError>;

    /// The receipts that waiting Claims watch, woken when a write settles one
    /// (docs/DESIGN.md §2.9).
    fn settles(&self) -> Arc<settles::Settles>;

    /// The store's clock now as this process can tell without a statement: never ahead of
    /// it, and behind it by at most a round trip to the database. Waiting Claims use it to
    /// sleep until a lease's end.
    fn clock_estimate(&self) -> crate::domain::Timestamp;

    /// One page of orphans of the tenant.
    async fn list_orphaned(
        &self,
        tenant: &str,
        query: &OrphanQuery,
    ) -> Result<OrphanPage, StoreError>;
}

/// The dead-letter admin calls.
#[async_trait]
pub trait DeadLetters: Send + Sync {
    /// One page of the tenant's receipts in (namespace, key) order, filtered by namespace and
    /// state (the dead letters: QUARANTINED). A row whose sealed fields do not open fails
    /// the page as every read does (`Sealed`).
    async fn list(&self, tenant: &str, query: &ListQuery) -> Result<ListPage, StoreError>;

    /// Redrives a QUARANTINED receipt (`domain::redrive`): RETRY_WAIT, due now, a fresh
    /// attempt budget, no token. `Refused(WrongState)` for any other state.
    async fn redrive(&self, tenant: &str, id: &ReceiptKey) -> Result<Receipt, StoreError>;

    /// An operator's Quarantine of the orphan it saw (`domain::quarantine_orphan`), one
    /// compare-and-set write: `Ok(Ok(receipt))` once QUARANTINED with `reason` as its
    /// (sealed) last error, no attempt spent, no token, lease or next attempt; `Ok(Err(why))`
    /// when it is not `seen`'s life and version or not an orphan at the store's now, nothing
    /// written. A missing receipt is `NotFound` (never inserted); `Unsure` when a write of
    /// this call may have landed and what the row shows now cannot tell.
    async fn quarantine_orphan(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        seen: &Seen,
        reason: &str,
    ) -> Result<Result<Receipt, NotQuarantined>, StoreError>;
}

/// What the janitor asks of a store.
#[async_trait]
pub trait Retention: Send + Sync {
    /// Every namespace (of any tenant) that holds COMPLETED or QUARANTINED receipts, in
    /// bytewise order.
    async fn terminal_namespaces(&self) -> Result<Vec<String>, StoreError>;

    /// One statement, its own short transaction, that deletes (or strips the response of)
    /// at most `batch` receipts of `scope`'s namespace past their retention on the store's
    /// clock; returns how many. Never touches PROCESSING or RETRY_WAIT, and skips rows
    /// another transaction holds (they are pruned by a later pass).
    async fn prune(
        &self,
        scope: &PruneScope,
        step: PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError>;

    /// The janitor's lock: `None` when another process holds it (skip this pass).
    async fn try_lock_janitor(&self) -> Result<Option<JanitorLock>, StoreError>;
}

/// `claimd reseal`.
#[async_trait]
pub trait Reseal: Send + Sync {
    /// Seals the sealed columns of up to `limit` rows after `after` (in primary-key order)
    /// again in the current format under the current key and each row's own life, in one
    /// transaction, skipping rows already current. With `dry_run`, writes nothing and
    /// reports what it would have done.
    async fn reseal_batch(
        &self,
        after: Option<&ResealCursor>,
        limit: u32,
        dry_run: bool,
    ) -> Result<ResealBatch, StoreError>;
}

/// The most namespaces [`Gauges::namespace_counts`] returns.
pub const MAX_OVERVIEW_NAMESPACES: i64 = 1000;

/// What the metrics gauges read.
#[async_trait]
pub trait Gauges: Send + Sync {
    /// Orphans of every tenant by reason, due now: the `claimd_orphans` gauge. Counted
    /// over the due-time index, which holds only unfinished receipts.
    async fn count_orphans(&self) -> Result<OrphanCounts, StoreError>;

    /// The tenant's receipts by namespace and state, with the orphans due now, in
    /// namespace order (at most [`MAX_OVERVIEW_NAMESPACES`]): one scan of the tenant's
    /// rows, for the console's overview.
    async fn namespace_counts(&self, tenant: &str) -> Result<Vec<NamespaceCounts>, StoreError>;

    /// The tenant's receipts and their stored bytes as the store counts them for the
    /// storage quotas (`tenant_usage`, docs/DESIGN.md §5.15): one figure for every replica.
    async fn tenant_usage(&self, tenant: &str) -> Result<(i64, i64), StoreError>;

    /// The connection pool right now: the `claimd_db_pool_connections` gauge.
    fn pool_stats(&self) -> PoolStats;

    /// PostgreSQL's notification queue as this process last saw it (the
    /// `claimd_notify_queue_usage` gauge and `claimd_notify_listeners_terminated_total`);
    /// `None` for a store without one.
    fn notify_queue(&self) -> Option<NotifyQueue> {
        None
    }
}

/// PostgreSQL's notification queue, as the listening connection last saw it
/// (docs/DESIGN.md §2.9).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NotifyQueue {
    /// `pg_notification_queue_usage()` at the last heartbeat (0–1); `None` before the first.
    pub usage: Option<f64>,
    /// Listening connections of other claimd processes this one terminated.
    pub listeners_terminated: u64,
}

/// The database itself: is it there, is its schema current.
#[async_trait]
pub trait Lifecycle: Send + Sync {
    /// Succeeds while the database answers — and, on SQLite, after a write failed for the
    /// storage, only once a write succeeds again (docs/DESIGN.md §4.3).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Applies the embedded migrations.
    async fn migrate(&self) -> Result<(), StoreError>;
}

/// The durable home of receipts: every role at once, as `Arc<dyn Store>`. Each part of
/// claimd asks for the role it uses.
pub trait Store:
    Claims + DeadLetters + Retention + Reseal + Gauges + Lifecycle + KeyStore + 'static
{
}

impl<T> Store for T where
    T: Claims + DeadLetters + Retention + Reseal + Gauges + Lifecycle + KeyStore + 'static
{
}

/// Opens the store a database URL names: `postgres://…` (or `postgresql://…`) or
/// `sqlite://…`. The URL never appears in an error, since it may hold a password.
pub async fn open(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgDriver::connect(url, options).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteDriver::open(url, options).await?))
    } else {
        Err(StoreError::UnsupportedUrl)
    }
}

/// Connection settings shared by the stores.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections in the pool.
    pub max_connections: u32,
    /// How long a call waits for a connection before it fails with UNAVAILABLE.
    pub acquire_timeout: std::time::Duration,
    /// The offset added to the database clock (tests move time with it).
    pub clock: Clock,
    /// Take the embedded database's file lock, so no second claimd serves the same file.
    pub exclusive: bool,
    /// Seals the payload columns (`config` makes it from the configured keys).
    pub seal: Arc<crate::seal::Sealer>,
    /// How the group commit forms batches.
    pub batch: BatchOptions,
    /// How PostgreSQL's notification queue is guarded (ignored by SQLite).
    pub notify: NotifyOptions,
}

impl StoreError {
    /// A stable lower-case name of the variant: the `kind` label of
    /// `claimd_store_errors_total` (`telemetry::STORE_ERROR_KINDS` lists the failures'),
    /// never carrying the error's text.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::NotFound => "not_found",
            StoreError::Refused(_) => "refused",
            StoreError::Unavailable(_)
            | StoreError::Storage(_)
            | StoreError::ReadOnly(_)
            | StoreError::Unsure(_) => "unavailable",
            StoreError::Contended => "contended",
            StoreError::OverQuota(_) => "over_quota",
            StoreError::Unsupported(_) => "unsupported",
            StoreError::LateLease(_) => "late_lease",
            StoreError::DeadlinePassed => "deadline",
            StoreError::Sealed(_) => "sealed",
            StoreError::Corrupt(_) => "corrupt",
            StoreError::Database(_)
            | StoreError::Migrate(_)
            | StoreError::Open(_)
            | StoreError::UnsupportedUrl => "database",
        }
    }
}
