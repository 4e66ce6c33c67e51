//! ListOrphaned in SQLite. A listed row whose sealed fields do not open is quarantined in
//! place (so it blocks nobody) and skipped; the page fills from the rows after it.

use super::row::{ReceiptRow, columns, micros};
use super::{SqliteStore, interpret};
use crate::domain::Receipt;
use crate::seal::{Binding, Field};
use crate::store::{
    OrphanCounts, OrphanCursor, OrphanPage, OrphanQuery, PoolStats, StoreError, StoredBlobs,
    UNREADABLE,
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

    /// One page of the tenant's orphans, quarantining those that do not open.
    pub(super) async fn orphans(
        &self,
        tenant: &str,
        query: &OrphanQuery,
    ) -> Result<OrphanPage, StoreError> {
        let due_by = self.clock.now() - query.overdue_by;
        let mut listed = Vec::new();
        let mut after = query.after.clone();
        loop {
            let wanted = query.limit as usize + 1 - listed.len();
            let rows = sqlx::query(ORPHANS)
                .bind(tenant)
                .bind(micros(due_by))
                .bind(&query.namespace)
                .bind(after.as_ref().map(|c| micros(c.due_at)))
                .bind(after.as_ref().map(|c| c.namespace.as_str()))
                .bind(after.as_ref().map(|c| c.key.as_str()))
                .bind(wanted as i64)
                .fetch_all(&self.reader)
                .await
                .map_err(interpret)?;
            let fetched = rows.len();
            for row in &rows {
                let (mut receipt, blobs) =
                    ReceiptRow::from_row(row).map_err(interpret)?.into_parts()?;
                after = receipt.due_at().map(|due_at| OrphanCursor {
                    due_at,
                    namespace: receipt.id.namespace.clone(),
                    key: receipt.id.key.clone(),
                });
                match blobs.open_into(&self.seal, tenant, &mut receipt) {
                    Ok(()) => listed.push(receipt),
                    Err(StoreError::Sealed(reason)) => {
                        tracing::error!(
                            namespace = %receipt.id.namespace,
                            %reason,
                            "quarantining an orphan whose sealed data does not open"
                        );
                        self.quarantine_unreadable(tenant, &receipt, &blobs).await?;
                    }
                    Err(other) => return Err(other),
                }
            }
            if fetched < wanted || listed.len() > query.limit as usize || after.is_none() {
                return OrphanPage::from_rows(listed, query.limit);
            }
        }
    }

    /// Quarantines `receipt` (read with `blobs`) with a sealed [`UNREADABLE`] error, leaving
    /// its other sealed fields as they are (a key added back later still opens them).
    async fn quarantine_unreadable(
        &self,
        tenant: &str,
        receipt: &Receipt,
        blobs: &StoredBlobs,
    ) -> Result<(), StoreError> {
        let at = Binding {
            tenant,
            namespace: &receipt.id.namespace,
            key: &receipt.id.key,
        };
        let error = self.seal.seal(at, Field::LastError, UNREADABLE.as_bytes());
        sqlx::query(QUARANTINE)
            .bind(tenant)
            .bind(&receipt.id.namespace)
            .bind(&receipt.id.key)
            .bind(&error)
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
