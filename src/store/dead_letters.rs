//! The dead-letter admin calls at the store boundary: the List query (a tenant's receipts
//! filtered by namespace and state, keyset-paginated by (namespace, key), which never
//! changes for a receipt) and what the stores' Redrive relies on.

use super::{PageBudget, StoreError};
use crate::domain::{Receipt, State};

/// Where a page of [`ListPage`] starts (exclusive): the last receipt returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    /// The last receipt's namespace.
    pub namespace: String,
    /// The last receipt's key.
    pub key: String,
}

/// A List query, already validated.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Only this namespace; `None` for every namespace of the tenant.
    pub namespace: Option<String>,
    /// Only these states; empty for every state.
    pub states: Vec<State>,
    /// At most this many receipts.
    pub limit: u32,
    /// At most this many bytes of receipts ([`super::receipt_bytes`]), but at least one.
    pub max_bytes: usize,
    /// Continue after this receipt.
    pub after: Option<ListCursor>,
    /// Only keys that start with this (the console's filter; the List RPC has none).
    pub key_prefix: Option<String>,
    /// Only receipts changed at or after this time (the console's filter).
    pub updated_since: Option<crate::domain::Timestamp>,
}

impl ListQuery {
    /// The stored names of the states to list, each once (at most four): every state when
    /// the query names none.
    pub fn state_names(&self) -> Vec<&'static str> {
        let all = [
            State::Processing,
            State::RetryWait,
            State::Completed,
            State::Quarantined,
        ];
        all.into_iter()
            .filter(|s| self.states.is_empty() || self.states.contains(s))
            .map(State::as_str)
            .collect()
    }
}

/// One page of receipts in (namespace, key) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The receipts of this page.
    pub receipts: Vec<Receipt>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<ListCursor>,
}

impl ListPage {
    /// One page of `query`, its rows read with `fetch` (up to `limit + 1` rows after the
    /// cursor, as `Pages::list_rows` does) a chunk at a time and opened for `tenant`, until
    /// the page's budget of receipts and bytes is spent ([`PageBudget`]). A row whose sealed
    /// data does not open fails the page (DATA_LOSS), logged with its namespace and key so
    /// an operator can find it.
    pub(crate) async fn fill<F, Fut>(
        sealer: &crate::seal::Sealer,
        tenant: &str,
        query: &ListQuery,
        mut fetch: F,
    ) -> Result<ListPage, StoreError>
    where
        F: FnMut(ListQuery) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<super::driver::Row>, StoreError>>,
    {
        let mut budget = PageBudget::new(query.limit, query.max_bytes);
        let mut receipts: Vec<Receipt> = Vec::new();
        let mut after = query.after.clone();
        loop {
            let wanted = budget.next_fetch();
            let chunk = ListQuery {
                limit: wanted as u32,
                after: after.clone(),
                ..query.clone()
            };
            let rows = fetch(chunk).await?;
            // The row after the first `wanted` only tells that another follows.
            let more = rows.len() > wanted;
            let mut stopped = false;
            for (mut receipt, blobs) in rows.into_iter().take(wanted) {
                if budget.is_full() {
                    stopped = true;
                    break;
                }
                if let Err(reason) = blobs.open_into(sealer, tenant, &mut receipt) {
                    tracing::error!(
                        namespace = %receipt.id.namespace,
                        key = %receipt.id.key,
                        %reason,
                        "List: a receipt's sealed data does not open"
                    );
                    return Err(reason);
                }
                if !budget.take(&receipt) {
                    stopped = true;
                    break;
                }
                receipts.push(receipt);
            }
            after = receipts.last().map(cursor);
            if stopped || (more && budget.is_full()) {
                return Ok(ListPage {
                    receipts,
                    next: after,
                });
            }
            if !more {
                return Ok(ListPage {
                    receipts,
                    next: None,
                });
            }
        }
    }
}

/// The cursor after `receipt`.
fn cursor(receipt: &Receipt) -> ListCursor {
    ListCursor {
        namespace: receipt.id.namespace.clone(),
        key: receipt.id.key.clone(),
    }
}

/// Whether `a` and `b` carry the same sealed fields. Redrive changes none, so the stores
/// write back only the other columns and leave the sealed values exactly as stored.
pub(crate) fn same_sealed_fields(a: &Receipt, b: &Receipt) -> bool {
    (
        &a.last_error,
        &a.checkpoint,
        &a.response,
        &a.recovery_payload,
    ) == (
        &b.last_error,
        &b.checkpoint,
        &b.response,
        &b.recovery_payload,
    )
}
