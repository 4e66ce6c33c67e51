//! What one tenant uses of its quotas on this claimd, as the console's overview shows it
//! (docs/DESIGN.md §5.15): the tokens left in each bucket and the Claims parked now. A
//! look changes nothing: no bucket is made or refilled by it.

use super::{Kind, Limiter, lock};
use crate::domain::Quotas;

/// One bucket's quota and what is left of it now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketUsage {
    /// The rate, per second.
    pub per_second: f64,
    /// The bucket's size (the burst).
    pub size: u32,
    /// Tokens left now, 0 to `size` (a tenant with no call yet has a full bucket).
    pub tokens: f64,
}

/// A tenant's quotas on this claimd and its use of each; `None`: no such limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// `claims_per_second` and `burst`.
    pub claims: Option<BucketUsage>,
    /// `writes_per_second`.
    pub writes: Option<BucketUsage>,
    /// `max_waiting`: (Claims parked now, the most).
    pub waiting: Option<(u32, u32)>,
    /// `max_receipts`: (the tenant's receipts in the store, the most); filled in from the
    /// store by whoever shows it ([`Usage::stored`]).
    pub receipts: Option<(i64, u64)>,
    /// `max_stored_bytes`: (their stored bytes, the most).
    pub stored_bytes: Option<(i64, u64)>,
}

impl Usage {
    /// Whether the tenant has no quota at all.
    pub fn is_unlimited(&self) -> bool {
        self.claims.is_none()
            && self.writes.is_none()
            && self.waiting.is_none()
            && self.receipts.is_none()
            && self.stored_bytes.is_none()
    }

    /// These with the storage limits of `storage` against the store's `figures` (receipts,
    /// stored bytes).
    pub fn stored(self, storage: crate::domain::Storage, figures: (i64, i64)) -> Usage {
        Usage {
            receipts: storage.max_receipts.map(|max| (figures.0, max)),
            stored_bytes: storage.max_stored_bytes.map(|max| (figures.1, max)),
            ..self
        }
    }
}

impl Limiter {
    /// `tenant`'s quotas under `quotas` and what is left of each now.
    pub fn usage(&self, tenant: &str, quotas: &Quotas) -> Usage {
        let quota = quotas.for_tenant(tenant);
        let now = self.now();
        let buckets = lock(&self.buckets);
        let own = buckets.get(tenant);
        let usage = |kind: Kind| {
            let (rate, size) = kind.bucket(quota)?;
            let tokens = own
                .and_then(|own| match kind {
                    Kind::Claims => own.claims,
                    Kind::Writes => own.writes,
                })
                .map_or(f64::from(size), |b| b.tokens(now, rate, size));
            Some(BucketUsage {
                per_second: rate.per_second(),
                size,
                tokens,
            })
        };
        let (claims, writes) = (usage(Kind::Claims), usage(Kind::Writes));
        drop(buckets);
        let parked = lock(&self.parked).get(tenant).copied().unwrap_or(0);
        Usage {
            claims,
            writes,
            waiting: quota.max_waiting.map(|max| (parked, max)),
            receipts: None,
            stored_bytes: None,
        }
    }
}
