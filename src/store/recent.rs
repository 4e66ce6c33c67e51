//! The rows this process last wrote and still has work on (PROCESSING), so a holder call
//! that follows its own Claim through the same claimd decides without reading first: one
//! round trip instead of two.
//!
//! Nothing is ever answered from here. A write decided from a remembered row is a
//! compare-and-set on the version remembered (`store::write`), so a row changed by anyone
//! else since (another replica, a takeover, the janitor) is not written: the write reports
//! the row as it is, and the call is decided again on that. A decision that would not
//! write (a refusal, a repeated Complete) is made again on a fresh read. So the memory can
//! be wrong, and then costs one more round trip, but never changes an answer. It is
//! bounded: [`ENTRIES`] rows, of at most [`MAX_PLAINTEXT`] bytes of payloads each.
//!
//! It also remembers which rows it has seen exist ([`SEEN`] keys, whatever their state), so
//! a Claim of one (a duplicate delivery, a retry) reads it first instead of trying an
//! insert that would only find it: the read statement costs the database less than an
//! insert batch's, and claimd seals nothing for it (docs/DESIGN.md §4.2.2). A wrong guess
//! (the row pruned since) costs one more statement, never an answer.

use super::StoredBlobs;
use crate::domain::{Receipt, ReceiptKey, State};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;

/// How many rows are remembered.
pub const ENTRIES: usize = 4096;

/// Rows with more payload bytes than this (checkpoint and recovery payload) are not
/// remembered, so the memory stays small (about `ENTRIES` × twice this: the plaintext and
/// the sealed values).
pub const MAX_PLAINTEXT: usize = 1024;

/// How many keys are remembered as existing.
pub const SEEN: usize = 8192;

type Key = (String, String, String);

/// See the module documentation.
#[derive(Debug)]
pub struct Recent {
    rows: Mutex<LruCache<Key, (Receipt, StoredBlobs)>>,
    seen: Mutex<LruCache<Key, ()>>,
}

impl Default for Recent {
    fn default() -> Recent {
        // ENTRIES is a non-zero constant.
        let entries = NonZeroUsize::new(ENTRIES).unwrap_or(NonZeroUsize::MIN);
        let seen = NonZeroUsize::new(SEEN).unwrap_or(NonZeroUsize::MIN);
        Recent {
            rows: Mutex::new(LruCache::new(entries)),
            seen: Mutex::new(LruCache::new(seen)),
        }
    }
}

fn key(tenant: &str, id: &ReceiptKey) -> Key {
    (tenant.to_owned(), id.namespace.clone(), id.key.clone())
}

impl Recent {
    fn rows(&self) -> std::sync::MutexGuard<'_, LruCache<Key, (Receipt, StoredBlobs)>> {
        // The cache holds no invariant a panic could break half-way.
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, LruCache<Key, ()>> {
        // As `rows`: nothing a panic could break half-way.
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this process last saw the row exist (read it, wrote it, or had its insert
    /// find it).
    pub fn exists(&self, tenant: &str, id: &ReceiptKey) -> bool {
        self.seen().get(&key(tenant, id)).is_some()
    }

    /// Notes whether the row exists, as a statement just found it.
    pub fn saw(&self, tenant: &str, id: &ReceiptKey, exists: bool) {
        match exists {
            true => self.seen().put(key(tenant, id), ()),
            false => self.seen().pop(&key(tenant, id)),
        };
    }

    /// The row as this process last wrote it, if it remembers it: the receipt (opened) and
    /// its sealed columns and life as stored.
    pub fn get(&self, tenant: &str, id: &ReceiptKey) -> Option<(Receipt, StoredBlobs)> {
        self.rows().get(&key(tenant, id)).cloned()
    }

    /// Remembers `receipt` as just written, with its sealed columns (and life) as `stored`
    /// (or forgets it once its work is over).
    pub fn wrote(&self, tenant: &str, receipt: &Receipt, stored: &StoredBlobs) {
        self.saw(tenant, &receipt.id, true);
        let size = receipt.checkpoint.as_ref().map_or(0, Vec::len)
            + receipt.recovery_payload.as_ref().map_or(0, Vec::len);
        if receipt.state != State::Processing || size > MAX_PLAINTEXT {
            self.forget(tenant, &receipt.id);
            return;
        }
        self.rows()
            .put(key(tenant, &receipt.id), (receipt.clone(), stored.clone()));
    }

    /// Forgets the row.
    pub fn forget(&self, tenant: &str, id: &ReceiptKey) {
        self.rows().pop(&key(tenant, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> ReceiptKey {
        ReceiptKey {
            namespace: "ns".into(),
            key: format!("k{n}"),
        }
    }

    #[test]
    fn a_row_seen_is_remembered_per_tenant_until_seen_gone() {
        let recent = Recent::default();
        assert!(!recent.exists("t", &id(1)));
        recent.saw("t", &id(1), true);
        assert!(recent.exists("t", &id(1)));
        assert!(
            !recent.exists("other", &id(1)),
            "another tenant's row is another row"
        );
        recent.saw("t", &id(1), false);
        assert!(!recent.exists("t", &id(1)));
    }

    #[test]
    fn the_memory_of_rows_seen_is_bounded_and_forgets_the_oldest() {
        let recent = Recent::default();
        for n in 0..=SEEN {
            recent.saw("t", &id(n), true);
        }
        assert!(!recent.exists("t", &id(0)), "the oldest is forgotten");
        assert!(recent.exists("t", &id(SEEN)));
        assert_eq!(recent.seen().len(), SEEN);
    }
}
