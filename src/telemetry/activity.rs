//! What this process decided in the last minute, per tenant and namespace: the console's
//! claims/s and duplicates/s ([`Activity`]). The Prometheus counters have no tenant label (a
//! tenant's console must not see another tenant's traffic), so the API notes each decided
//! Claim here as well. Bounded: at most [`MAX_TRACKED`] (tenant, namespace) pairs; later ones
//! are not tracked (the console says so) until the process restarts.

use crate::domain::Decision;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The most (tenant, namespace) pairs tracked.
pub const MAX_TRACKED: usize = 4096;

/// Seconds a rate is averaged over.
pub const WINDOW_SECS: u64 = 60;

/// Decided Claims per (tenant, namespace), in one-second buckets over the last minute.
#[derive(Debug)]
pub struct Activity {
    started: Instant,
    tenants: Mutex<Tracked>,
}

#[derive(Debug, Default)]
struct Tracked {
    pairs: usize,
    by_tenant: HashMap<String, HashMap<String, Window>>,
}

/// 60 buckets of (second, claims, duplicates); a bucket counts only for its own second.
#[derive(Debug, Clone)]
struct Window {
    buckets: [(u64, u32, u32); WINDOW_SECS as usize],
}

/// Per second over the last minute, on this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Claims decided, whatever the decision.
    pub claims: f64,
    /// Claims of an event already done or being done: COMPLETED or IN_FLIGHT.
    pub duplicates: f64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            started: Instant::now(),
            tenants: Mutex::default(),
        }
    }
}

impl Activity {
    fn second(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Notes one decided Claim.
    pub fn note(&self, tenant: &str, namespace: &str, decision: Decision) {
        let now = self.second();
        let duplicate = matches!(decision, Decision::Completed | Decision::InFlight);
        let mut tracked = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let Tracked { pairs, by_tenant } = &mut *tracked;
        let window = match by_tenant
            .get_mut(tenant)
            .and_then(|namespaces| namespaces.get_mut(namespace))
        {
            Some(window) => window,
            None if *pairs >= MAX_TRACKED => return,
            None => {
                *pairs += 1;
                by_tenant
                    .entry(tenant.to_owned())
                    .or_default()
                    .entry(namespace.to_owned())
                    .or_insert(Window {
                        buckets: [(u64::MAX, 0, 0); WINDOW_SECS as usize],
                    })
            }
        };
        let bucket = &mut window.buckets[(now % WINDOW_SECS) as usize];
        if bucket.0 != now {
            *bucket = (now, 0, 0);
        }
        bucket.1 = bucket.1.saturating_add(1);
        bucket.2 = bucket.2.saturating_add(u32::from(duplicate));
    }

    /// The tenant's rates by namespace (namespaces with no Claim in the window are absent).
    pub fn rates(&self, tenant: &str) -> HashMap<String, Rates> {
        let now = self.second();
        let tracked = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let Some(namespaces) = tracked.by_tenant.get(tenant) else {
            return HashMap::new();
        };
        // Over the seconds this process has been up, at most a minute, this one included.
        let span = (now + 1).min(WINDOW_SECS) as f64;
        namespaces
            .iter()
            .filter_map(|(namespace, window)| {
                let recent = window
                    .buckets
                    .iter()
                    .filter(|(second, ..)| *second <= now && now - *second < WINDOW_SECS);
                let (claims, duplicates) = recent.fold((0u64, 0u64), |(c, d), (_, bc, bd)| {
                    (c + u64::from(*bc), d + u64::from(*bd))
                });
                (claims > 0).then(|| {
                    let rates = Rates {
                        claims: claims as f64 / span,
                        duplicates: duplicates as f64 / span,
                    };
                    (namespace.clone(), rates)
                })
            })
            .collect()
    }

    /// Whether some (tenant, namespace) pair went untracked because the bound was reached.
    pub fn full(&self) -> bool {
        self.tenants.lock().unwrap_or_else(|p| p.into_inner()).pairs >= MAX_TRACKED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_sees_only_its_own_namespaces_and_duplicates_are_counted_apart() {
        let activity = Activity::default();
        activity.note("acme", "stripe", Decision::Claimed);
        activity.note("acme", "stripe", Decision::Completed);
        activity.note("acme", "stripe", Decision::InFlight);
        activity.note("other", "stripe", Decision::Claimed);
        let rates = activity.rates("acme");
        assert_eq!(rates.len(), 1);
        let stripe = rates["stripe"];
        // Three Claims and two duplicates over the same span, however long it was.
        assert_eq!(stripe.claims / stripe.duplicates, 1.5);
        assert_eq!(activity.rates("other")["stripe"].duplicates, 0.0);
        assert!(activity.rates("nobody").is_empty());
    }

    #[test]
    fn past_the_bound_new_pairs_are_not_tracked() {
        let activity = Activity::default();
        for i in 0..MAX_TRACKED + 5 {
            activity.note("t", &format!("ns-{i}"), Decision::Claimed);
        }
        assert!(activity.full());
        assert_eq!(activity.rates("t").len(), MAX_TRACKED);
    }
}
