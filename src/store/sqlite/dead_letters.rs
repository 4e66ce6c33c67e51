//! List and Redrive in SQLite: the dead-letter admin calls. List reads a page in
//! (namespace, key) order on a reader; Redrive re-reads the row in a `BEGIN IMMEDIATE`
//! transaction on the writer, applies `domain::redrive` and writes back the columns it
//! changes (never a sealed one, so those stay exactly as stored).

use super::row::{ReceiptRow, columns, micros};
use super::{SqliteStore, fetch, interpret};
use crate::domain::{Receipt, ReceiptKey, redrive};
use crate::store::{ListPage, ListQuery, StoreError, same_sealed_fields};
use sqlx::FromRow;

/// The List query over `$from`. The states are four slots, unused ones NULL (which matches
/// nothing). The first page starts after ('', ''), which comes before every row: namespaces
/// and keys are never empty.
macro_rules! list_from {
    ($from:literal) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM ",
            $from,
            "
    WHERE tenant_id = ?1 AND state IN (?2, ?3, ?4, ?5)
      AND (?6 IS NULL OR namespace = ?6)
      AND (namespace, key) > (?7, ?8)
    ORDER BY namespace, key
    LIMIT ?9"
        )
    };
}

/// Every state: the primary key's order is the page's order.
const LIST_EVERY_STATE: &str = list_from!("receipts");

/// Some states, e.g. the few dead letters among many completed receipts. SQLite cannot see
/// through the bound states and would walk the primary key over every row of the tenant;
/// the state index reads only the rows of those states (and sorts them).
const LIST_SOME_STATES: &str = list_from!("receipts INDEXED BY receipts_state_idx");

/// The columns a redrive changes; the sealed columns are left as stored.
const REDRIVE: &str = "UPDATE receipts SET state = ?4, attempt = ?5, free_attempts = ?6,
    claim_token = ?7, lease_expires_at = ?8, next_attempt_at = ?9, updated_at = ?10,
    completed_at = ?11
    WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3";

impl SqliteStore {
    /// One page of the tenant's receipts in the query's namespace and states.
    pub(super) async fn list_receipts(
        &self,
        tenant: &str,
        query: &ListQuery,
    ) -> Result<ListPage, StoreError> {
        let states = query.state_names();
        let state = |i: usize| states.get(i).copied();
        let after = query.after.as_ref();
        let sql = match states.len() {
            4 => LIST_EVERY_STATE,
            _ => LIST_SOME_STATES,
        };
        let rows = sqlx::query(sql)
            .bind(tenant)
            .bind(state(0))
            .bind(state(1))
            .bind(state(2))
            .bind(state(3))
            .bind(&query.namespace)
            .bind(after.map_or("", |c| c.namespace.as_str()))
            .bind(after.map_or("", |c| c.key.as_str()))
            .bind(i64::from(query.limit) + 1)
            .fetch_all(&self.reader)
            .await
            .map_err(interpret)?;
        let parts = rows
            .iter()
            .map(|row| ReceiptRow::from_row(row).map_err(interpret)?.into_parts())
            .collect::<Result<_, StoreError>>()?;
        ListPage::open(&self.seal, tenant, parts, query.limit)
    }

    /// Redrives the tenant's receipt `id` on the writer.
    pub(super) async fn redrive_receipt(
        &self,
        tenant: &str,
        id: &ReceiptKey,
    ) -> Result<Receipt, StoreError> {
        let mut tx = self.begin_write().await?;
        let current = fetch(&mut tx, &self.seal, tenant, id)
            .await?
            .ok_or(StoreError::NotFound)?;
        let next = redrive(&current, self.clock.now())?;
        debug_assert!(
            same_sealed_fields(&current, &next),
            "redrive changes no sealed field"
        );
        sqlx::query(REDRIVE)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .bind(next.state.as_str())
            .bind(i64::from(next.attempt))
            .bind(i64::from(next.free_attempts))
            .bind(next.claim_token)
            .bind(next.lease_expires_at.map(micros))
            .bind(next.next_attempt_at.map(micros))
            .bind(micros(next.updated_at))
            .bind(next.completed_at.map(micros))
            .execute(&mut *tx)
            .await
            .map_err(interpret)?;
        tx.commit().await.map_err(interpret)?;
        Ok(next)
    }
}
