//! The janitor's statements in SQLite: the same bounded statements as PostgreSQL, on the
//! single writer connection (so each is serialized with every other write and commits on
//! its own), with ages measured on this process's clock shifted by the store's `Clock`.
//! One process owns the file, so the janitor's lock holds nothing.

use super::{SqliteDriver, interpret, micros};
use crate::store::{JanitorLock, PruneScope, PruneStep, Retention, StoreError};
use async_trait::async_trait;

/// Loose index scan over the two indexes that together hold every terminal receipt once
/// (migration 0007): `receipts_response_idx` (COMPLETED with a response) and
/// `receipts_expiry_idx` (QUARANTINED, tombstones): one probe of each per namespace.
const NAMESPACES: &str = "WITH RECURSIVE ns(namespace) AS (
    SELECT (SELECT min(namespace) FROM (
        SELECT * FROM (SELECT namespace FROM receipts
            WHERE state = 'completed' AND response IS NOT NULL
            ORDER BY namespace LIMIT 1)
        UNION ALL
        SELECT * FROM (SELECT namespace FROM receipts
            WHERE state = 'quarantined' OR (state = 'completed' AND response IS NULL)
            ORDER BY namespace LIMIT 1)))
    UNION ALL
    SELECT (SELECT min(namespace) FROM (
        SELECT * FROM (SELECT r.namespace FROM receipts r
            WHERE r.state = 'completed' AND r.response IS NOT NULL
              AND r.namespace > ns.namespace
            ORDER BY r.namespace LIMIT 1)
        UNION ALL
        SELECT * FROM (SELECT r.namespace FROM receipts r
            WHERE (r.state = 'quarantined' OR (r.state = 'completed' AND r.response IS NULL))
              AND r.namespace > ns.namespace
            ORDER BY r.namespace LIMIT 1)))
    FROM ns WHERE ns.namespace IS NOT NULL
)
SELECT namespace FROM ns WHERE namespace IS NOT NULL";

/// Receipts past retention from both terminal indexes: COMPLETED ones with a response
/// (`receipts_response_idx`, by completed_at, which is their terminal_at), then as many of
/// the rest (`receipts_expiry_idx`) as the batch has room for, each oldest first. The outer
/// `SELECT * FROM (…)` lets SQLite look the picked rows up by primary key; with the compound
/// select directly in `IN (…)` it scans the table.
const DELETE: &str = "DELETE FROM receipts WHERE (tenant_id, namespace, key) IN (
    SELECT * FROM (
        SELECT * FROM (
            SELECT tenant_id, namespace, key FROM receipts
            WHERE namespace = ?1 AND state = 'completed' AND response IS NOT NULL
              AND completed_at < ?3
            ORDER BY completed_at
            LIMIT ?2)
        UNION ALL
        SELECT * FROM (
            SELECT tenant_id, namespace, key FROM receipts
            WHERE namespace = ?1
              AND (state = 'quarantined' OR (state = 'completed' AND response IS NULL))
              AND terminal_at < ?3
            ORDER BY terminal_at
            LIMIT ?2)
        LIMIT ?2))";

const STRIP: &str = "UPDATE receipts SET response = NULL, response_pruned_at = ?4 WHERE (tenant_id, namespace, key) IN (
    SELECT tenant_id, namespace, key FROM receipts
    WHERE namespace = ?1 AND state = 'completed' AND response IS NOT NULL
      AND completed_at < ?3
    ORDER BY completed_at
    LIMIT ?2)";

#[async_trait]
impl Retention for SqliteDriver {
    async fn terminal_namespaces(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(NAMESPACES)
            .fetch_all(&self.reader)
            .await
            .map_err(interpret)
    }

    async fn prune(
        &self,
        scope: &PruneScope,
        step: PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let (sql, age) = match step {
            PruneStep::Delete => (DELETE, scope.retention),
            PruneStep::StripResponse => (STRIP, scope.response_retention),
        };
        let now = self.clock.now();
        let mut query = sqlx::query(sql)
            .bind(&scope.namespace)
            .bind(i64::from(batch))
            .bind(micros(now - age));
        if matches!(step, PruneStep::StripResponse) {
            query = query.bind(micros(now)); // response_pruned_at
        }
        let done = query.execute(&self.writer).await.map_err(interpret);
        let done = self.writable.noted(done)?;
        if done.rows_affected() > 0 {
            self.writable.wrote();
        }
        Ok(done.rows_affected())
    }

    /// Always granted: one process owns the embedded database.
    async fn try_lock_janitor(&self) -> Result<Option<JanitorLock>, StoreError> {
        Ok(Some(JanitorLock::in_process()))
    }
}
