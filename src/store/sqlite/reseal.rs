//! `claimd reseal` in SQLite: one `BEGIN IMMEDIATE` transaction per batch (writes are
//! serialized, so no concurrent write is overwritten), each row's sealed columns opened and
//! sealed again under the current key.

use super::{SqliteStore, interpret};
use crate::store::sealed::{ResealRow, reseal_row};
use crate::store::{ResealBatch, ResealCursor, StoreError};
use sqlx::{Connection, FromRow};

const BATCH: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload FROM receipts
    WHERE ?1 IS NULL OR (tenant_id, namespace, key) > (?1, ?2, ?3)
    ORDER BY tenant_id, namespace, key
    LIMIT ?4";

const WRITE: &str = "UPDATE receipts SET last_error = ?4, checkpoint = ?5, response = ?6,
    recovery_payload = ?7 WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3";

impl SqliteStore {
    /// One batch of `claimd reseal`.
    pub(super) async fn reseal(
        &self,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<ResealBatch, StoreError> {
        let mut writer = self.writer.acquire().await.map_err(interpret)?;
        let mut tx = writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(interpret)?;
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
