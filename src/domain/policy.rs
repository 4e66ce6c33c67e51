//! Per-namespace policies: lease, attempt budget, backoff and retention, and with them the
//! per-tenant quotas of the same file. [`PolicyHandle`] holds the policies in force; the
//! API and the janitor read it per call and a reload replaces it whole, so a call sees
//! either the old or the new policies, never a mix.

use chrono::TimeDelta;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shortest lease, retry delay or backoff step, in a request or a policy file.
pub const MIN_DELAY: TimeDelta = TimeDelta::seconds(1);
/// Longest lease, retry delay, backoff step or overdue filter.
pub const MAX_DELAY: TimeDelta = TimeDelta::hours(24);

/// The per-namespace rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Lease length when a request gives none.
    pub lease_ttl: TimeDelta,
    /// Attempts that may spend the budget before the receipt is quarantined.
    pub max_attempts: u32,
    /// First backoff step.
    pub backoff_base: TimeDelta,
    /// Backoff cap.
    pub backoff_max: TimeDelta,
    /// How long terminal receipts are kept (the dedup window): COMPLETED from
    /// `completed_at`, QUARANTINED from `updated_at`; then the janitor deletes them.
    pub retention: TimeDelta,
    /// How long a COMPLETED receipt keeps its response (at most `retention`); after it the
    /// receipt stays as a tombstone that still answers COMPLETED, without the response.
    pub response_retention: TimeDelta,
    /// The calling tenant's storage limits (its quota's, set per call by the API: a
    /// namespace's policy in the file has none).
    pub storage: super::Storage,
}

impl Policy {
    /// This policy with `tenant`'s storage limits from `quotas`.
    pub fn for_tenant(&self, tenant: &str, quotas: &super::Quotas) -> Policy {
        Policy {
            storage: quotas.for_tenant(tenant).storage,
            ..*self
        }
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            lease_ttl: TimeDelta::seconds(90),
            max_attempts: 8,
            backoff_base: TimeDelta::seconds(1),
            backoff_max: TimeDelta::minutes(5),
            retention: TimeDelta::days(30),
            response_retention: TimeDelta::days(30),
            storage: super::Storage::default(),
        }
    }
}

/// The default policy and the per-namespace overrides; the per-tenant quotas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    /// For namespaces without an override.
    pub default: Policy,
    /// Overrides by exact namespace.
    pub namespaces: HashMap<String, Policy>,
    /// The `[tenants]` quotas (none by default: no limit).
    pub quotas: super::Quotas,
}

impl Policies {
    /// The policy that applies to `namespace`.
    pub fn for_namespace(&self, namespace: &str) -> &Policy {
        self.namespaces.get(namespace).unwrap_or(&self.default)
    }
}

/// The policies in force, shared by the API and the janitor and replaced whole on reload.
/// Cloning the handle shares it.
#[derive(Debug, Clone, Default)]
pub struct PolicyHandle(Arc<RwLock<Arc<Policies>>>);

impl PolicyHandle {
    /// A handle holding `policies`.
    pub fn new(policies: Policies) -> PolicyHandle {
        PolicyHandle(Arc::new(RwLock::new(Arc::new(policies))))
    }

    /// The policies in force now: a snapshot that a later reload does not change.
    pub fn current(&self) -> Arc<Policies> {
        // The lock only guards an `Arc` swap, which cannot panic half-way: a poisoned lock
        // still holds a whole value.
        let guard = self
            .0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(&guard)
    }

    /// The policy in force for `namespace`.
    pub fn for_namespace(&self, namespace: &str) -> Policy {
        *self.current().for_namespace(namespace)
    }

    /// Puts `policies` in force for every later call.
    pub fn replace(&self, policies: Policies) {
        let mut guard = self
            .0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *guard = Arc::new(policies);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_survives_a_replace_and_later_reads_see_the_new_policies() {
        let handle = PolicyHandle::new(Policies::default());
        let before = handle.current();
        let mut next = Policies::default();
        next.namespaces.insert(
            "short".into(),
            Policy {
                lease_ttl: TimeDelta::seconds(5),
                ..Policy::default()
            },
        );
        handle.clone().replace(next);
        assert!(before.namespaces.is_empty());
        assert_eq!(
            handle.for_namespace("short").lease_ttl,
            TimeDelta::seconds(5)
        );
        assert_eq!(handle.for_namespace("other"), Policy::default());
    }
}
