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

type Key = (String, String, String);

/// See the module documentation.
#[derive(Debug)]
pub struct Recent {
    rows: Mutex<LruCache<Key, (Receipt, StoredBlobs)>>,
}

impl Default for Recent {
    fn default() -> Recent {
        // ENTRIES is a non-zero constant.
        let entries = NonZeroUsize::new(ENTRIES).unwrap_or(NonZeroUsize::MIN);
        Recent {
            rows: Mutex::new(LruCache::new(entries)),
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

    /// The row as this process last wrote it, if it remembers it: the receipt (opened) and
    /// its sealed columns and life as stored.
    pub fn get(&self, tenant: &str, id: &ReceiptKey) -> Option<(Receipt, StoredBlobs)> {
        self.rows().get(&key(tenant, id)).cloned()
    }

    /// Remembers `receipt` as just written, with its sealed columns (and life) as `stored`
    /// (or forgets it once its work is over).
    pub fn wrote(&self, tenant: &str, receipt: &Receipt, stored: &StoredBlobs) {
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
