//! Per-tenant quotas enforced (docs/DESIGN.md §5.15): a token bucket per tenant over its
//! Claims (`claims_per_second`, `burst`) and one over its holder writes
//! (`writes_per_second`: Complete, Retry, Heartbeat, Quarantine, Redrive), and a count of
//! its Claims parked in `wait` (`max_waiting`). Per replica: each claimd keeps its own
//! buckets, in memory, and costs a call no round trip.
//!
//! The API checks after authentication and validation and before the store is called, so a
//! refused call ([`QuotaRefusal`], RESOURCE_EXHAUSTED) writes nothing and spends no
//! attempt. Tenants come from authenticated callers only (the principal the auth layer put
//! in the request); still the buckets are bounded: at most [`TENANTS`] tenants hold buckets,
//! and a new one makes room by dropping every tenant whose buckets have refilled (a full
//! bucket says nothing a missing one would not), else the one with the fullest bucket. The
//! quotas are read per call from the policies in force, so a reload applies to the next
//! call, and a bucket keeps its fill, capped at the new size. Hand-written rather than a
//! crate: a keyed limiter (governor's) fixes one rate for every key at construction.

mod bucket;
mod usage;

pub use usage::{BucketUsage, Usage};

use crate::domain::{Quota, Quotas, Rate, StorageLimit, StorageRefusal};
use crate::store::Clock;
use crate::telemetry::quotas::{QuotaName, TenantLabels, parked, refused};
use bucket::Bucket;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Tenants holding buckets at once, per process.
pub const TENANTS: usize = 10_000;

/// What a Claim refused for `max_waiting` is told to wait before it tries again: about
/// the time a parked Claim of a webhook's duplicate takes to be answered.
pub const PARKED_RETRY: Duration = Duration::from_secs(1);

/// What a write refused by a storage limit is told to wait: room comes back only as the
/// janitor removes receipts past their retention (or an operator raises the limit), so
/// about a janitor pass, not a token.
pub const STORED_RETRY: Duration = Duration::from_secs(60);

/// A call refused by a tenant quota: which one, what it allows, and when to try again.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "over the {} quota ({limit}): nothing was written and no attempt was spent; retry after \
     the RetryInfo delay",
    quota.name()
)]
pub struct QuotaRefusal {
    /// The quota that refused it.
    pub quota: QuotaName,
    /// What the quota allows, in words (no tenant name).
    pub limit: String,
    /// When a token is due (or a parked Claim may have left).
    pub retry_after: Duration,
}

impl From<StorageRefusal> for QuotaRefusal {
    fn from(refusal: StorageRefusal) -> QuotaRefusal {
        let (quota, what) = match refusal.which {
            StorageLimit::Receipts => (QuotaName::MaxReceipts, "receipts"),
            StorageLimit::StoredBytes => (QuotaName::MaxStoredBytes, "stored bytes"),
        };
        QuotaRefusal {
            quota,
            limit: format!("{} {what} in the store", refusal.limit),
            retry_after: STORED_RETRY,
        }
    }
}

/// A tenant's buckets; `None` until its first call under that quota.
#[derive(Debug, Default)]
struct Buckets {
    claims: Option<Bucket>,
    writes: Option<Bucket>,
}

/// Which bucket a call takes from.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Claims,
    Writes,
}

impl Kind {
    fn of(self, buckets: &mut Buckets) -> &mut Option<Bucket> {
        match self {
            Kind::Claims => &mut buckets.claims,
            Kind::Writes => &mut buckets.writes,
        }
    }

    fn bucket(self, quota: &Quota) -> Option<(Rate, u32)> {
        match self {
            Kind::Claims => quota.claims_bucket(),
            Kind::Writes => quota.writes_bucket(),
        }
    }

    fn refusal(self, rate: Rate, size: u32, retry_after: Duration) -> QuotaRefusal {
        let per_second = rate.per_second();
        match self {
            Kind::Claims => QuotaRefusal {
                quota: QuotaName::ClaimsPerSecond,
                limit: format!("{per_second} Claims a second, burst {size}, on this claimd"),
                retry_after,
            },
            Kind::Writes => QuotaRefusal {
                quota: QuotaName::WritesPerSecond,
                limit: format!("{per_second} writes a second on this claimd"),
                retry_after,
            },
        }
    }
}

/// The quota state of one ClaimService: buckets and parked Claims by tenant.
#[derive(Debug)]
pub struct Limiter {
    buckets: Mutex<HashMap<String, Buckets>>,
    parked: Arc<Mutex<HashMap<String, u32>>>,
    labels: TenantLabels,
    clock: Clock,
    capacity: usize,
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter::new(Clock::default())
    }
}

impl Limiter {
    /// Buckets that refill as `clock` moves: the monotonic clock, plus the offset tests
    /// move the store's clock by.
    pub fn new(clock: Clock) -> Limiter {
        Limiter::with_capacity(clock, TENANTS)
    }

    fn with_capacity(clock: Clock, capacity: usize) -> Limiter {
        Limiter {
            buckets: Mutex::default(),
            parked: Arc::default(),
            labels: TenantLabels::default(),
            clock,
            capacity: capacity.max(1),
        }
    }

    /// A Claim of `tenant`'s, under `quotas`: takes a token, or refuses the call.
    pub fn claim(&self, tenant: &str, quotas: &Quotas) -> Result<(), QuotaRefusal> {
        self.take(tenant, quotas, Kind::Claims)
    }

