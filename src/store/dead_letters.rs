//! The dead-letter admin calls at the store boundary: the List query (a tenant's receipts
//! filtered by namespace and state, keyset-paginated by (namespace, key), which never
//! changes for a receipt) and what the stores' Redrive relies on.

use super::StoreError;
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
    /// Continue after this receipt.
    pub after: Option<ListCursor>,
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
    /// The page for rows decoded into `parts` (receipts and their stored sealed fields),
    /// fetched with `LIMIT limit + 1`, each opened for `tenant`. A row whose sealed data
    /// does not open fails the page (DATA_LOSS), logged with its namespace and key so an
    /// operator can find it.
    pub(crate) fn open(
        sealer: &crate::seal::Sealer,
        tenant: &str,
        parts: Vec<(Receipt, super::StoredBlobs)>,
        limit: u32,
    ) -> Result<ListPage, StoreError> {
        let mut receipts = Vec::with_capacity(parts.len());
        for (mut receipt, blobs) in parts {
            if let Err(reason) = blobs.open_into(sealer, tenant, &mut receipt) {
                tracing::error!(
                    namespace = %receipt.id.namespace,
                    key = %receipt.id.key,
                    %reason,
                    "List: a receipt's sealed data does not open"
                );
                return Err(reason);
            }
            receipts.push(receipt);
        }
        Ok(ListPage::from_rows(receipts, limit))
    }

    /// The page for `rows` fetched with `LIMIT limit + 1`: the extra row only says that
    /// there is a next page.
    pub fn from_rows(mut rows: Vec<Receipt>, limit: u32) -> ListPage {
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = match rows.last() {
            Some(last) if more => Some(ListCursor {
                namespace: last.id.namespace.clone(),
                key: last.id.key.clone(),
            }),
            _ => None,
        };
        ListPage {
            receipts: rows,
            next,
        }
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
