//! The embedded SQLite store: one file, one claimd process, the same semantics as
//! PostgreSQL. WAL journal with `synchronous=FULL`, so a commit is on disk before claimd
//! answers. Reads (duplicates, Get, ListOrphaned) use a pool of readers; every write goes
//! through a single writer connection in a `BEGIN IMMEDIATE` transaction that re-reads the
//! row, decides with the pure domain functions and writes the result, so writes are
//! serialized and exactly one Claim wins. The clock is this process's (the database is in
//! this process), shifted by the store's [`Clock`]. The payload columns are sealed when
//! bound and opened when a row is decoded (`store::sealed`).

mod dead_letters;
mod keys;
mod lock;
mod orphans;
mod prune;
mod reseal;
mod row;

pub use lock::FileLock;

use self::row::{fetch, upsert};
use super::{
    ListPage, ListQuery, OrphanPage, OrphanQuery, ResealBatch, ResealCursor, Store, StoreError,
    StoreOptions,
};
use crate::domain::{
    Action, ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Write, apply, decide_claim,
};
use crate::seal::Sealer;
use crate::store::Clock;
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::sync::Arc;
use uuid::Uuid;

/// Receipts in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    reader: SqlitePool,
    writer: SqlitePool,
    clock: Clock,
    seal: Arc<Sealer>,
    _lock: Option<Arc<FileLock>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database `url` names. With `options.exclusive`, takes
    /// the file lock first, so a second claimd on the same file refuses to start.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<SqliteStore, StoreError> {
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(options.acquire_timeout);
        if let Some(dir) = connect
            .get_filename()
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Open(format!("cannot create {}: {e}", dir.display())))?;
        }
        let lock = match options.exclusive {
            true => Some(Arc::new(lock::lock(connect.get_filename())?)),
            false => None,
        };
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await
            .map_err(interpret)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.max_connections.clamp(1, 8))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.read_only(true))
            .await
            .map_err(interpret)?;
        Ok(SqliteStore {
            reader,
            writer,
            clock: options.clock.clone(),
            seal: options.seal.clone(),
            _lock: lock,
        })
    }
}

impl SqliteStore {
    /// A transaction on the writer, `BEGIN IMMEDIATE`: it holds SQLite's write lock from
    /// the start, so what it reads cannot change before it writes.
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(interpret)
    }
}

/// Every SQLite error goes through here: a busy or unopenable database is unavailable.
fn interpret(e: sqlx::Error) -> StoreError {
    let unavailable = match &e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
        sqlx::Error::WorkerCrashed => true,
        // SQLITE_BUSY (5), SQLITE_LOCKED (6), SQLITE_IOERR (10), SQLITE_FULL (13),
        // SQLITE_CANTOPEN (14), including their extended codes.
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .is_some_and(|code| matches!(code & 0xff, 5 | 6 | 10 | 13 | 14)),
        _ => false,
    };
    if unavailable {
        StoreError::Unavailable(e)
    } else {
        StoreError::Database(e)
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        // A duplicate is answered from a reader, without touching the writer.
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        let current = fetch(&mut reader, &self.seal, tenant, &input.id).await?;
        drop(reader);
        let outcome = decide_claim(current.as_ref(), input, self.clock.now(), policy);
        if outcome.write == Write::None {
            return Ok(outcome);
        }
        let mut tx = self.begin_write().await?;
        let current = fetch(&mut tx, &self.seal, tenant, &input.id).await?;
        let outcome = decide_claim(current.as_ref(), input, self.clock.now(), policy);
        if outcome.write != Write::None {
            upsert(&mut tx, &self.seal, tenant, &outcome.receipt).await?;
        }
        tx.commit().await.map_err(interpret)?;
        Ok(outcome)
    }

    async fn act(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        token: Uuid,
        action: &Action,
        policy: &Policy,
    ) -> Result<Receipt, StoreError> {
        let mut tx = self.begin_write().await?;
        let current = fetch(&mut tx, &self.seal, tenant, id)
            .await?
            .ok_or(StoreError::NotFound)?;
        let next = apply(&current, token, action, self.clock.now(), policy)?;
        if next != current {
            upsert(&mut tx, &self.seal, tenant, &next).await?;
        }
        tx.commit().await.map_err(interpret)?;
        Ok(next)
    }

    async fn get(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Receipt>, StoreError> {
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        fetch(&mut reader, &self.seal, tenant, id).await
    }

    async fn list_orphaned(
        &self,
        tenant: &str,
        query: &OrphanQuery,
    ) -> Result<OrphanPage, StoreError> {
        super::list_orphans(self, tenant, query).await
    }

    async fn list(&self, tenant: &str, query: &ListQuery) -> Result<ListPage, StoreError> {
        self.list_receipts(tenant, query).await
    }

    async fn redrive(&self, tenant: &str, id: &ReceiptKey) -> Result<Receipt, StoreError> {
        self.redrive_receipt(tenant, id).await
    }

    async fn count_orphans(&self) -> Result<super::OrphanCounts, StoreError> {
        self.orphan_counts().await
    }

    fn pool_stats(&self) -> super::PoolStats {
        self.pools()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(interpret)?;
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.writer)
            .await?;
        Ok(())
    }

    async fn reseal_batch(
        &self,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<ResealBatch, StoreError> {
        self.reseal(after, limit).await
    }

    async fn terminal_namespaces(&self) -> Result<Vec<String>, StoreError> {
        self.terminal_namespaces_lite().await
    }

    async fn prune(
        &self,
        scope: &crate::store::PruneScope,
        step: crate::store::PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError> {
        self.prune_lite(scope, step, batch).await
    }

    async fn try_lock_janitor(&self) -> Result<Option<crate::store::JanitorLock>, StoreError> {
        self.try_lock_janitor_lite().await
    }
}
