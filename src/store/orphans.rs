//! ListOrphaned for both stores: the query and page types, and the paging loop. A driver
//! supplies one fetch and one quarantine; [`list_orphans`] opens each
//! listed row and keeps fetching until the page is full — by count or by bytes
//! (`super::page`). A row whose sealed fields are
//! damaged or forged, or open to a last error that is not text, is quarantined in place
//! (so it blocks nobody); a row sealed under a
//! key that is not configured (or stored in plaintext that is no longer accepted) is only
//! skipped and logged, so it is listed again once the configuration is put right.

use super::driver::Driver;
use super::{PageBudget, StoreError, UNREADABLE};
use crate::domain::{Receipt, Timestamp};
use crate::seal::{Binding, Field};
use chrono::TimeDelta;

/// The last error an orphan is quarantined with when its fields open but its stored last
/// error is not UTF-8 (sealed like any other).
const MALFORMED: &str = "sealed data is malformed: last_error is not UTF-8";

/// Where a page of orphans starts (exclusive): the sort key of the last orphan returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanCursor {
    /// The last orphan's due time.
    pub due_at: Timestamp,
    /// The last orphan's namespace.
    pub namespace: String,
    /// The last orphan's key.
    pub key: String,
}

/// A ListOrphaned query, already validated.
#[derive(Debug, Clone)]
pub struct OrphanQuery {
    /// Only this namespace; `None` for every namespace of the tenant.
    pub namespace: Option<String>,
    /// At most this many orphans.
    pub limit: u32,
    /// At most this many bytes of orphans ([`super::receipt_bytes`]), but at least one.
    pub max_bytes: usize,
    /// Continue after this orphan.
    pub after: Option<OrphanCursor>,
    /// Only orphans due at least this long ago.
    pub overdue_by: TimeDelta,
}

/// One page of orphans, oldest due first.
#[derive(Debug, Clone)]
pub struct OrphanPage {
    /// PROCESSING receipts with an expired lease and RETRY_WAIT receipts that are due.
    pub orphans: Vec<Receipt>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<OrphanCursor>,
}

/// How many receipts nobody works on although they are not done, across tenants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrphanCounts {
    /// PROCESSING with an expired lease (`LEASE_EXPIRED`).
    pub lease_expired: u64,
    /// RETRY_WAIT whose retry is due (`RETRY_DUE`).
    pub retry_due: u64,
}

/// One namespace of a tenant by state, with its orphans (the console's overview).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceCounts {
    /// The namespace.
    pub namespace: String,
    /// Receipts PROCESSING (orphans with an expired lease included).
    pub processing: u64,
    /// Receipts RETRY_WAIT (orphans whose retry is due included).
    pub retry_wait: u64,
    /// Receipts COMPLETED.
    pub completed: u64,
    /// Receipts QUARANTINED: the dead letters.
    pub quarantined: u64,
    /// Orphans: PROCESSING with an expired lease, or RETRY_WAIT whose retry is due.
    pub orphans: u64,
}

impl NamespaceCounts {
    /// From a driver's row: the namespace, then the counts in field order.
    pub(crate) fn from_row(row: (String, i64, i64, i64, i64, i64)) -> NamespaceCounts {
        let n = |v: i64| u64::try_from(v).unwrap_or_default();
        NamespaceCounts {
            namespace: row.0,
            processing: n(row.1),
            retry_wait: n(row.2),
            completed: n(row.3),
            quarantined: n(row.4),
            orphans: n(row.5),
        }
    }
}

/// One page of `tenant`'s orphans, quarantining those that do not open, fetched a chunk at
/// a time until the page's budget of orphans and bytes is spent ([`PageBudget`]).
pub(crate) async fn list_orphans<D: Driver>(
    driver: &D,
    tenant: &str,
    query: &OrphanQuery,
) -> Result<OrphanPage, StoreError> {
    let mut budget = PageBudget::new(query.limit, query.max_bytes);
    let mut listed = Vec::new();
    let mut after = query.after.clone();
    loop {
        // One more than fits: the page is full only once an orphan does not fit.
        let wanted = budget.next_fetch() + 1;
        let rows = driver
            .orphan_rows(tenant, query, after.as_ref(), wanted)
            .await?;
        let fetched = rows.len();
        for (mut receipt, blobs) in rows {
            let cursor = receipt.due_at().map(|due_at| OrphanCursor {
                due_at,
                namespace: receipt.id.namespace.clone(),
                key: receipt.id.key.clone(),
            });
            match blobs.open_into(driver.sealer(), tenant, &mut receipt) {
                Ok(()) if budget.take(&receipt) => listed.push(receipt),
                // The page is full: this orphan starts the next one.
                Ok(()) => {
                    return Ok(OrphanPage {
                        orphans: listed,
                        next: after,
                    });
                }
                Err(StoreError::Sealed(reason)) if reason.is_configuration() => {
                    tracing::error!(
                        namespace = %receipt.id.namespace,
                        %reason,
                        "skipping an orphan this configuration cannot open; \
                         configure its seal key again"
                    );
                }
                Err(StoreError::Sealed(reason)) => {
                    tracing::error!(
                        namespace = %receipt.id.namespace,
                        %reason,
                        "quarantining an orphan whose sealed data does not open"
                    );
                    quarantine(driver, tenant, &receipt, &blobs, UNREADABLE).await?;
                }
                // Every field opened, but what must be text is not: damaged as surely as a
                // tag that does not verify, and it must not block the others either.
                Err(StoreError::Corrupt(reason)) => {
                    tracing::error!(
                        namespace = %receipt.id.namespace,
                        %reason,
                        "quarantining an orphan whose stored data is malformed"
                    );
                    quarantine(driver, tenant, &receipt, &blobs, MALFORMED).await?;
                }
                Err(other) => return Err(other),
            }
            after = Some(
                cursor.ok_or_else(|| StoreError::Corrupt("orphan without a due time".into()))?,
            );
        }
        if fetched < wanted {
            return Ok(OrphanPage {
                orphans: listed,
                next: None,
            });
        }
    }
}

/// Quarantines the orphan `receipt` in place with `error` (sealed under the row's own
/// life) as its last error, if the row is unchanged since it was read (`blobs`).
async fn quarantine<D: Driver>(
    driver: &D,
    tenant: &str,
    receipt: &Receipt,
    blobs: &super::StoredBlobs,
    error: &str,
) -> Result<(), StoreError> {
    let at = Binding {
        tenant,
        namespace: &receipt.id.namespace,
        key: &receipt.id.key,
        life: blobs.life(),
    };
    let sealed = driver.sealer().seal(at, Field::LastError, error.as_bytes());
    driver
        .quarantine_unreadable(tenant, receipt, blobs, &sealed)
        .await
}
