//! The authenticator's answers, cached by the SHA-256 of the whole presented key: successes
//! and failures in two separate bounded LRU caches, so a flood of wrong or random keys
//! (which only ever lands in the failure cache) cannot evict the keys that work.
//!
//! An answer is trusted for `ttl`; a success stays in its cache after that (until the LRU
//! drops it) as "known good, check again", which lets a known key be looked up even from an
//! address the failure limit has throttled (`auth::limit`).

use super::{Principal, Refusal};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The SHA-256 of a presented key: what both caches are keyed by (never the key itself).
pub(super) type KeyDigest = [u8; 32];

/// Entries per cache: bounded memory whatever callers send.
const ENTRIES: usize = 10_000;

/// A cached success: the key's public id (for the `last_used_at` flush) and its principal.
#[derive(Clone)]
pub(super) struct Known {
    /// The key's public id.
    pub id: String,
    /// Who the key acts for.
    pub principal: Principal,
}

/// What the caches say about a key.
pub(super) enum Cached {
    /// A success younger than the ttl.
    Good(Known),
    /// A failure younger than the ttl.
    Bad(Refusal),
    /// A success older than the ttl: the key worked before, look it up again.
    Stale,
    /// Nothing known.
    Miss,
}

/// The two caches.
pub(super) struct Answers {
    ttl: Duration,
    good: Mutex<LruCache<KeyDigest, (Instant, Known)>>,
    bad: Mutex<LruCache<KeyDigest, (Instant, Refusal)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a cache cannot leave it inconsistent: use it anyway.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Answers {
    /// Empty caches whose answers are trusted for `ttl`.
    pub fn new(ttl: Duration) -> Answers {
        let entries = NonZeroUsize::new(ENTRIES).unwrap_or(NonZeroUsize::MIN);
        Answers {
            ttl,
            good: Mutex::new(LruCache::new(entries)),
            bad: Mutex::new(LruCache::new(entries)),
        }
    }

    /// What is known about the key with this digest.
    pub fn get(&self, digest: &KeyDigest) -> Cached {
        if let Some((at, known)) = lock(&self.good).get(digest) {
            return match at.elapsed() < self.ttl {
                true => Cached::Good(known.clone()),
                false => Cached::Stale,
            };
        }
        match lock(&self.bad).get(digest) {
            Some((at, refusal)) if at.elapsed() < self.ttl => Cached::Bad(refusal.clone()),
            _ => Cached::Miss,
        }
    }

    /// Records the answer of a store lookup.
    pub fn put(&self, digest: KeyDigest, answer: &Result<Known, Refusal>) {
        let now = Instant::now();
        match answer {
            Ok(known) => {
                lock(&self.bad).pop(&digest);
                lock(&self.good).put(digest, (now, known.clone()));
            }
            Err(refusal) => {
                lock(&self.good).pop(&digest);
                lock(&self.bad).put(digest, (now, refusal.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(n: usize) -> KeyDigest {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&n.to_le_bytes());
        d
    }

    #[test]
    fn failures_never_evict_a_success() {
        let answers = Answers::new(Duration::from_secs(60));
        let known = Known {
            id: "0123456789abcdef".into(),
            principal: Principal::default_tenant(),
        };
        answers.put(digest(0), &Ok(known));
        for n in 1..=ENTRIES + 10 {
            answers.put(digest(n), &Err(Refusal::UnknownKey));
        }
        assert!(matches!(answers.get(&digest(0)), Cached::Good(_)));
        assert!(matches!(answers.get(&digest(1)), Cached::Miss));
        let last = answers.get(&digest(ENTRIES + 10));
        assert!(matches!(last, Cached::Bad(Refusal::UnknownKey)));
    }

    #[test]
    fn an_old_success_is_stale_and_a_later_failure_replaces_it() {
        let answers = Answers::new(Duration::ZERO);
        let known = Known {
            id: "0123456789abcdef".into(),
            principal: Principal::default_tenant(),
        };
        answers.put(digest(0), &Ok(known));
        assert!(matches!(answers.get(&digest(0)), Cached::Stale));
        answers.put(digest(0), &Err(Refusal::RevokedKey));
        assert!(matches!(answers.get(&digest(0)), Cached::Miss));
    }
}
