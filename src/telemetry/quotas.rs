//! What tenant quotas record (docs/DESIGN.md §5.15): calls refused, by tenant and quota
//! (`claimd_quota_refusals_total{tenant, quota}`), and the Claims of tenants under a
//! `max_waiting` quota parked right now (`claimd_quota_waiting{tenant}`). Tenant names are
//! not secrets, but they are the callers' many: the tenants named in the `[tenants]` table
//! keep their name as a label, and so do the first [`TENANT_LABELS`] others this process
//! labels; every later one is [`OTHER`](super::OTHER). Keys and tokens are never labels.

use super::exporter::{QUOTA_REFUSALS, QUOTA_WAITING};
use crate::domain::Quotas;
use std::collections::HashSet;
use std::sync::Mutex;

/// How many tenants not named in the `[tenants]` table get their own label.
pub const TENANT_LABELS: usize = 100;

/// The quota a call was refused by: the `quota` label, named as in the policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaName {
    /// `claims_per_second` (and its `burst`).
    ClaimsPerSecond,
    /// `writes_per_second`.
    WritesPerSecond,
    /// `max_waiting`.
    MaxWaiting,
    /// `max_receipts`.
    MaxReceipts,
    /// `max_stored_bytes`.
    MaxStoredBytes,
}

impl QuotaName {
    /// The key's name in the policy file, and the label value.
    pub fn name(self) -> &'static str {
        match self {
            QuotaName::ClaimsPerSecond => "claims_per_second",
            QuotaName::WritesPerSecond => "writes_per_second",
            QuotaName::MaxWaiting => "max_waiting",
            QuotaName::MaxReceipts => "max_receipts",
            QuotaName::MaxStoredBytes => "max_stored_bytes",
        }
    }
}

/// Maps tenants to a bounded set of label values.
#[derive(Debug, Default)]
pub struct TenantLabels {
    seen: Mutex<HashSet<String>>,
}

impl TenantLabels {
    /// The label of `tenant`: its name while `quotas` names it or it is among the first
    /// [`TENANT_LABELS`] others labelled, [`OTHER`](super::OTHER) after that.
    pub fn label(&self, tenant: &str, quotas: &Quotas) -> String {
        if quotas.names(tenant) {
            return tenant.to_owned();
        }
        // Only ever inserted into; a panic elsewhere cannot leave it half-changed.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(tenant) {
            return tenant.to_owned();
        }
        if seen.len() < TENANT_LABELS {
            seen.insert(tenant.to_owned());
            return tenant.to_owned();
        }
        super::OTHER.to_owned()
    }
}

/// Counts one call refused by `quota` for the tenant labelled `tenant`.
pub fn refused(tenant: String, quota: QuotaName) {
    metrics::counter!(QUOTA_REFUSALS, "tenant" => tenant, "quota" => quota.name()).increment(1);
}

/// One more (or, with `by` negative, fewer) parked Claims of the tenant labelled `tenant`.
pub fn parked(tenant: String, by: f64) {
    metrics::gauge!(QUOTA_WAITING, "tenant" => tenant).increment(by);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Quota;

    #[test]
    fn named_tenants_and_the_first_others_keep_their_names_and_later_ones_are_other() {
        let mut quotas = Quotas::default();
        quotas.tenants.insert("acme".into(), Quota::default());
        let labels = TenantLabels::default();
        for n in 0..TENANT_LABELS {
            assert_eq!(labels.label(&format!("t{n}"), &quotas), format!("t{n}"));
        }
        assert_eq!(labels.label("late", &quotas), super::super::OTHER);
        assert_eq!(
            labels.label("t0", &quotas),
            "t0",
            "a tenant keeps its label"
        );
        assert_eq!(
            labels.label("acme", &quotas),
            "acme",
            "named ones do not count"
        );
    }
}
