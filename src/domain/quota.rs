//! Per-tenant quotas (docs/DESIGN.md §5.15): how many Claims a second (and the burst), how
//! many holder writes a second and how many Claims parked in `wait` at once one tenant may
//! have on one claimd, and how many receipts and stored bytes it may keep in the store
//! ([`Storage`]). Plain values: the policy file fills them in (`config::quotas`), the API
//! enforces the rates (`api::quota`) and the store the storage limits (`store::usage`), and
//! they are replaced with the policies on reload. A quota left out is no limit.

use std::collections::HashMap;

/// A rate in calls per second: finite and positive (the policy file refuses anything
/// else), so it compares as a number.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate(f64);

// A `Rate` is never NaN (`Rate::new` refuses it), so equality is reflexive.
impl Eq for Rate {}

impl Rate {
    /// The largest rate the policy file takes, per second.
    pub const MAX: f64 = 1e9;

    /// `per_second` as a rate, if it is finite, positive and at most [`Rate::MAX`].
    pub fn new(per_second: f64) -> Option<Rate> {
        (per_second.is_finite() && per_second > 0.0 && per_second <= Rate::MAX)
            .then_some(Rate(per_second))
    }

    /// Calls per second.
    pub fn per_second(self) -> f64 {
        self.0
    }

    /// The bucket a rate gets when no burst is given: one second's worth, at least 1.
    pub fn one_second(self) -> u32 {
        // At most `Rate::MAX` (1e9), which fits a u32.
        self.0.ceil().max(1.0) as u32
    }
}

/// One tenant's quotas; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Claims a second (every decision counts), refilling a bucket of `burst`.
    pub claims_per_second: Option<Rate>,
    /// The Claims bucket's size; unset: one second's worth of `claims_per_second`.
    pub burst: Option<u32>,
    /// Complete, Retry, Heartbeat, Quarantine and Redrive a second, in one bucket of one
    /// second's worth.
    pub writes_per_second: Option<Rate>,
    /// Claims parked in `wait` at once.
    pub max_waiting: Option<u32>,
    /// Receipts kept in the store at once, and their stored bytes.
    pub storage: Storage,
}

/// A tenant's storage limits, counted in the store (every replica sees one figure) and
/// checked on the write that would pass them; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Storage {
    /// Receipts (rows, whatever their state) the tenant keeps at once.
    pub max_receipts: Option<u64>,
    /// Bytes of the tenant's sealed columns as stored: recovery payloads, responses,
    /// checkpoints and last errors.
    pub max_stored_bytes: Option<u64>,
}

impl Storage {
    /// Whether this limits nothing.
    pub fn is_unlimited(&self) -> bool {
        *self == Storage::default()
    }
}

/// Which storage limit refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageLimit {
    /// `max_receipts`.
    Receipts,
    /// `max_stored_bytes`.
    StoredBytes,
}

/// A write refused by a storage limit: nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("over the {} quota (at most {limit})", which.name())]
pub struct StorageRefusal {
    /// The limit.
    pub which: StorageLimit,
    /// Its value.
    pub limit: u64,
}

impl StorageLimit {
    /// The key's name in the policy file.
    pub fn name(self) -> &'static str {
        match self {
            StorageLimit::Receipts => "max_receipts",
            StorageLimit::StoredBytes => "max_stored_bytes",
        }
    }
}

impl Quota {
    /// Whether this quota limits nothing.
    pub fn is_unlimited(&self) -> bool {
        *self == Quota::default()
    }

    /// The Claims bucket: its rate and size, or `None` without a Claims rate.
    pub fn claims_bucket(&self) -> Option<(Rate, u32)> {
        let rate = self.claims_per_second?;
        Some((rate, self.burst.unwrap_or_else(|| rate.one_second())))
    }

    /// The writes bucket: its rate and size (one second's worth), or `None` without a rate.
    pub fn writes_bucket(&self) -> Option<(Rate, u32)> {
        let rate = self.writes_per_second?;
        Some((rate, rate.one_second()))
    }
}

/// The quotas of every tenant: `[tenants.default]` and the `[tenants."<name>"]` overrides,
/// each override already filled in from the default key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    /// For tenants without an override (and for the tenant named `default`).
    pub default: Quota,
    /// Overrides by exact tenant.
    pub tenants: HashMap<String, Quota>,
}

impl Quotas {
    /// The quota that applies to `tenant`.
    pub fn for_tenant(&self, tenant: &str) -> &Quota {
        self.tenants.get(tenant).unwrap_or(&self.default)
    }

    /// Whether no tenant has any limit (no `[tenants]` table, or one that limits nothing):
    /// then calls skip the quota checks altogether.
    pub fn is_unlimited(&self) -> bool {
        self.default.is_unlimited() && self.tenants.values().all(Quota::is_unlimited)
    }

    /// Whether `tenant` has a section of its own.
    pub fn names(&self, tenant: &str) -> bool {
        self.tenants.contains_key(tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_finite_positive_and_bounded_and_its_default_burst_is_one_second() {
        assert!(Rate::new(0.0).is_none() && Rate::new(-1.0).is_none());
        assert!(Rate::new(f64::NAN).is_none() && Rate::new(f64::INFINITY).is_none());
        assert!(Rate::new(2e9).is_none());
        assert_eq!(Rate::new(0.2).map(Rate::one_second), Some(1));
        assert_eq!(Rate::new(7.5).map(Rate::one_second), Some(8));
    }

    #[test]
    fn a_tenant_without_a_section_gets_the_default_and_no_quota_limits_nothing() {
        let mut quotas = Quotas::default();
        assert!(quotas.is_unlimited());
        let five = Quota {
            claims_per_second: Rate::new(5.0),
            ..Quota::default()
        };
        quotas.tenants.insert("acme".into(), five);
        assert!(!quotas.is_unlimited());
        assert_eq!(
            quotas.for_tenant("acme").claims_bucket(),
            Some((five.claims_per_second.unwrap(), 5))
        );
        assert_eq!(quotas.for_tenant("other"), &Quota::default());
        assert_eq!(quotas.for_tenant("other").claims_bucket(), None);
    }
}
