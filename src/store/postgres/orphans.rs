//! ListOrphaned in PostgreSQL. The query and the in-place quarantine of a row whose sealed
//! fields do not open; the paging loop is [`crate::store::list_orphans`].

use super::row::{ReceiptRow, columns};
use super::{PgStore, interpret, micros};
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
    WHERE tenant_id = $1
      AND due_at <= COALESCE($8::timestamptz, now()) + $2::bigint * interval '1 microsecond'
      AND ($3::text IS NULL OR namespace = $3)
      AND ($4::timestamptz IS NULL OR (due_at, namespace, key) > ($4, $5::text, $6::text))
    ORDER BY due_at, namespace, key
    LIMIT $7"
);

/// Orphans of every tenant by reason. `due_at <= …` implies the partial index's predicate
/// (`due_at IS NOT NULL`), so only unfinished receipts are visited.
const COUNT: &str = "SELECT
        count(*) FILTER (WHERE state = 'processing') AS lease_expired,
        count(*) FILTER (WHERE state = 'retry_wait') AS retry_due
    FROM receipts
    WHERE due_at <= COALESCE($1::timestamptz, now()) + $2::bigint * interval '1 microsecond'";

/// Quarantines the row only if nobody changed it since it was read.
const QUARANTINE: &str = "UPDATE receipts SET state = 'quarantined', last_error = $4,
    claim_token = NULL, lease_expires_at = NULL, next_attempt_at = NULL,
    updated_at = COALESCE($5::timestamptz, now()) + $6::bigint * interval '1 microsecond'
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3 AND state = $7 AND attempt = $8
      AND claim_token IS NOT DISTINCT FROM $9
      AND last_error IS NOT DISTINCT FROM $10 AND checkpoint IS NOT DISTINCT FROM $11
      AND response IS NOT DISTINCT FROM $12 AND recovery_payload IS NOT DISTINCT FROM $13";

impl PgStore {
    /// Orphans of every tenant, due now (the metrics gauge).
    pub(super) async fn orphan_counts(&self) -> Result<OrphanCounts, StoreError> {
        let row = sqlx::query(COUNT)
            .bind(self.clock.frozen())
            .bind(self.offset())
            .fetch_one(&self.pool)
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

    /// The pool's connections (the metrics gauge).
    pub(super) fn pools(&self) -> PoolStats {
        PoolStats::of(self.pool.size(), self.pool.num_idle())
    }
}

impl OrphanRows for PgStore {
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
            .bind(self.offset().saturating_sub(micros(query.overdue_by)))
            .bind(&query.namespace)
            .bind(after.map(|c| c.due_at))
            .bind(after.map(|c| c.namespace.as_str()))
            .bind(after.map(|c| c.key.as_str()))
            .bind(limit as i64)
            .bind(self.clock.frozen())
            .fetch_all(&self.pool)
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
            .bind(self.clock.frozen())
            .bind(self.offset())
            .bind(receipt.state.as_str())
            .bind(i32::try_from(receipt.attempt).unwrap_or(i32::MAX))
            .bind(receipt.claim_token)
            .bind(&blobs.last_error)
            .bind(&blobs.checkpoint)
            .bind(&blobs.response)
            .bind(&blobs.recovery_payload)
            .execute(&self.pool)
            .await
            .map_err(interpret)?;
        Ok(())
    }
}
