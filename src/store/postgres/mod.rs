//! The PostgreSQL store: the production store, shared by any number of claimd replicas.
//!
//! `claim` (in `claim.rs`) is one statement that writes only when the row is absent or
//! really due, so a duplicate costs a read. Holder actions lock the row, apply the domain
//! rule and write back. The payload columns are sealed when bound and opened when a row is
//! decoded (`store::sealed`); the domain sees plaintext.

mod claim;
mod dead_letters;
mod keys;
mod orphans;
mod prune;
mod reseal;
mod row;

pub use prune::JANITOR_LOCK_KEY;
pub(crate) use prune::unlock_janitor;

use self::row::{ReceiptRow, columns};
use super::{
    ListPage, ListQuery, OrphanPage, OrphanQuery, ResealBatch, ResealCursor, Store, StoreError,
    StoreOptions, StoredBlobs,
};
use crate::domain::{
    Action, ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Timestamp, apply,
};
use crate::seal::Sealer;
use crate::store::Clock;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{FromRow, Row};
use std::str::FromStr;
use std::sync::Arc;
use uuid::Uuid;

const LOCK: &str = concat!(
    "SELECT COALESCE($5::timestamptz, now()) + $4::bigint * interval '1 microsecond' AS db_now, ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3 FOR UPDATE"
);

const WRITE: &str = "UPDATE receipts SET state = $4, attempt = $5, free_attempts = $6,
    claim_token = $7, lease_expires_at = $8, next_attempt_at = $9, updated_at = $10,
    completed_at = $11, last_error = $12, checkpoint = $13, response = $14,
    recovery_payload = $15
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3";

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

/// Receipts in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    clock: Clock,
    seal: Arc<Sealer>,
}

impl PgStore {
    /// Connects a pool to `url`.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<PgStore, StoreError> {
        // No statement runs longer than a call may wait for the database: the server cancels
        // it (and its transaction rolls back) instead of finishing work nobody waits for.
        let timeout_ms = options.acquire_timeout.as_millis().max(1).to_string();
        let connect = PgConnectOptions::from_str(url)
            .map_err(interpret)?
            .options([("statement_timeout", timeout_ms.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await
            .map_err(interpret)?;
        Ok(PgStore {
            pool,
            clock: options.clock.clone(),
            seal: options.seal.clone(),
        })
    }

    fn offset(&self) -> i64 {
        self.clock.offset_micros()
    }
}

/// Every PostgreSQL error goes through here: what means "the database is not there" becomes
/// [`StoreError::Unavailable`], everything else [`StoreError::Database`].
fn interpret(e: sqlx::Error) -> StoreError {
    let unavailable = match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // 08: connection exception, 53: insufficient resources, 57P: operator intervention
        // (shutdown, crash, cannot connect now), 57014: statement_timeout cancelled a statement
        // stuck behind a lock, 40001/40P01: retryable serialization failures.
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            c.starts_with("08")
                || c.starts_with("53")
                || c.starts_with("57P")
                || c == "57014"
                || c == "40001"
                || c == "40P01"
        }),
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

impl PgStore {
    /// A `receipts` row as a receipt of `tenant`, its sealed fields opened (or DATA_LOSS).
    fn decode(&self, tenant: &str, row: &sqlx::postgres::PgRow) -> Result<Receipt, StoreError> {
        let (mut receipt, blobs) = ReceiptRow::from_row(row).map_err(interpret)?.into_parts()?;
        blobs.open_into(&self.seal, tenant, &mut receipt)?;
        Ok(receipt)
    }
}

#[async_trait]
impl Store for PgStore {
    async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim_receipt(tenant, input, policy).await
    }

    async fn act(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        token: Uuid,
        action: &Action,
        policy: &Policy,
    ) -> Result<Receipt, StoreError> {
        let mut tx = self.pool.begin().await.map_err(interpret)?;
        let row = sqlx::query(LOCK)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .bind(self.offset())
            .bind(self.clock.frozen())
            .fetch_optional(&mut *tx)
            .await
            .map_err(interpret)?
            .ok_or(StoreError::NotFound)?;
        let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
        let current = self.decode(tenant, &row)?;
        let next = apply(&current, token, action, now, policy)?;
        if next != current {
            let blobs = StoredBlobs::seal(&self.seal, tenant, &next);
            sqlx::query(WRITE)
                .bind(tenant)
                .bind(&id.namespace)
                .bind(&id.key)
                .bind(next.state.as_str())
                .bind(i32::try_from(next.attempt).unwrap_or(i32::MAX))
                .bind(i32::try_from(next.free_attempts).unwrap_or(i32::MAX))
                .bind(next.claim_token)
                .bind(next.lease_expires_at)
                .bind(next.next_attempt_at)
                .bind(next.updated_at)
                .bind(next.completed_at)
                .bind(&blobs.last_error)
                .bind(&blobs.checkpoint)
                .bind(&blobs.response)
                .bind(&blobs.recovery_payload)
                .execute(&mut *tx)
                .await
                .map_err(interpret)?;
        }
        tx.commit().await.map_err(interpret)?;
        Ok(next)
    }

    async fn get(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Receipt>, StoreError> {
        let row = sqlx::query(GET)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret)?;
        row.map(|r| self.decode(tenant, &r)).transpose()
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
            .execute(&self.pool)
            .await
            .map_err(interpret)?;
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
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
        self.terminal_namespaces_pg().await
    }

    async fn prune(
        &self,
        scope: &crate::store::PruneScope,
        step: crate::store::PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError> {
        self.prune_pg(scope, step, batch).await
    }

    async fn try_lock_janitor(&self) -> Result<Option<crate::store::JanitorLock>, StoreError> {
        self.try_lock_janitor_pg().await
    }
}
