//! The failed-authentication limit: a token bucket per [`Source`] (an IPv4 address, an IPv6
//! /64; `limit` tokens, refilled evenly over `window`) for up to [`SOURCES`] sources at once.
//! Only failures take a token, and only a source's failures are refused once its bucket is
//! empty: a correct key is never refused by it (`Authenticator::check` looks such a key up
//! even for an empty bucket), so callers behind one address (a NAT, a sidecar, a load
//! balancer) are not locked out by one of them sending wrong keys.
//!
//! A source gets a bucket at its first failure, and a full bucket says nothing a missing one
//! would not. With [`SOURCES`] buckets, a new source's failure makes room by dropping every
//! bucket that has refilled, else the one with the most tokens; a bucket that is empty is
//! never dropped, so failures from many other addresses cannot give a throttled source its
//! allowance back. When every bucket is empty, the new source's failure is refused as if its
//! own were (its correct keys are still served). Hand-written rather than a crate: the
//! eviction order is the point, and a generic limiter or LRU would evict by age.

use crate::source::Source;
use crate::telemetry::exporter::{AUTH_THROTTLED, AUTH_THROTTLED_SOURCES};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Sources with a bucket at once.
const SOURCES: usize = 10_000;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Whether its last failure was refused (so a source is counted once each time it runs
    /// out, in `claimd_auth_throttled_sources_total`).
    throttled: bool,
}

/// Failed authentications allowed per source; `limit` 0 turns the limit off.
pub(super) struct FailureLimit {
    limit: u32,
    window: Duration,
    capacity: usize,
    buckets: Mutex<HashMap<Source, Bucket>>,
}

impl FailureLimit {
    /// `limit` failures per source, refilled over `window`.
    pub fn new(limit: u32, window: Duration) -> FailureLimit {
        FailureLimit::with_capacity(limit, window, SOURCES)
    }

    fn with_capacity(limit: u32, window: Duration, capacity: usize) -> FailureLimit {
        FailureLimit {
            limit,
            window,
            capacity: capacity.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `source` has no failure left right now.
    pub fn exhausted(&self, source: Source) -> bool {
        if self.limit == 0 {
            return false;
        }
        let now = Instant::now();
        let buckets = self.lock();
        buckets
            .get(&source)
            .is_some_and(|b| self.tokens(b, now) < 1.0)
    }

    /// Records a failure from `source`; `false` when it was over the limit (the call is
    /// then answered `RESOURCE_EXHAUSTED`).
    pub fn fail(&self, source: Source) -> bool {
        if self.limit == 0 {
            return true;
        }
        let now = Instant::now();
        let mut buckets = self.lock();
        let allowed = if let Some(bucket) = buckets.get_mut(&source) {
            bucket.tokens = self.tokens(bucket, now);
            bucket.at = now;
            let allowed = bucket.tokens >= 1.0;
            if allowed {
                bucket.tokens -= 1.0;
                bucket.throttled = false;
            } else if !bucket.throttled {
                bucket.throttled = true;
                metrics::counter!(AUTH_THROTTLED_SOURCES).increment(1);
            }
            allowed
        } else if buckets.len() < self.capacity || self.make_room(&mut buckets, now) {
            let bucket = Bucket {
                tokens: f64::from(self.limit) - 1.0,
                at: now,
                throttled: false,
            };
            buckets.insert(source, bucket);
            true
        } else {
            false
        };
        if !allowed {
            metrics::counter!(AUTH_THROTTLED).increment(1);
        }
        allowed
    }

    /// Drops every bucket that has refilled; if none has, the one with the most tokens
    /// unless it is empty. `false` when every bucket is empty (nothing dropped).
    fn make_room(&self, buckets: &mut HashMap<Source, Bucket>, now: Instant) -> bool {
        let capacity = f64::from(self.limit);
        buckets.retain(|_, b| self.tokens(b, now) < capacity);
        if buckets.len() < self.capacity {
            return true;
        }
        let fullest = buckets
            .iter()
            .map(|(source, b)| (*source, self.tokens(b, now)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match fullest {
            Some((source, tokens)) if tokens >= 1.0 => {
                buckets.remove(&source);
                true
            }
            _ => false,
        }
    }

    /// `bucket`'s tokens at `now`, refilled since it was last used.
    fn tokens(&self, bucket: &Bucket, now: Instant) -> f64 {
        let capacity = f64::from(self.limit);
        let per_second = capacity / self.window.as_secs_f64().max(f64::MIN_POSITIVE);
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        (bucket.tokens + elapsed * per_second).min(capacity)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Source, Bucket>> {
        // A panic while holding the map cannot leave it inconsistent: use it anyway.
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(last: u8) -> Source {
        Source::from(std::net::IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn failures_beyond_the_limit_are_refused_per_source() {
        let limit = FailureLimit::new(3, Duration::from_secs(3600));
        let (a, b) = (source(1), source(2));
        assert!((0..3).all(|_| limit.fail(a)));
        assert!(limit.exhausted(a) && !limit.fail(a));
        assert!(!limit.exhausted(b) && limit.fail(b));
        let off = FailureLimit::new(0, Duration::from_secs(1));
        assert!((0..100).all(|_| off.fail(a)) && !off.exhausted(a));
    }

    #[test]
    fn an_empty_bucket_is_never_dropped_to_make_room() {
        let limit = FailureLimit::with_capacity(3, Duration::from_secs(3600), 4);
        let throttled = source(1);
        while limit.fail(throttled) {}
        for last in 2..=200 {
            assert!(limit.fail(source(last)), "source {last}");
        }
        assert!(limit.exhausted(throttled) && !limit.fail(throttled));
        assert_eq!(limit.lock().len(), 4);
    }

    #[test]
    fn when_every_bucket_is_empty_a_new_source_failure_is_refused() {
        let limit = FailureLimit::with_capacity(1, Duration::from_secs(3600), 2);
        assert!(limit.fail(source(1)) && limit.fail(source(2)));
        assert!(!limit.fail(source(3)));
        assert!(limit.exhausted(source(1)) && !limit.exhausted(source(3)));
    }
}
