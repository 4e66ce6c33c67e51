//! Paged reads in SQLite, on the reader pool: List (by namespace and state, in
//! (namespace, key) order), ListOrphaned (due rows in (due_at, namespace, key) order) with
//! the in-place quarantine (on the writer) of a row whose sealed fields do not open, and the
//! gauges. The paging loops and opening the rows are `store::receipts`' and
//! `store::orphans`'. Which index serves which query: docs/DESIGN.md §4.4 and migration
//! 0007.

use super::rows::row;
use super::{SqliteDriver, interpret, micros};
use crate::domain::{Receipt, State};
use crate::store::driver::{Pages, Row};
use crate::store::row::columns;
use crate::store::{
    Gauges, ListQuery, MAX_OVERVIEW_NAMESPACES, NamespaceCounts, OrphanCounts, OrphanCursor,
    OrphanQuery, PoolStats, StoreError, StoredBlobs,
};
use async_trait::async_trait;

/// The console's filters (`ListQuery::key_prefix`, `updated_since`), NULL for a List call:
/// applied to the rows the page's index range yields, in its order. `substr` and `length`
/// count characters of the key and the prefix alike.
macro_rules! list_filters {
    () => {
        "
      AND (?10 IS NULL OR substr(key, 1, length(?10)) = ?10)
      AND (?11 IS NULL OR updated_at >= ?11)"
    };
}

/// List of every state, or of some with COMPLETED: the primary key's order is the page's
/// order, and completed receipts are the bulk of a tenant's, so few rows are read past the
/// page. The states are four slots, unused ones NULL (which matches nothing). The first page
/// starts after ('', ''), which comes before every row: namespaces and keys are never empty.
const LIST_BY_KEY: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts
    WHERE tenant_id = ?1 AND state IN (?2, ?3, ?4, ?5)
      AND (?6 IS NULL OR namespace = ?6)
      AND (namespace, key) > (?7, ?8)",
    list_filters!(),
    "
    ORDER BY namespace, key
    LIMIT ?9"
);

/// One state's rows of a List without COMPLETED, in page order, from `$index`, whose
/// partial predicate the conditions imply (`INDEXED BY` requires it): `state = …` implies
/// `receipts_list_idx`'s, `$also` is what else it takes. A state not asked for is a constant
/// false condition, and its branch reads nothing.
macro_rules! list_branch {
    ($index:literal, $state:literal, $also:literal) => {
        concat!(
            "SELECT * FROM (SELECT ",
            columns!(),
            " FROM receipts INDEXED BY ",
            $index,
            "
    WHERE tenant_id = ?1 AND state = '",
            $state,
            "'",
            $also,
            " AND '",
            $state,
            "' IN (?2, ?3, ?4, ?5)
      AND (?6 IS NULL OR namespace = ?6)
      AND (namespace, key) > (?7, ?8)",
            list_filters!(),
            "
    ORDER BY namespace, key
    LIMIT ?9)"
        )
    };
}

/// List of states without COMPLETED (the dead letters, say): each state from the index that
/// holds it, merged. RETRY_WAIT and QUARANTINED are ordered ranges of `receipts_list_idx`;
/// PROCESSING is in no index of its own (a Claim or Heartbeat would write it), so its rows
/// are the tenant's unfinished receipts in `receipts_due_idx`, sorted.
const LIST_UNFINISHED_OR_DEAD: &str = concat!(
    list_branch!("receipts_due_idx", "processing", " AND due_at IS NOT NULL"),
    "
    UNION ALL ",
    list_branch!("receipts_list_idx", "retry_wait", ""),
    "
    UNION ALL ",
    list_branch!("receipts_list_idx", "quarantined", ""),
    "
    ORDER BY namespace, key
    LIMIT ?9"
);

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

