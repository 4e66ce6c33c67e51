//! ListOrphaned in SQLite. The query and the in-place quarantine of a row whose sealed
//! fields do not open; the paging loop is [`crate::store::list_orphans`].

use super::row::{ReceiptRow, columns, micros};
use super::{SqliteStore, interpret};
use crate::domain::Receipt;
use crate::seal::Sealer;
use crate::store::{
    OrphanCounts, OrphanCursor, OrphanQuery, OrphanRows, PoolStats, StoreError, StoredBlobs,
};
use sqlx::{FromRow, Row};

const ORPHANS: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts
    WHERE tenant_id = ?1 AND due_at <= ?2
      AND (?3 IS NULL OR namespace = ?3)
      AND (?4 IS NULL OR (due_at, namespace, key) > (?4, ?5, ?6))
    ORDER BY due_at, namespace, key
    LIMIT ?7"
);

/// Orphans of every tenant by reason, through the partial due-time index (which holds only
/// unfinished receipts); without `INDEXED BY` SQLite would scan the whole table, since the
/// index leads with the tenant.
const COUNT: &str = "SELECT
        COALESCE(SUM(state = 'processing'), 0) AS lease_expired,
        COALESCE(SUM(state = 'retry_wait'), 0) AS retry_due
    FROM receipts INDEXED BY receipts_due_idx
    WHERE due_at IS NOT NULL AND due_at <= ?1";

/// Quarantines the row only if nobody changed it since it was read.
const QUARANTINE: &str = "UPDATE receipts SET state = 'quarantined', last_error = ?4,
    claim_token = NULL, lease_expires_at = NULL, next_attempt_at = NULL, updated_at = ?5
    WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3 AND state = ?6 AND attempt = ?7
      AND claim_token IS ?8 AND last_error IS ?9 AND checkpoint IS ?10 AND response IS ?11
      AND recovery_payload IS ?12";

impl SqliteStore {
    /// Orphans of every tenant, due now (the metrics gauge).
    pub(super) async fn orphan_counts(&self) -> Result<OrphanCounts, StoreError> {
        let row = sqlx::query(COUNT)
            .bind(micros(self.clock.now()))
            .fetch_one(&self.reader)
            .await
            .map_err(interpret)?;
        let count = |column: &str| -> Result<u64, StoreError> {
            let n: i64 = row.try_get(column).map_err(interpret)?;
            Ok(u64::try_from(n).unwrap_or_default())
        };
        Ok(OrphanCounts {
            lease_expired: count("lease_expired")?,
            retry_due: count("retry_due")?,
        })
    }

    /// Both pools' connections together (the metrics gauge).
    pub(super) fn pools(&self) -> PoolStats {
        let (reader, writer) = (&self.reader, &self.writer);
        let size = reader.size() + writer.size();
        PoolStats::of(size, reader.num_idle() + writer.num_idle())
    }
}

impl OrphanRows for SqliteStore {
    fn sealer(&self) -> &Sealer {
        &self.seal
    }

    async fn fetch_orphans(
        &self,
        tenant: &str,
        query: &OrphanQuery,
        after: Option<&OrphanCursor>,
        limit: usize,
    ) -> Result<Vec<(Receipt, StoredBlobs)>, StoreError> {
        let rows = sqlx::query(ORPHANS)
            .bind(tenant)
            .bind(micros(self.clock.now() - query.overdue_by))
            .bind(&query.namespace)
            .bind(after.map(|c| micros(c.due_at)))
            .bind(after.map(|c| c.namespace.as_str()))
            .bind(after.map(|c| c.key.as_str()))
            .bind(limit as i64)
            .fetch_all(&self.reader)
            .await
            .map_err(interpret)?;
        rows.iter()
            .map(|row| ReceiptRow::from_row(row).map_err(interpret)?.into_parts())
            .collect()
    }

    async fn quarantine_unreadable(
        &self,
        tenant: &str,
        receipt: &Receipt,
        blobs: &StoredBlobs,
        error: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query(QUARANTINE)
            .bind(tenant)
            .bind(&receipt.id.namespace)
            .bind(&receipt.id.key)
            .bind(error)
            .bind(micros(self.clock.now()))
            .bind(receipt.state.as_str())
            .bind(i64::from(receipt.attempt))
            .bind(receipt.claim_token)
            .bind(&blobs.last_error)
            .bind(&blobs.checkpoint)
            .bind(&blobs.response)
            .bind(&blobs.recovery_payload)
            .execute(&self.writer)
            .await
            .map_err(interpret)?;
        Ok(())
    }
}
