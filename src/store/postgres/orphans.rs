//! ListOrphaned in PostgreSQL. A listed row whose sealed fields do not open is quarantined
//! in place (so it blocks nobody) and skipped; the page fills from the rows after it.

use super::row::{ReceiptRow, columns};
use super::{PgStore, interpret, micros};
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

    /// One page of the tenant's orphans, quarantining those that do not open.
    pub(super) async fn orphans(
        &self,
        tenant: &str,
        query: &OrphanQuery,
    ) -> Result<OrphanPage, StoreError> {
        let mut listed = Vec::new();
        let mut after = query.after.clone();
        loop {
            let wanted = query.limit as usize + 1 - listed.len();
            let rows = sqlx::query(ORPHANS)
                .bind(tenant)
                .bind(self.offset().saturating_sub(micros(query.overdue_by)))
                .bind(&query.namespace)
                .bind(after.as_ref().map(|c| c.due_at))
                .bind(after.as_ref().map(|c| c.namespace.as_str()))
                .bind(after.as_ref().map(|c| c.key.as_str()))
                .bind(wanted as i64)
                .bind(self.clock.frozen())
                .fetch_all(&self.pool)
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