/// Quarantines the row only if nobody changed it since it was read.
const QUARANTINE: &str = "UPDATE receipts SET state = 'quarantined', last_error = ?4,
    claim_token = NULL, lease_expires_at = NULL, next_attempt_at = NULL, updated_at = ?5
    WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3 AND state = ?6 AND attempt = ?7
      AND claim_token IS ?8 AND last_error IS ?9 AND checkpoint IS ?10 AND response IS ?11
      AND recovery_payload IS ?12";

/// Orphans of every tenant by reason, through the partial due-time index (which holds only
/// unfinished receipts); without `INDEXED BY` SQLite would scan the whole table, since the
/// index leads with the tenant.
const COUNT: &str = "SELECT
        COALESCE(SUM(state = 'processing'), 0) AS lease_expired,
        COALESCE(SUM(state = 'retry_wait'), 0) AS retry_due
    FROM receipts INDEXED BY receipts_due_idx
    WHERE due_at IS NOT NULL AND due_at <= ?1";

/// A tenant's receipts by namespace and state, and its orphans (`due_at` is set only while
/// unfinished), over the primary key's range of the tenant.
const BY_NAMESPACE: &str = "SELECT namespace,
        COALESCE(SUM(state = 'processing'), 0),
        COALESCE(SUM(state = 'retry_wait'), 0),
        COALESCE(SUM(state = 'completed'), 0),
        COALESCE(SUM(state = 'quarantined'), 0),
        COALESCE(SUM(due_at IS NOT NULL AND due_at <= ?2), 0)
    FROM receipts WHERE tenant_id = ?1
    GROUP BY namespace ORDER BY namespace LIMIT ?3";

#[async_trait]
impl Pages for SqliteDriver {
    async fn list_rows(&self, tenant: &str, query: &ListQuery) -> Result<Vec<Row>, StoreError> {
        let states = query.state_names();
        let state = |i: usize| states.get(i).copied();
        let after = query.after.as_ref();
        let sql = if states.contains(&State::Completed.as_str()) {
            LIST_BY_KEY
        } else {
            LIST_UNFINISHED_OR_DEAD
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
            .bind(&query.key_prefix)
            .bind(query.updated_since.map(micros))
            .fetch_all(&self.reader)
            .await
            .map_err(interpret)?;
        rows.iter().map(row).collect()
    }

    async fn orphan_rows(
        &self,
        tenant: &str,
        query: &OrphanQuery,
        after: Option<&OrphanCursor>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError> {
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
        rows.iter().map(row).collect()
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

#[async_trait]
impl Gauges for SqliteDriver {
    async fn tenant_usage(&self, tenant: &str) -> Result<(i64, i64), StoreError> {
        sqlx::query_as(
            "SELECT COALESCE(sum(receipts), 0), COALESCE(sum(stored_bytes), 0)
             FROM tenant_usage WHERE tenant_id = ?",
        )
        .bind(tenant)
        .fetch_one(&self.reader)
        .await
        .map_err(interpret)
    }

    async fn namespace_counts(&self, tenant: &str) -> Result<Vec<NamespaceCounts>, StoreError> {
        let rows: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(BY_NAMESPACE)
            .bind(tenant)
            .bind(micros(self.clock.now()))
            .bind(MAX_OVERVIEW_NAMESPACES)
            .fetch_all(&self.reader)
            .await
            .map_err(interpret)?;
        Ok(rows.into_iter().map(NamespaceCounts::from_row).collect())
    }

    async fn count_orphans(&self) -> Result<OrphanCounts, StoreError> {
        let (lease_expired, retry_due): (i64, i64) = sqlx::query_as(COUNT)
            .bind(micros(self.clock.now()))
            .fetch_one(&self.reader)
            .await
            .map_err(interpret)?;
        Ok(OrphanCounts {
            lease_expired: u64::try_from(lease_expired).unwrap_or_default(),
            retry_due: u64::try_from(retry_due).unwrap_or_default(),
        })
    }

    /// Both pools' connections together.
    fn pool_stats(&self) -> PoolStats {
        let (reader, writer) = (&self.reader, &self.writer);
        let size = reader.size() + writer.size();
        PoolStats::of(size, reader.num_idle() + writer.num_idle())
    }
}
