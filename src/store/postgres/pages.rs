//! Paged reads in PostgreSQL: List (by namespace and state, in (namespace, key) order),
//! ListOrphaned (due rows in (due_at, namespace, key) order) with the in-place quarantine of
//! a row whose sealed fields do not open, and the gauges. The paging loops and opening the
//! rows are `store::receipts`' and `store::orphans`'. Which index serves which query:
//! docs/DESIGN.md §4.4 and migration 0008.

use super::rows::row;
use super::{PgDriver, clock, counted, interpret, micros};
use crate::domain::{Receipt, State};
use crate::store::driver::{Pages, Row};
use crate::store::row::columns;
use crate::store::{
    Gauges, ListQuery, MAX_OVERVIEW_NAMESPACES, NamespaceCounts, NotifyQueue, OrphanCounts,
    OrphanCursor, OrphanQuery, PoolStats, StoreError, StoredBlobs,
};
use async_trait::async_trait;

/// The console's filters (`ListQuery::key_prefix`, `updated_since`), NULL for a List call:
/// applied to the rows the page's index range yields, in its order.
macro_rules! list_filters {
    () => {
        "
      AND ($7::text IS NULL OR starts_with(key, $7))
      AND ($8::timestamptz IS NULL OR updated_at >= $8)"
    };
}

/// The cursor is always bound: the first page starts after ('', ''), which comes before every
/// row since namespaces and keys are never empty. So the cursor is always an index condition,
/// in a custom plan and a generic one alike.
///
/// List of states that include COMPLETED: the primary key is the page's order, and
/// completed receipts are the bulk of a tenant's, so few rows are read past the page.
const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts
    WHERE tenant_id = $1 AND state = ANY($2::text[])
      AND ($3::text IS NULL OR namespace = $3)
      AND (namespace, key) > ($4, $5::text)",
    list_filters!(),
    "
    ORDER BY namespace, key
    LIMIT $6"
);

/// The conditions of a List without COMPLETED on one state's rows. A state not asked for is
/// a one-time filter: its branch reads nothing.
macro_rules! list_branch {
    ($state:literal) => {
        concat!(
            " FROM receipts
    WHERE tenant_id = $1 AND state = '",
            $state,
            "' AND '",
            $state,
            "' = ANY($2::text[])
      AND ($3::text IS NULL OR namespace = $3)
      AND (namespace, key) > ($4, $5::text)",
            list_filters!()
        )
    };
}

/// List of states without COMPLETED (the dead letters, say): each state from the index that
/// holds it, merged. RETRY_WAIT and QUARANTINED are ordered ranges of `receipts_list_idx`
/// (`state = …` implies its predicate). PROCESSING is in no index of its own (a Claim or
/// Heartbeat would write it): its rows are either the tenant's unfinished receipts in
/// `receipts_due_idx`, sorted, or the primary key in page order, filtered, whichever the
/// planner expects to read less of.
const LIST_UNFINISHED_OR_DEAD: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM (
    (SELECT ",
    columns!(),
    list_branch!("processing"),
    " AND due_at IS NOT NULL
    ORDER BY namespace, key
    LIMIT $6)
    UNION ALL
    (SELECT ",
    columns!(),
    list_branch!("retry_wait"),
    "
    ORDER BY namespace, key
    LIMIT $6)
    UNION ALL
    (SELECT ",
    columns!(),
    list_branch!("quarantined"),
    "
    ORDER BY namespace, key
    LIMIT $6)
) page
ORDER BY namespace, key
LIMIT $6"
);

const ORPHANS: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts
    WHERE tenant_id = $1
      AND due_at <= ",
    clock!("$8", "$2"),
    "
      AND ($3::text IS NULL OR namespace = $3)
      AND ($4::timestamptz IS NULL OR (due_at, namespace, key) > ($4, $5::text, $6::text))
    ORDER BY due_at, namespace, key
    LIMIT $7"
);

/// The row quarantined only if nobody changed it since it was read.
macro_rules! quarantine_unchanged {
    () => {
        concat!(
            "UPDATE receipts SET state = 'quarantined', last_error = $4,
    claim_token = NULL, lease_expires_at = NULL, next_attempt_at = NULL,
    updated_at = ",
            clock!("$5", "$6"),
            "
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3 AND state = $7 AND attempt = $8
      AND claim_token IS NOT DISTINCT FROM $9
      AND last_error IS NOT DISTINCT FROM $10 AND checkpoint IS NOT DISTINCT FROM $11
      AND response IS NOT DISTINCT FROM $12 AND recovery_payload IS NOT DISTINCT FROM $13"
        )
    };
}

/// Quarantines the row only if nobody changed it since it was read, and counts the bytes
/// its new last error adds.
const QUARANTINE: &str = concat!(
    "WITH q AS (
    ",
    quarantine_unchanged!(),
    "
    RETURNING tenant_id,
        octet_length(last_error) - COALESCE(octet_length($10::bytea), 0) AS bytes),",
    counted!(
        "
        SELECT tenant_id, 0, bytes FROM q"
    ),
    "
SELECT count(*) FROM q"
);

/// [`QUARANTINE`] without its count, for Citus (as `rows.rs`'s `WRITE_SEALED_ROWS`).
const QUARANTINE_ROWS: &str = quarantine_unchanged!();

