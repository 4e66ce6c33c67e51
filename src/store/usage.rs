//! Tenant storage quotas at the store (docs/DESIGN.md §5.15): each tenant's receipts and
//! stored bytes are counted in the store itself, in `tenant_usage`, by the statements that
//! change them (PostgreSQL: the batch write, the janitor's, reseal's and an unreadable
//! row's quarantine, each in the same statement; SQLite: triggers), so every replica reads
//! one figure. A write that would add a receipt or bytes for a tenant with a limit is
//! checked first, with the tenant's figure read while its batches take turns
//! ([`admit`]): one over a limit is not made and is answered with a [`StorageRefusal`].
//!
//! The stored bytes of a row are the lengths of its four sealed columns as stored
//! (recovery payload, response, checkpoint, last error): what sealing adds included.

use super::StoredBlobs;
use super::write::RowWrite;
use crate::domain::{Storage, StorageLimit, StorageRefusal};
use std::collections::HashMap;

/// What a write adds to its tenant's figures, as decided (a negative `bytes` frees room).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Growth {
    /// Receipts added: 1 for an insert, else 0.
    pub receipts: i64,
    /// Stored bytes added.
    pub bytes: i64,
}

/// A tenant's figures: its receipts and their stored bytes.
pub type Usage = (i64, i64);

/// The stored bytes of a row's sealed columns.
pub fn size(blobs: &StoredBlobs) -> i64 {
    [
        &blobs.last_error,
        &blobs.checkpoint,
        &blobs.response,
        &blobs.recovery_payload,
    ]
    .iter()
    .map(|v| {
        v.as_ref()
            .map_or(0, |v| i64::try_from(v.len()).unwrap_or(i64::MAX))
    })
    .sum()
}

/// Whether `write` must be checked against its tenant's figures: it has a limit and adds
/// what that limit counts.
pub fn checked(write: &RowWrite) -> bool {
    let (limit, growth) = (write.storage, write.growth);
    (limit.max_receipts.is_some() && growth.receipts > 0)
        || (limit.max_stored_bytes.is_some() && growth.bytes > 0)
}

/// The tenants whose figures the checked writes of `writes` need, sorted and distinct
/// (the order their batches' locks are taken in).
pub fn tenants(writes: &[&RowWrite]) -> Vec<String> {
    let mut tenants: Vec<String> = (writes.iter())
        .filter(|w| checked(w))
        .map(|w| w.tenant.clone())
        .collect();
    tenants.sort();
    tenants.dedup();
    tenants
}

/// For each write in order, whether it is refused: a checked write is made only if its
/// tenant's figure (`usage`, read while no other batch of the tenant could change it) plus
/// what the writes admitted before it add stays within every limit. What an admitted
/// write adds counts even if it then finds its row changed and is not made: a batch never
/// admits more than its limits allow.
pub fn admit(writes: &[&RowWrite], usage: &HashMap<String, Usage>) -> Vec<Option<StorageRefusal>> {
    let mut running: HashMap<&str, Usage> = HashMap::new();
    writes
        .iter()
        .map(|w| {
            if !checked(w) {
                return None;
            }
            let now = running
                .entry(&w.tenant)
                .or_insert_with(|| usage.get(&w.tenant).copied().unwrap_or((0, 0)));
            let after = (now.0 + w.growth.receipts, now.1 + w.growth.bytes);
            if let Some(refusal) = over(w.storage, w.growth, after) {
                return Some(refusal);
            }
            *now = after;
            None
        })
        .collect()
}

/// The limit of `storage` that figures `after` would pass by `growth`, if any.
fn over(storage: Storage, growth: Growth, after: Usage) -> Option<StorageRefusal> {
    let passes = |limit: Option<u64>, adds: i64, figure: i64| match limit {
        Some(limit) => adds > 0 && u64::try_from(figure).unwrap_or(0) > limit,
        None => false,
    };
    if passes(storage.max_receipts, growth.receipts, after.0) {
        return Some(StorageRefusal {
            which: StorageLimit::Receipts,
            limit: storage.max_receipts.unwrap_or(0),
        });
    }
    if passes(storage.max_stored_bytes, growth.bytes, after.1) {
        return Some(StorageRefusal {
            which: StorageLimit::StoredBytes,
            limit: storage.max_stored_bytes.unwrap_or(0),
        });
    }
    None
}
