//! The janitor's statements in PostgreSQL. Each prune statement picks at most `batch` rows
//! of one namespace with `FOR UPDATE SKIP LOCKED` (a row a holder action has locked is left
//! for a later pass, and the row is re-checked once locked, so a receipt redriven meanwhile
//! is not pruned) and deletes or strips them in the same statement: one short transaction,
//! which also takes what it freed off the tenants' figures (`tenant_usage`, `store::usage`).
//! Ages are measured on the database clock, shifted by the store's `Clock` as every other
//! query is. One replica prunes at a time: the pass holds a session-level advisory lock on
//! a dedicated connection, outside the pool, so the lock cannot leak into a pooled session.
//! The lock only saves work: two janitors pruning at once stay correct, since each
//! statement skips rows the other has locked.

use super::{PgDriver, clock, counted, interpret, micros, size};
use crate::store::prune::HeldLock;
use crate::store::{JanitorLock, PruneScope, PruneStep, Retention, StoreError};
use async_trait::async_trait;
use sqlx::{Connection, PgConnection};

/// The advisory lock key of the janitor (`pg_try_advisory_lock`): "claimdJ" and 1.
pub const JANITOR_LOCK_KEY: i64 = 0x636c_6169_6d64_4a01;

/// Loose index scan over the two indexes that together hold every terminal receipt once
/// (migration 0008): `receipts_response_idx` (COMPLETED with a response) and
/// `receipts_expiry_idx` (QUARANTINED, tombstones): one probe of each per namespace.
const NAMESPACES: &str = "WITH RECURSIVE ns(namespace) AS (
    SELECT LEAST(
        (SELECT namespace FROM receipts WHERE state = 'completed' AND response IS NOT NULL
         ORDER BY namespace LIMIT 1),
        (SELECT namespace FROM receipts
         WHERE state = 'quarantined' OR (state = 'completed' AND response IS NULL)
         ORDER BY namespace LIMIT 1))
    UNION ALL
    SELECT LEAST(
        (SELECT r.namespace FROM receipts r
         WHERE r.state = 'completed' AND r.response IS NOT NULL AND r.namespace > ns.namespace
         ORDER BY r.namespace LIMIT 1),
        (SELECT r.namespace FROM receipts r
         WHERE (r.state = 'quarantined' OR (r.state = 'completed' AND r.response IS NULL))
           AND r.namespace > ns.namespace
         ORDER BY r.namespace LIMIT 1))
    FROM ns WHERE ns.namespace IS NOT NULL
)
SELECT namespace FROM ns WHERE namespace IS NOT NULL";

/// Receipts past retention from both terminal indexes: COMPLETED ones with a response
/// (`receipts_response_idx`, by completed_at, which is their terminal_at), then as many of
/// the rest (`receipts_expiry_idx`) as the batch has room for, each oldest first: the CTEs
/// `kept` and `rest`, locked.
macro_rules! past_retention {
    () => {
        concat!(
            "WITH kept AS (
    SELECT tenant_id, namespace, key FROM receipts
    WHERE namespace = $1 AND state = 'completed' AND response IS NOT NULL
      AND completed_at < ",
            clock!("$4", "$3"),
            "
    ORDER BY completed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED),
rest AS (
    SELECT tenant_id, namespace, key FROM receipts
    WHERE namespace = $1 AND (state = 'quarantined' OR (state = 'completed' AND response IS NULL))
      AND terminal_at < ",
            clock!("$4", "$3"),
            "
    ORDER BY terminal_at
    LIMIT $2 - (SELECT count(*) FROM kept)
    FOR UPDATE SKIP LOCKED)"
        )
    };
}

/// The stored responses past response retention, oldest first, locked: the `WHERE` and
/// what follows of a `SELECT … FROM receipts`.
macro_rules! responses_past_retention {
    () => {
        concat!(
            "
    WHERE namespace = $1 AND state = 'completed' AND response IS NOT NULL
      AND completed_at < ",
            clock!("$4", "$3"),
            "
    ORDER BY completed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED"
        )
    };
}