    /// A Complete, Retry, Heartbeat, Quarantine or Redrive of `tenant`'s: takes a token, or
    /// refuses the call.
    pub fn write(&self, tenant: &str, quotas: &Quotas) -> Result<(), QuotaRefusal> {
        self.take(tenant, quotas, Kind::Writes)
    }

    /// A Claim of `tenant`'s about to park in `wait`: counted while the returned guard
    /// lives, or refused when `tenant` already has its `max_waiting` parked.
    pub fn park(&self, tenant: &str, quotas: &Quotas) -> Result<Parked, QuotaRefusal> {
        let quota = quotas.for_tenant(tenant);
        let mut parked = lock(&self.parked);
        let count = parked.get(tenant).copied().unwrap_or(0);
        if let Some(max) = quota.max_waiting
            && count >= max
        {
            drop(parked);
            refused(self.labels.label(tenant, quotas), QuotaName::MaxWaiting);
            return Err(QuotaRefusal {
                quota: QuotaName::MaxWaiting,
                limit: format!("{max} Claims waiting at once on this claimd"),
                retry_after: PARKED_RETRY,
            });
        }
        parked.insert(tenant.to_owned(), count + 1);
        drop(parked);
        let label = quota.max_waiting.map(|_| self.labels.label(tenant, quotas));
        if let Some(label) = &label {
            self::parked(label.clone(), 1.0);
        }
        Ok(Parked {
            map: self.parked.clone(),
            tenant: tenant.to_owned(),
            label,
        })
    }

    /// A write of `tenant`'s that the store refused for a storage limit, counted as that
    /// quota's refusal.
    pub fn stored(&self, tenant: &str, quotas: &Quotas, refusal: StorageRefusal) -> QuotaRefusal {
        let refusal = QuotaRefusal::from(refusal);
        refused(self.labels.label(tenant, quotas), refusal.quota);
        refusal
    }

    fn take(&self, tenant: &str, quotas: &Quotas, kind: Kind) -> Result<(), QuotaRefusal> {
        let Some((rate, size)) = kind.bucket(quotas.for_tenant(tenant)) else {
            return Ok(());
        };
        let now = self.now();
        let mut buckets = lock(&self.buckets);
        if !buckets.contains_key(tenant) {
            if buckets.len() >= self.capacity {
                self.make_room(&mut buckets, quotas, now);
            }
            buckets.insert(tenant.to_owned(), Buckets::default());
        }
        // Inserted just above when it was missing.
        let Some(own) = buckets.get_mut(tenant) else {
            return Ok(());
        };
        let bucket = kind.of(own).get_or_insert_with(|| Bucket::full(size, now));
        let taken = bucket.take(now, rate, size);
        drop(buckets);
        taken.map_err(|due| {
            let refusal = kind.refusal(rate, size, due);
            refused(self.labels.label(tenant, quotas), refusal.quota);
            refusal
        })
    }

    /// Drops every tenant whose buckets are full (or no longer limited); if none is, the
    /// tenant with the fullest bucket.
    fn make_room(&self, buckets: &mut HashMap<String, Buckets>, quotas: &Quotas, now: Instant) {
        // How full a tenant's emptiest bucket is, 0 to 1 (1: as good as no bucket).
        let fill = |tenant: &str, own: &Buckets| {
            let quota = quotas.for_tenant(tenant);
            [(Kind::Claims, own.claims), (Kind::Writes, own.writes)]
                .into_iter()
                .filter_map(|(kind, b)| Some((b?, kind.bucket(quota))))
                .map(|(b, limit)| match limit {
                    Some((rate, size)) => b.tokens(now, rate, size) / f64::from(size),
                    None => 1.0,
                })
                .fold(1.0, f64::min)
        };
        buckets.retain(|tenant, own| fill(tenant, own) < 1.0);
        if buckets.len() < self.capacity {
            return;
        }
        let fullest = buckets
            .iter()
            .map(|(tenant, own)| (fill(tenant, own), tenant))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, tenant)| tenant.clone());
        if let Some(tenant) = fullest {
            buckets.remove(&tenant);
        }
    }

    /// Now, on the monotonic clock moved by the store clock's offset (0 but in tests).
    fn now(&self) -> Instant {
        let now = Instant::now();
        let offset = self.clock.offset_micros();
        let by = Duration::from_micros(offset.unsigned_abs());
        match offset >= 0 {
            true => now.checked_add(by).unwrap_or(now),
            false => now.checked_sub(by).unwrap_or(now),
        }
    }
}

/// A parked Claim, counted against its tenant's `max_waiting` until dropped.
#[derive(Debug)]
pub struct Parked {
    map: Arc<Mutex<HashMap<String, u32>>>,
    tenant: String,
    /// The tenant's label in `claimd_quota_waiting`, if it was counted there.
    label: Option<String>,
}

impl Drop for Parked {
    fn drop(&mut self) {
        let mut parked = lock(&self.map);
        if let Some(count) = parked.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                parked.remove(&self.tenant);
            }
        }
        drop(parked);
        if let Some(label) = self.label.take() {
            self::parked(label, -1.0);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is one insert, remove or assignment: a panic elsewhere
    // cannot leave a map half-changed.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
