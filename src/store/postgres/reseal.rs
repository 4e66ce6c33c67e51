//! `claimd reseal` in PostgreSQL: one transaction per batch, rows locked in primary-key
//! order (so a concurrent Complete or Heartbeat waits instead of being overwritten), each
//! row's sealed columns opened and sealed again under the current key.

use super::{PgStore, interpret};
use crate::store::sealed::{ResealRow, plan_reseal};
use crate::store::{ResealBatch, ResealCursor, StoreError};
use sqlx::FromRow;

const BATCH: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload FROM receipts
    WHERE $1::text IS NULL OR (tenant_id, namespace, key) > ($1, $2::text, $3::text)
    ORDER BY tenant_id, namespace, key
    LIMIT $4
    FOR UPDATE";

const WRITE: &str = "UPDATE receipts SET last_error = $4, checkpoint = $5, response = $6,
    recovery_payload = $7 WHERE tenant_id = $1 AND namespace = $2 AND key = $3";

impl PgStore {
    /// One batch of `claimd reseal`.
    pub(super) async fn reseal(
        &self,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<ResealBatch, StoreError> {
        let mut tx = self.pool.begin().await.map_err(interpret)?;
        let rows = sqlx::query(BATCH)
            .bind(after.map(|c| c.tenant.as_str()))
            .bind(after.map(|c| c.namespace.as_str()))
            .bind(after.map(|c| c.key.as_str()))
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await
            .map_err(interpret)?;
        let rows = rows.iter().map(ResealRow::from_row);
        let rows = rows.collect::<Result<Vec<_>, _>>().map_err(interpret)?;
        let (batch, writes) = plan_reseal(&self.seal, rows, limit);
        for row in &writes {
            sqlx::query(WRITE)
                .bind(&row.id.tenant)
                .bind(&row.id.namespace)
                .bind(&row.id.key)
                .bind(&row.blobs.last_error)
                .bind(&row.blobs.checkpoint)
                .bind(&row.blobs.response)
                .bind(&row.blobs.recovery_payload)
                .execute(&mut *tx)
                .await
                .map_err(interpret)?;
        }
        tx.commit().await.map_err(interpret)?;
        Ok(batch)
    }
}