/// Orphans of every tenant by reason. `due_at <= …` implies the partial index's predicate
/// (`due_at IS NOT NULL`), so only unfinished receipts are visited.
const COUNT: &str = concat!(
    "SELECT
        count(*) FILTER (WHERE state = 'processing') AS lease_expired,
        count(*) FILTER (WHERE state = 'retry_wait') AS retry_due
    FROM receipts
    WHERE due_at <= ",
    clock!("$1", "$2")
);

#[async_trait]
impl Pages for PgDriver {
    async fn list_rows(&self, tenant: &str, query: &ListQuery) -> Result<Vec<Row>, StoreError> {
        let after = query.after.as_ref();
        let states = query.state_names();
        let sql = if states.contains(&State::Completed.as_str()) {
            LIST
        } else {
            LIST_UNFINISHED_OR_DEAD
        };
        let rows = sqlx::query(sql)
            .bind(tenant)
            .bind(states)
            .bind(&query.namespace)
            .bind(after.map_or("", |c| c.namespace.as_str()))
            .bind(after.map_or("", |c| c.key.as_str()))
            .bind(i64::from(query.limit) + 1)
            .bind(&query.key_prefix)
            .bind(query.updated_since)
            .fetch_all(&self.pool);
        let rows = self
            .bounded(async { rows.await.map_err(interpret) })
            .await?;
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
            .bind(self.offset().saturating_sub(micros(query.overdue_by)))
            .bind(&query.namespace)
            .bind(after.map(|c| c.due_at))
            .bind(after.map(|c| c.namespace.as_str()))
            .bind(after.map(|c| c.key.as_str()))
            .bind(limit as i64)
            .bind(self.frozen())
            .fetch_all(&self.pool);
        let rows = self
            .bounded(async { rows.await.map_err(interpret) })
            .await?;
        rows.iter().map(row).collect()
    }

    async fn quarantine_unreadable(
        &self,
        tenant: &str,
        receipt: &Receipt,
        blobs: &StoredBlobs,
        error: &[u8],
    ) -> Result<(), StoreError> {
        let sql = if self.citus {
            QUARANTINE_ROWS
        } else {
            QUARANTINE
        };
        let done = sqlx::query(sql)
            .bind(tenant)
            .bind(&receipt.id.namespace)
            .bind(&receipt.id.key)
            .bind(error)
            .bind(self.frozen())
            .bind(self.offset())
            .bind(receipt.state.as_str())
            .bind(i32::try_from(receipt.attempt).unwrap_or(i32::MAX))
            .bind(receipt.claim_token)
            .bind(&blobs.last_error)
            .bind(&blobs.checkpoint)
            .bind(&blobs.response)
            .bind(&blobs.recovery_payload)
            .execute(&self.pool);
        self.bounded(async { done.await.map_err(interpret) })
            .await?;
        Ok(())
    }
}

/// A tenant's receipts by namespace and state, and its orphans (`due_at` is set only while
/// unfinished), over the primary key's range of the tenant.
const BY_NAMESPACE: &str = concat!(
    "SELECT namespace,
        count(*) FILTER (WHERE state = 'processing'),
        count(*) FILTER (WHERE state = 'retry_wait'),
        count(*) FILTER (WHERE state = 'completed'),
        count(*) FILTER (WHERE state = 'quarantined'),
        count(*) FILTER (WHERE due_at <= ",
    clock!("$2", "$3"),
    ")
    FROM receipts WHERE tenant_id = $1
    GROUP BY namespace ORDER BY namespace LIMIT $4"
);

#[async_trait]
impl Gauges for PgDriver {
    async fn tenant_usage(&self, tenant: &str) -> Result<(i64, i64), StoreError> {
        let figures = sqlx::query_as(
            "SELECT COALESCE(sum(receipts), 0)::int8, COALESCE(sum(stored_bytes), 0)::int8
             FROM tenant_usage WHERE tenant_id = $1",
        )
        .bind(tenant)
        .fetch_one(&self.pool);
        self.bounded(async { figures.await.map_err(interpret) })
            .await
    }

    async fn namespace_counts(&self, tenant: &str) -> Result<Vec<NamespaceCounts>, StoreError> {
        let rows = sqlx::query_as(BY_NAMESPACE)
            .bind(tenant)
            .bind(self.frozen())
            .bind(self.offset())
            .bind(MAX_OVERVIEW_NAMESPACES)
            .fetch_all(&self.pool);
        let rows: Vec<(String, i64, i64, i64, i64, i64)> = self
            .bounded(async { rows.await.map_err(interpret) })
            .await?;
        Ok(rows.into_iter().map(NamespaceCounts::from_row).collect())
    }

    async fn count_orphans(&self) -> Result<OrphanCounts, StoreError> {
        let counts = sqlx::query_as(COUNT)
            .bind(self.frozen())
            .bind(self.offset())
            .fetch_one(&self.pool);
        let (lease_expired, retry_due): (i64, i64) = self
            .bounded(async { counts.await.map_err(interpret) })
            .await?;
        Ok(OrphanCounts {
            lease_expired: u64::try_from(lease_expired).unwrap_or_default(),
            retry_due: u64::try_from(retry_due).unwrap_or_default(),
        })
    }

    fn pool_stats(&self) -> PoolStats {
        PoolStats::of(self.pool.size(), self.pool.num_idle())
    }

    fn notify_queue(&self) -> Option<NotifyQueue> {
        Some(NotifyQueue {
            usage: self.queue.usage(),
            listeners_terminated: self.queue.terminated(),
        })
    }
}