/// The receipts past retention deleted, and the bytes they freed counted.
const DELETE: &str = concat!(
    past_retention!(),
    ",
gone AS (
    DELETE FROM receipts WHERE (tenant_id, namespace, key) IN (
        SELECT * FROM kept UNION ALL SELECT * FROM rest)
    RETURNING tenant_id, ",
    size!("receipts"),
    " AS bytes),",
    counted!(
        "
        SELECT tenant_id, -1, -bytes FROM gone"
    ),
    "
SELECT count(*) FROM gone"
);

/// The responses past response retention stripped, and the bytes they freed counted.
const STRIP: &str = concat!(
    "WITH picked AS (
    SELECT tenant_id, namespace, key, octet_length(response) AS bytes FROM receipts",
    responses_past_retention!(),
    "),
stripped AS (
    UPDATE receipts r SET response = NULL, response_pruned_at = ",
    clock!("$4", "$5"),
    "
    FROM picked p
    WHERE r.tenant_id = p.tenant_id AND r.namespace = p.namespace AND r.key = p.key
    RETURNING p.tenant_id, p.bytes),",
    counted!(
        "
        SELECT tenant_id, 0, -bytes FROM stripped"
    ),
    "
SELECT count(*) FROM stripped"
);

/// [`DELETE`] without its count of what it frees, for Citus (`citus/rows.rs`), which
/// routes no `INSERT` in a `WITH` to a shard: storage quotas are not kept there yet.
pub(super) const DELETE_ROWS: &str = concat!(
    past_retention!(),
    "
DELETE FROM receipts WHERE (tenant_id, namespace, key) IN (
    SELECT * FROM kept UNION ALL SELECT * FROM rest)"
);

/// [`STRIP`] without its count, for Citus (as [`DELETE_ROWS`]).
pub(super) const STRIP_ROWS: &str = concat!(
    "UPDATE receipts SET response = NULL, response_pruned_at = ",
    clock!("$4", "$5"),
    "
    WHERE (tenant_id, namespace, key) IN (
    SELECT tenant_id, namespace, key FROM receipts",
    responses_past_retention!(),
    ")"
);

#[async_trait]
impl Retention for PgDriver {
    async fn terminal_namespaces(&self) -> Result<Vec<String>, StoreError> {
        // Citus runs no recursive query over a distributed table: a distinct scan instead.
        let sql = if self.citus {
            super::citus::NAMESPACES
        } else {
            NAMESPACES
        };
        let names = sqlx::query_scalar(sql).fetch_all(&self.pool);
        self.bounded(async { names.await.map_err(interpret) }).await
    }

    async fn prune(
        &self,
        scope: &PruneScope,
        step: PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError> {
        if self.citus {
            return self.prune_citus(scope, step, batch).await;
        }
        let (sql, age) = match step {
            PruneStep::Delete => (DELETE, scope.retention),
            PruneStep::StripResponse => (STRIP, scope.response_retention),
        };
        let mut query = sqlx::query(sql)
            .bind(&scope.namespace)
            .bind(i64::from(batch))
            .bind(self.offset().saturating_sub(micros(age)))
            .bind(self.frozen());
        if matches!(step, PruneStep::StripResponse) {
            query = query.bind(self.offset()); // response_pruned_at = now
        }
        let done = query.fetch_one(&self.pool);
        let done = self
            .bounded(async { done.await.map_err(interpret) })
            .await?;
        let count: i64 = sqlx::Row::try_get(&done, 0).map_err(interpret)?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// The advisory lock on a new session, or `None` if another session holds it.
    async fn try_lock_janitor(&self) -> Result<Option<JanitorLock>, StoreError> {
        let options = self.pool.connect_options();
        let locking = async {
            let mut session = PgConnection::connect_with(&options)
                .await
                .map_err(interpret)?;
            let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                .bind(JANITOR_LOCK_KEY)
                .fetch_one(&mut session)
                .await
                .map_err(interpret)?;
            Ok((session, locked))
        };
        let (session, locked) = self.bounded(locking).await?;
        if locked {
            return Ok(Some(JanitorLock::held(Box::new(Session(session)))));
        }
        session.close().await.map_err(interpret)?;
        Ok(None)
    }
}

/// The janitor's session, holding the advisory lock until released or dropped.
struct Session(PgConnection);

#[async_trait]
impl HeldLock for Session {
    /// Unlocks and closes the session. Closing alone would release the lock; the explicit
    /// unlock makes it immediate even if the close is slow.
    async fn release(self: Box<Self>) -> Result<(), StoreError> {
        let mut session = self.0;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(JANITOR_LOCK_KEY)
            .execute(&mut session)
            .await
            .map_err(interpret)?;
        session.close().await.map_err(interpret)
    }
}
