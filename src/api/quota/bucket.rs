//! One token bucket: `size` tokens, refilled at a rate, a call taking one. The rate and
//! size are passed in on every take (the quotas in force), never kept, so a reload applies
//! to the next call and a bucket keeps its fill, capped at the new size.

use crate::domain::Rate;
use std::time::{Duration, Instant};

/// A bucket's fill when it was last looked at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket of `size` at `now` (a tenant's first call).
    pub fn full(size: u32, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(size),
            at: now,
        }
    }

    /// The tokens at `now`: refilled at `rate` since it was last looked at, at most `size`.
    pub fn tokens(&self, now: Instant, rate: Rate, size: u32) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * rate.per_second()).min(f64::from(size))
    }

    /// Takes a token at `now`; when there is none, takes nothing and says how long until
    /// one is due.
    pub fn take(&mut self, now: Instant, rate: Rate, size: u32) -> Result<(), Duration> {
        self.tokens = self.tokens(now, rate, size);
        self.at = self.at.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let due = (1.0 - self.tokens) / rate.per_second();
        // At least a millisecond, so a retry never comes before the token; at most what
        // `from_secs_f64` takes (a rate of at least 1e-9 a second makes it at most 1e9 s).
        Err(Duration::from_secs_f64(due.clamp(0.001, 1e9)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(per_second: f64) -> Rate {
        Rate::new(per_second).unwrap()
    }

    #[test]
    fn a_full_bucket_gives_its_size_then_refuses_until_a_token_is_due() {
        let t0 = Instant::now();
        let mut b = Bucket::full(3, t0);
        assert!((0..3).all(|_| b.take(t0, rate(2.0), 3).is_ok()));
        let due = b.take(t0, rate(2.0), 3).unwrap_err();
        assert_eq!(due, Duration::from_millis(500));
        let later = t0 + Duration::from_millis(500);
        assert!(b.take(later, rate(2.0), 3).is_ok());
        assert!(b.take(later, rate(2.0), 3).is_err());
    }

    #[test]
    fn a_refused_take_costs_nothing_and_refill_stops_at_the_size() {
        let t0 = Instant::now();
        let mut b = Bucket::full(1, t0);
        b.take(t0, rate(1.0), 1).unwrap();
        for _ in 0..100 {
            assert!(b.take(t0, rate(1.0), 1).is_err());
        }
        let much_later = t0 + Duration::from_secs(3600);
        assert_eq!(b.tokens(much_later, rate(1.0), 1), 1.0);
        assert!(b.take(t0 + Duration::from_secs(1), rate(1.0), 1).is_ok());
    }

    #[test]
    fn a_smaller_size_after_a_reload_caps_the_fill_and_a_new_rate_refills_it() {
        let t0 = Instant::now();
        let mut b = Bucket::full(100, t0);
        b.take(t0, rate(100.0), 100).unwrap();
        assert_eq!(b.tokens(t0, rate(1.0), 2), 2.0);
        assert!(b.take(t0, rate(1.0), 2).is_ok() && b.take(t0, rate(1.0), 2).is_ok());
        let due = b.take(t0, rate(0.5), 2).unwrap_err();
        assert_eq!(due, Duration::from_secs(2));
    }
}
