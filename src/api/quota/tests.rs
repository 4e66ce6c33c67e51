//! The limiter alone: per-tenant buckets, a reload on the next call, refused calls that
//! cost nothing, parked Claims counted per tenant, and a bounded number of buckets.

use super::*;

fn quotas(tenant: &str, quota: Quota) -> Quotas {
    let mut quotas = Quotas::default();
    quotas.tenants.insert(tenant.into(), quota);
    quotas
}

fn claims(per_second: f64, burst: u32) -> Quota {
    Quota {
        claims_per_second: Rate::new(per_second),
        burst: Some(burst),
        ..Quota::default()
    }
}

#[test]
fn a_tenant_over_its_claims_rate_is_refused_while_another_is_not() {
    let limiter = Limiter::default();
    let q = quotas("acme", claims(1.0, 2));
    assert!(limiter.claim("acme", &q).is_ok() && limiter.claim("acme", &q).is_ok());
    let refusal = limiter.claim("acme", &q).unwrap_err();
    assert_eq!(refusal.quota, QuotaName::ClaimsPerSecond);
    assert!(refusal.retry_after > Duration::ZERO && refusal.retry_after <= Duration::from_secs(1));
    assert!(
        refusal.to_string().contains("claims_per_second"),
        "{refusal}"
    );
    assert!(!refusal.to_string().contains("acme"), "{refusal}");
    assert!(
        (0..1000).all(|_| limiter.claim("globex", &q).is_ok()),
        "no quota: no limit"
    );
    assert!(
        limiter.write("acme", &q).is_ok(),
        "writes have a bucket of their own"
    );
}

#[test]
fn time_moved_on_the_store_clock_refills_the_bucket() {
    let clock = Clock::default();
    let limiter = Limiter::new(clock.clone());
    let q = quotas("acme", claims(1.0, 1));
    limiter.claim("acme", &q).unwrap();
    assert!(limiter.claim("acme", &q).is_err());
    clock.advance(chrono::TimeDelta::seconds(1));
    assert!(limiter.claim("acme", &q).is_ok());
}

#[test]
fn a_lowered_quota_applies_to_the_next_call_and_the_fill_is_capped() {
    let limiter = Limiter::default();
    let generous = quotas("acme", claims(1000.0, 1000));
    assert!(limiter.claim("acme", &generous).is_ok());
    let tight = quotas("acme", claims(0.001, 3));
    assert!((0..3).all(|_| limiter.claim("acme", &tight).is_ok()));
    let refusal = limiter.claim("acme", &tight).unwrap_err();
    assert!(
        refusal.retry_after > Duration::from_secs(900),
        "{refusal:?}"
    );
    assert!(limiter.claim("acme", &Quotas::default()).is_ok(), "lifted");
}

#[test]
fn writes_per_second_refuses_writes_with_its_own_name() {
    let limiter = Limiter::default();
    let writes = Quota {
        writes_per_second: Rate::new(2.0),
        ..Quota::default()
    };
    let q = quotas("acme", writes);
    assert!(limiter.write("acme", &q).is_ok() && limiter.write("acme", &q).is_ok());
    let refusal = limiter.write("acme", &q).unwrap_err();
    assert_eq!(refusal.quota, QuotaName::WritesPerSecond);
    assert!(limiter.claim("acme", &q).is_ok(), "Claims are not limited");
}

#[test]
fn parked_claims_are_counted_per_tenant_until_they_leave() {
    let limiter = Limiter::default();
    let two = Quota {
        max_waiting: Some(2),
        ..Quota::default()
    };
    let q = quotas("acme", two);
    let first = limiter.park("acme", &q).unwrap();
    let _second = limiter.park("acme", &q).unwrap();
    let refusal = limiter.park("acme", &q).unwrap_err();
    assert_eq!(refusal.quota, QuotaName::MaxWaiting);
    assert_eq!(refusal.retry_after, PARKED_RETRY);
    let others: Vec<_> = (0..10)
        .map(|_| limiter.park("globex", &q).unwrap())
        .collect();
    drop(first);
    assert!(limiter.park("acme", &q).is_ok());
    drop(others);
    assert!(
        !lock(&limiter.parked).contains_key("globex"),
        "no count is kept at 0"
    );
}

#[test]
fn buckets_are_kept_for_a_bounded_number_of_tenants() {
    let limiter = Limiter::with_capacity(Clock::default(), 4);
    let q = Quotas {
        default: claims(0.001, 1),
        ..Quotas::default()
    };
    limiter.claim("empty", &q).unwrap();
    for n in 0..100 {
        limiter.claim(&format!("t{n}"), &q).unwrap();
        assert!(lock(&limiter.buckets).len() <= 4);
    }
    // With every bucket empty, one was dropped to make room each time; a tenant that
    // refilled (here: one no longer limited) goes first.
    let mut lifted = q.clone();
    lifted.tenants.insert("t99".into(), Quota::default());
    limiter.claim("new", &lifted).unwrap();
    assert!(!lock(&limiter.buckets).contains_key("t99"));
    assert!(lock(&limiter.buckets).len() <= 4);
}
