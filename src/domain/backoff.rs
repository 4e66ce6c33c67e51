//! Exponential backoff with jitter: `base · 2^(attempt−1)` capped at `max`, then spread over
//! its upper half ("equal jitter"), so a retry never comes sooner than half the step and
//! retries of many receipts that failed together do not all land at once.

use super::Policy;
use chrono::TimeDelta;

/// The delay before the next attempt after `attempt` failed. `jitter` is a sample from
/// `[0, 1)`; it is an argument so that the rule stays a pure function.
pub fn backoff_delay(policy: &Policy, attempt: u32, jitter: f64) -> TimeDelta {
    let base = policy.backoff_base.num_microseconds().unwrap_or(i64::MAX);
    let cap = policy.backoff_max.num_microseconds().unwrap_or(i64::MAX);
    let shift = attempt.saturating_sub(1).min(62);
    let step = base.saturating_mul(1_i64 << shift).min(cap).max(0);
    let half = step / 2;
    let spread = (half as f64 * jitter.clamp(0.0, 1.0)) as i64;
    TimeDelta::microseconds(half + spread.min(step - half))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: TimeDelta) -> f64 {
        d.num_microseconds().unwrap() as f64 / 1e6
    }

    #[test]
    fn backoff_doubles_per_attempt_within_its_jitter_band() {
        let p = Policy::default();
        for attempt in 1..=6 {
            let step = f64::from(1_u32 << (attempt - 1));
            assert_eq!(secs(backoff_delay(&p, attempt, 0.0)), step / 2.0);
            assert_eq!(secs(backoff_delay(&p, attempt, 0.5)), step * 0.75);
            let high = secs(backoff_delay(&p, attempt, 0.999_999));
            assert!(high < step && high > step * 0.99, "{high} vs {step}");
        }
    }

    #[test]
    fn backoff_is_capped_at_the_policy_maximum() {
        let p = Policy::default();
        for attempt in [10, 20, 64, u32::MAX] {
            let d = backoff_delay(&p, attempt, 1.0);
            assert_eq!(d, p.backoff_max);
            assert_eq!(backoff_delay(&p, attempt, 0.0), p.backoff_max / 2);
        }
    }
}
