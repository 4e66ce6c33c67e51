//! The PostgreSQL store: the production store, shared by any number of claimd replicas.
//!
//! `claim` is one statement (a CTE) that reads the receipt and writes only when the row is
//! absent or really due, so a duplicate costs a read. Under READ COMMITTED, a concurrent
//! insert or takeover that commits after the statement's snapshot leaves the statement
//! without a consistent answer; it detects that case and runs again with a new snapshot
//! (the only time a Claim takes a second round trip). The payload columns are sealed when
//! bound and opened when a row is decoded (`store::sealed`); the domain sees plaintext.

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
    Action, ClaimInput, ClaimOutcome, Decision, Policy, Receipt, ReceiptKey, State, Timestamp,
    Write, apply, decide_claim,
};
use crate::seal::{Binding, Field, Sealer};
use crate::store::Clock;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{FromRow, Row};
use std::str::FromStr;
use std::sync::Arc;
use uuid::Uuid;

/// How often a Claim runs again after losing a race to a concurrent commit.
const MAX_RACES: usize = 16;

const CLAIM: &str = "
WITH c AS (SELECT COALESCE($11::timestamptz, now()) + $4::bigint * interval '1 microsecond' AS now),
cur AS (
    SELECT r.* FROM receipts r WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3
),
ins AS (
    INSERT INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint, claim_token,
                          lease_expires_at, created_at, updated_at, recovery_payload)
    SELECT $1, $2, $3, 'processing', 1, $5, $6, c.now + $7::bigint * interval '1 microsecond',
           c.now, c.now, $8
    FROM c WHERE NOT EXISTS (SELECT 1 FROM cur)
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING *
),
upd AS (
    UPDATE receipts r SET
        state = CASE WHEN r.attempt - r.free_attempts >= $9 THEN 'quarantined' ELSE 'processing' END,
        attempt = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.attempt ELSE r.attempt + 1 END,
        claim_token = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL ELSE $6 END,
        lease_expires_at = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL
                                ELSE c.now + $7::bigint * interval '1 microsecond' END,
        last_error = CASE WHEN r.attempt - r.free_attempts >= $9 THEN $10 ELSE r.last_error END,
        next_attempt_at = NULL,
        recovery_payload = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.recovery_payload
                                ELSE COALESCE(r.recovery_payload, $8) END,
        updated_at = c.now
    FROM c, cur
    WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3 AND cur.fingerprint = $5
      AND ((r.state = 'processing' AND r.lease_expires_at <= c.now)
        OR (r.state = 'retry_wait' AND r.next_attempt_at <= c.now))
    RETURNING r.*
)
SELECT 'ins' AS src, c.now AS db_now, ins.* FROM ins, c
UNION ALL SELECT 'upd', c.now, upd.* FROM upd, c
UNION ALL SELECT 'cur', c.now, cur.* FROM cur, c WHERE NOT EXISTS (SELECT 1 FROM upd)";

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
        // Sealed in Rust for this exact row before the statement: the payload a first claim
        // stores and the error text a budget-spent takeover stores.
        let at = Binding {
            tenant,
            namespace: &input.id.namespace,
            key: &input.id.key,
        };
        let payload = input.recovery_payload.as_deref();
        let payload = payload.map(|p| self.seal.seal(at, Field::RecoveryPayload, p));
        let exceeded = crate::domain::EXCEEDED_MAX_ATTEMPTS.as_bytes();
        let exceeded = self.seal.seal(at, Field::LastError, exceeded);
        for _ in 0..MAX_RACES {
            let row = sqlx::query(CLAIM)
                .bind(tenant)
                .bind(&input.id.namespace)
                .bind(&input.id.key)
                .bind(self.offset())
                .bind(&input.fingerprint)
                .bind(input.new_token)
                .bind(micros(input.lease_ttl))
                .bind(&payload)
                .bind(i64::from(policy.max_attempts))
                .bind(&exceeded)
                .bind(self.clock.frozen())
                .fetch_optional(&self.pool)
                .await
                .map_err(interpret)?;
            // No row: a concurrent insert committed after this statement's snapshot.
            let Some(row) = row else { continue };
            let src: String = row.try_get("src").map_err(interpret)?;
            let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
            let receipt = self.decode(tenant, &row)?;
            let outcome = match src.as_str() {
                "ins" => ClaimOutcome {
                    decision: Decision::Claimed,
                    receipt,
                    write: Write::Insert,
                },
                "upd" => ClaimOutcome {
                    decision: match receipt.state {
                        State::Quarantined => Decision::Quarantined,
                        _ => Decision::Claimed,
                    },
                    receipt,
                    write: Write::Update,
                },
                _ => {
                    let out = decide_claim(Some(&receipt), input, now, policy);
                    // A write was due but another caller's commit got there first.
                    if out.write != Write::None {
                        continue;
                    }
                    out
                }
            };
            return Ok(outcome);
        }
        Err(StoreError::Contended)
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
