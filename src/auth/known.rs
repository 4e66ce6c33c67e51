//! The secret hashes of every key that is not revoked, read as one list: how a source that
//! ran out of failed authentications (`auth::limit`) is still served with a correct key,
//! without letting its wrong keys reach the store one read each.
//!
//! A throttled call whose key is not in the success cache is checked against this list in
//! memory: a key whose id and secret hash match one in it goes on to the usual lookup (one
//! read, which also sees a revocation since); any other is refused before any store read.
//! The list is read at the first such call and read again when a key is not in it — but
//! never more than once per [`RELOAD_EVERY`]: a call waits (in order, within its deadline)
//! for a list read after it arrived, so a key created a moment ago is found, and wrong keys,
//! however many, cost at most one read of the list per [`RELOAD_EVERY`].

use crate::store::{Store, StoreError};
use std::collections::HashMap;
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The least time between two reads of the list.
pub(super) const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The list as last read.
struct Read {
    /// When the read started: every key created before it is in `hashes`.
    at: Instant,
    /// Key id → SHA-256 of its secret.
    hashes: HashMap<String, Vec<u8>>,
}

impl Read {
    fn matches(&self, id: &str, hash: &[u8]) -> bool {
        self.hashes
            .get(id)
            .is_some_and(|stored| bool::from(stored.as_slice().ct_eq(hash)))
    }
}

/// The keys' secret hashes, read at most once per [`RELOAD_EVERY`].
#[derive(Default)]
pub(super) struct KnownSecrets {
    read: Mutex<Option<Read>>,
}

impl KnownSecrets {
    /// Whether a key that is not revoked has `id` and the secret hash `hash`, as of a read of
    /// the list made no earlier than `arrived` (when the call came in) unless the last read
    /// already has it.
    pub async fn matches(
        &self,
        store: &dyn Store,
        id: &str,
        hash: &[u8],
        arrived: Instant,
    ) -> Result<bool, StoreError> {
        let mut read = self.read.lock().await;
        if let Some(last) = &*read {
            if last.matches(id, hash) {
                return Ok(true);
            }
            if last.at >= arrived {
                return Ok(false);
            }
            tokio::time::sleep_until(last.at + RELOAD_EVERY).await;
        }
        let at = Instant::now();
        let hashes = store
            .list_keys()
            .await?
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .map(|k| (k.id, k.secret_hash))
            .collect();
        let fresh = Read { at, hashes };
        let matches = fresh.matches(id, hash);
        *read = Some(fresh);
        Ok(matches)
    }
}
