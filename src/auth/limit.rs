//! The failed-authentication limit: a token bucket per peer IP address (`limit` tokens,
//! refilled evenly over `window`), in a bounded LRU map. Only failures take a token, and only
//! attempts that are not known to succeed are refused once the bucket is empty (see
//! `Authenticator::authenticate`), so a valid key keeps working from an address that is
//! also sending wrong ones (a NAT, a shared host, or the same process).
//!
//! Hand-written rather than a crate: it is a dozen lines over the `lru` map the caches
//! already use, and keying by address with a bounded map is the part a generic limiter
//! would not give. Forgetting an address (LRU eviction, beyond [`ADDRESSES`]) gives it a
//! full bucket again; a sender with that many addresses is not slowed by a per-address
//! limit anyway.

use lru::LruCache;
use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses remembered at once.
const ADDRESSES: usize = 10_000;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Failed authentications allowed per address; `limit` 0 turns the limit off.
pub(super) struct FailureLimit {
    limit: u32,
    window: Duration,
    buckets: Mutex<LruCache<IpAddr, Bucket>>,
}

impl FailureLimit {
    /// `limit` failures per address, refilled over `window`.
    pub fn new(limit: u32, window: Duration) -> FailureLimit {
        let entries = NonZeroUsize::new(ADDRESSES).unwrap_or(NonZeroUsize::MIN);
        FailureLimit {
            limit,
            window,
            buckets: Mutex::new(LruCache::new(entries)),
        }
    }

    /// Whether `peer` has no failure left right now.
    pub fn exhausted(&self, peer: IpAddr) -> bool {
        self.limit > 0 && self.with_bucket(peer, |bucket| bucket.tokens < 1.0)
    }

    /// Records a failure from `peer`; `false` when it was over the limit.
    pub fn fail(&self, peer: IpAddr) -> bool {
        if self.limit == 0 {
            return true;
        }
        self.with_bucket(peer, |bucket| {
            let allowed = bucket.tokens >= 1.0;
            if allowed {
                bucket.tokens -= 1.0;
            }
            allowed
        })
    }

    /// Runs `f` on `peer`'s bucket, refilled up to now.
    fn with_bucket(&self, peer: IpAddr, f: impl FnOnce(&mut Bucket) -> bool) -> bool {
        let capacity = f64::from(self.limit);
        let now = Instant::now();
        // A panic while holding the map cannot leave it inconsistent: use it anyway.
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.get_or_insert_mut(peer.to_canonical(), || Bucket {
            tokens: capacity,
            at: now,
        });
        let per_second = capacity / self.window.as_secs_f64().max(f64::MIN_POSITIVE);
        let elapsed = now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(capacity);
        bucket.at = now;
        f(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_beyond_the_limit_are_refused_per_address() {
        let limit = FailureLimit::new(3, Duration::from_secs(3600));
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert!((0..3).all(|_| limit.fail(a)));
        assert!(limit.exhausted(a) && !limit.fail(a));
        assert!(!limit.exhausted(b) && limit.fail(b));
        let off = FailureLimit::new(0, Duration::from_secs(1));
        assert!((0..100).all(|_| off.fail(a)) && !off.exhausted(a));
    }
}
