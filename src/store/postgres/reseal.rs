//! `claimd reseal` in PostgreSQL: one transaction per batch, rows locked in primary-key
//! order (so a concurrent Complete or Heartbeat waits instead of being overwritten), each
//! row's sealed columns opened and sealed again under the current key.

use super::{PgStore, interpret};
use crate::store::sealed::{ResealRow, reseal_row};
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
        let mut batch = ResealBatch::default();
        for row in &rows {
            let row = ResealRow::from_row(row).map_err(interpret)?;
            if let Some(blobs) = reseal_row(&self.seal, &row, &mut batch) {
                sqlx::query(WRITE)
                    .bind(&row.id.tenant)
                    .bind(&row.id.namespace)
                    .bind(&row.id.key)
                    .bind(&blobs.last_error)
                    .bind(&blobs.checkpoint)
                    .bind(&blobs.response)
                    .bind(&blobs.recovery_payload)
                    .execute(&mut *tx)
                    .await
                    .map_err(interpret)?;
            }
            batch.next = Some(row.id);
        }
        tx.commit().await.map_err(interpret)?;
        if rows.len() < limit as usize {
            batch.next = None;
        }
        Ok(batch)
    }
}
