//! List and Redrive in PostgreSQL: the dead-letter admin calls. List reads a page in
//! (namespace, key) order; Redrive locks the row, applies `domain::redrive` and writes back
//! the columns it changes (never a sealed one, so those stay exactly as stored).

use super::row::{ReceiptRow, columns};
use super::{LOCK, PgStore, interpret};
use crate::domain::{Receipt, ReceiptKey, Timestamp, redrive};
use crate::store::{ListPage, ListQuery, StoreError, same_sealed_fields};
use sqlx::{FromRow, Row};

/// The cursor is always bound: the first page starts after ('', ''), which comes before every
/// row since namespaces and keys are never empty. So the cursor is always an index condition,
/// in a custom plan and a generic one alike.
const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts
    WHERE tenant_id = $1 AND state = ANY($2::text[])
      AND ($3::text IS NULL OR namespace = $3)
      AND (namespace, key) > ($4, $5::text)
    ORDER BY namespace, key
    LIMIT $6"
);

/// The columns a redrive changes; the sealed columns are left as stored.
const REDRIVE: &str = "UPDATE receipts SET state = $4, attempt = $5, free_attempts = $6,
    claim_token = $7, lease_expires_at = $8, next_attempt_at = $9, updated_at = $10,
    completed_at = $11
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3";

impl PgStore {
    /// One page of the tenant's receipts in the query's namespace and states.
    pub(super) async fn list_receipts(
        &self,
        tenant: &str,
        query: &ListQuery,
    ) -> Result<ListPage, StoreError> {
        let after = query.after.as_ref();
        let rows = sqlx::query(LIST)
            .bind(tenant)
            .bind(query.state_names())
            .bind(&query.namespace)
            .bind(after.map_or("", |c| c.namespace.as_str()))
            .bind(after.map_or("", |c| c.key.as_str()))
            .bind(i64::from(query.limit) + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(interpret)?;
        let parts = rows
            .iter()
            .map(|row| ReceiptRow::from_row(row).map_err(interpret)?.into_parts())
            .collect::<Result<_, StoreError>>()?;
        ListPage::open(&self.seal, tenant, parts, query.limit)
    }

    /// Redrives the tenant's receipt `id` under a row lock.
    pub(super) async fn redrive_receipt(
        &self,
        tenant: &str,
        id: &ReceiptKey,
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
        let next = redrive(&current, now)?;
        debug_assert!(
            same_sealed_fields(&current, &next),
            "redrive changes no sealed field"
        );
        sqlx::query(REDRIVE)
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
            .execute(&mut *tx)
            .await
            .map_err(interpret)?;
        tx.commit().await.map_err(interpret)?;
        Ok(next)
    }
}
