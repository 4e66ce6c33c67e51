//! Whether the embedded database can be written, for health (docs/DESIGN.md §4.3), and the
//! writer connection's state after a failed write.
//!
//! SQLite reads a full or read-only disk as well as any other, so a ping that reads says
//! nothing about writes. Every write on the writer notes how it ended ([`Writable`]): after
//! one failed because the storage did ([`StoreError::Storage`]: disk full, read-only, an I/O
//! error, a file that cannot be opened), `ping` makes one real write itself until a write
//! succeeds again — the health probe reports NOT_SERVING meanwhile and SERVING again without a
//! restart once one does.
//!
//! On some of those errors SQLite rolls the transaction back by itself; sqlx's ROLLBACK
//! then fails ("no transaction is active") and sqlx still counts the transaction as open, so
//! every later `BEGIN IMMEDIATE` on that connection would fail. [`reusable`] closes a
//! connection that comes back from a failed transaction; the next write opens a fresh one.

use super::interpret;
use crate::store::StoreError;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::sqlite::{SqliteConnection, SqlitePool};
use sqlx::{AssertSqlSafe, Connection};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the last write on the writer failed for the storage; shared by the driver's
/// clones.
#[derive(Debug, Clone, Default)]
pub(super) struct Writable {
    failing: Arc<AtomicBool>,
}

impl Writable {
    /// Whether the last write failed for the storage.
    pub(super) fn failing(&self) -> bool {
        self.failing.load(Ordering::SeqCst)
    }

    /// Notes a write that failed: a storage failure makes the store unwritable until a write
    /// succeeds; any other error (a lost race, a deadline) says nothing about the disk.
    pub(super) fn failed(&self, error: &StoreError) {
        if let StoreError::Storage(source) = error
            && !self.failing.swap(true, Ordering::SeqCst)
        {
            tracing::warn!(
                error = %source,
                "the database cannot be written: NOT_SERVING until a write succeeds"
            );
        }
    }

    /// Notes a write that reached the disk.
    pub(super) fn wrote(&self) {
        if self.failing.swap(false, Ordering::SeqCst) {
            tracing::info!("the database can be written again");
        }
    }

    /// Passes `result` on, noting it if it failed.
    pub(super) fn noted<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e) = &result {
            self.failed(e);
        }
        result
    }

    /// One real write on `writer`: the header's `user_version` written again with its own
    /// value (sqlx keeps its migrations in a table, claimd uses no user version), so one page
    /// goes to the WAL and is synced, and no row changes.
    pub(super) async fn probe(&self, writer: &SqlitePool) -> Result<(), StoreError> {
        let written = async {
            let mut conn = writer.acquire().await?;
            let version: i64 = sqlx::query_scalar("PRAGMA user_version")
                .fetch_one(&mut *conn)
                .await?;
            // An integer the database itself returned: nothing to inject.
            sqlx::query(AssertSqlSafe(format!("PRAGMA user_version = {version}")))
                .execute(&mut *conn)
                .await?;
            Ok::<_, sqlx::Error>(())
        }
        .await
        .map_err(interpret);
        match &written {
            Ok(()) => self.wrote(),
            Err(e) => self.failed(e),
        }
        written
    }
}

/// The writer pool's `after_release`: keeps a connection unless sqlx still counts a
/// transaction open on it — one dropped after an error, whose rollback may fail — so the
/// next write gets a fresh connection. A committed transaction is counted closed before its
/// commit returns, so this costs the hot path nothing.
pub(super) fn reusable(
    conn: &mut SqliteConnection,
    _: PoolConnectionMetadata,
) -> Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + '_>> {
    let keep = !conn.is_in_transaction();
    Box::pin(std::future::ready(Ok(keep)))
}
