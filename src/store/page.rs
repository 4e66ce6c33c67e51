//! The budget of one List or ListOrphaned page (docs/DESIGN.md §2.8, §4.5): at most
//! `page_size` receipts and at most `max_bytes` bytes of them, payloads included, but never
//! an empty page while receipts remain. Rows are fetched in chunks sized by the bytes left,
//! so a page of large receipts never holds many more rows in memory than it returns.

use crate::domain::Receipt;

/// The default of `--list-page-bytes`: 4 MiB, 64 receipts with a 64 KiB payload each.
pub const DEFAULT_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// An upper bound of what a receipt's fields other than its strings and bytes take on the
/// wire: six Timestamps (≤ 19 bytes each with tag and length), state and attempt (≤ 13),
/// seven tags and lengths of strings and bytes (≤ 4 each), the repeated field's own tag and
/// length, and ListOrphaned's `Orphan` wrapper (≤ 10); 256 leaves room.
pub const RECEIPT_OVERHEAD: usize = 256;

/// Rows fetched first, before the size of a row is known.
const FIRST_FETCH: usize = 32;
/// Rows fetched at most at once.
const MAX_FETCH: usize = 256;

/// What `receipt` counts against a page's byte budget: at least its encoded size.
pub fn receipt_bytes(receipt: &Receipt) -> usize {
    let blobs = [
        &receipt.checkpoint,
        &receipt.response,
        &receipt.recovery_payload,
    ];
    let payloads: usize = blobs.iter().map(|b| b.as_ref().map_or(0, Vec::len)).sum();
    let error = receipt.last_error.as_ref().map_or(0, String::len);
    receipt.id.namespace.len()
        + receipt.id.key.len()
        + receipt.fingerprint.len()
        + payloads
        + error
        + RECEIPT_OVERHEAD
}

/// Counts the receipts and bytes of a page being filled.
#[derive(Debug, Clone)]
pub(crate) struct PageBudget {
    count_left: usize,
    bytes_left: usize,
    taken: usize,
    largest: usize,
}

impl PageBudget {
    /// A page of at most `limit` receipts and `max_bytes` bytes.
    pub(crate) fn new(limit: u32, max_bytes: usize) -> PageBudget {
        PageBudget {
            count_left: limit as usize,
            bytes_left: max_bytes,
            taken: 0,
            largest: 0,
        }
    }

    /// Takes `receipt` onto the page if it fits — or if the page is still empty, so that a
    /// page is never empty while receipts remain. `false` means the page is full.
    pub(crate) fn take(&mut self, receipt: &Receipt) -> bool {
        let bytes = receipt_bytes(receipt);
        if self.count_left == 0 || (self.taken > 0 && bytes > self.bytes_left) {
            self.count_left = 0;
            return false;
        }
        self.count_left -= 1;
        self.bytes_left = self.bytes_left.saturating_sub(bytes);
        self.taken += 1;
        self.largest = self.largest.max(bytes);
        true
    }

    /// Whether no further receipt goes onto the page.
    pub(crate) fn is_full(&self) -> bool {
        self.count_left == 0 || (self.taken > 0 && self.bytes_left == 0)
    }

    /// How many rows to fetch next (the caller may fetch one more, to learn whether another
    /// follows): as many as fit the bytes left at the largest size seen so far, within the
    /// count left; at least one.
    pub(crate) fn next_fetch(&self) -> usize {
        let by_bytes = match self.largest {
            0 => FIRST_FETCH,
            largest => self.bytes_left / largest + 1,
        };
        by_bytes.min(MAX_FETCH).min(self.count_left).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ReceiptKey, State};

    fn receipt(payload: usize) -> Receipt {
        let now = chrono::Utc::now();
        Receipt {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            state: State::Processing,
            attempt: 1,
            free_attempts: 0,
            fingerprint: vec![1; 32],
            claim_token: None,
            lease_expires_at: Some(now),
            next_attempt_at: None,
            created_at: now,
            updated_at: now,
            completed_at: None,
            last_error: None,
            checkpoint: None,
            response: None,
            recovery_payload: Some(vec![0; payload]),
            response_pruned_at: None,
        }
    }

    #[test]
    fn a_page_stops_at_the_byte_budget_but_is_never_empty() {
        let big = receipt(10_000);
        let mut budget = PageBudget::new(100, 5_000);
        assert!(budget.take(&big), "the first receipt always fits");
        assert!(
            !budget.take(&receipt(1)),
            "nothing follows an overfull page"
        );
        assert!(budget.is_full());

        let mut budget = PageBudget::new(100, 3 * receipt_bytes(&receipt(1_000)));
        for _ in 0..3 {
            assert!(budget.take(&receipt(1_000)));
        }
        assert!(!budget.take(&receipt(1_000)));
    }

    #[test]
    fn the_count_still_limits_and_fetches_follow_the_bytes_left() {
        let mut budget = PageBudget::new(2, usize::MAX);
        assert_eq!(budget.next_fetch(), 2);
        assert!(budget.take(&receipt(0)) && budget.take(&receipt(0)));
        assert!(!budget.take(&receipt(0)));

        let one = receipt_bytes(&receipt(60_000));
        let mut budget = PageBudget::new(1000, 10 * one);
        assert_eq!(budget.next_fetch(), FIRST_FETCH);
        assert!(budget.take(&receipt(60_000)));
        assert_eq!(budget.next_fetch(), 10);
    }
}
