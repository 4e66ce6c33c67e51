//! The tenant quota metrics: a tenant under `max_waiting` has its parked Claims in
//! `claimd_quota_waiting{tenant}` while they wait, and every refusal moves
//! `claimd_quota_refusals_total{tenant, quota}` by one, by the quota that refused it.

use super::{SERIAL, scrape};
use crate::common::app::{Backend, TestApp, secs};
use crate::scrape::{Exposition, Moves};
use claimd::domain::{Policies, Quota, Rate};
use claimd::pb::{ClaimRequest, CompleteRequest, Decision};
use std::time::Duration;
use tonic::{Code, Request};

/// Not the canary tenant of the other tests, which must never be a label.
const TENANT: &str = "quota-metrics-acme";

fn keyed<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("ASCII key");
    request.metadata_mut().insert("authorization", value);
    request
}

fn claim(key: &str, wait: i64) -> ClaimRequest {
    ClaimRequest {
        namespace: "orders".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        wait: (wait > 0).then_some(secs(wait, 0)).flatten(),
        ..Default::default()
    }
}

/// Scrapes until [`TENANT`]'s parked Claims read `n`, failing after 10 s.
async fn wait_for_parked(app: &TestApp, n: f64) -> Exposition {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (seen, _) = scrape(app).await;
        if seen.value("claimd_quota_waiting", &[("tenant", TENANT)]) == n {
            return seen;
        }
        assert!(tokio::time::Instant::now() < deadline, "never {n} parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn quota_refusals_are_counted_by_tenant_and_quota_and_parked_claims_gauged(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let quota = Quota {
        claims_per_second: Rate::new(0.001),
        burst: Some(3),
        max_waiting: Some(1),
        ..Quota::default()
    };
    let mut policies = Policies::default();
    policies.quotas.tenants.insert(TENANT.into(), quota);
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies = policies)
        .spawn()
        .await;
    let (_, key) = app.create_key(TENANT, None).await;
    let (before, _) = scrape(&app).await;
    let mut client = app.new_client().await;
    let holder = client.claim(keyed(claim("evt-q", 0), &key)).await;
    let token = holder.expect("claimed").into_inner().claim_token;
    let mut parked_client = app.new_client().await;
    let waiting = claim("evt-q", 30);
    let parked_key = key.clone();
    let parked =
        tokio::spawn(async move { parked_client.claim(keyed(waiting, &parked_key)).await });
    wait_for_parked(&app, 1.0).await;
    let refused = client.claim(keyed(claim("evt-q", 30), &key)).await;
    assert_eq!(refused.unwrap_err().code(), Code::ResourceExhausted);
    let over = client.claim(keyed(claim("evt-r", 0), &key)).await;
    assert_eq!(over.unwrap_err().code(), Code::ResourceExhausted);
    let done = CompleteRequest {
        namespace: "orders".into(),
        key: "evt-q".into(),
        claim_token: token,
        response: b"r".to_vec(),
    };
    client.complete(keyed(done, &key)).await.expect("completed");
    let answer = parked.await.expect("the task ends").expect("answered");
    assert_eq!(answer.into_inner().decision(), Decision::Completed);
    let after = wait_for_parked(&app, 0.0).await;
    let moves = Moves { before, after };
    let refusals = |quota: &str| {
        let labels = [("tenant", TENANT), ("quota", quota)];
        moves.of("claimd_quota_refusals_total", &labels)
    };
    assert_eq!(refusals("max_waiting"), 1.0);
    assert_eq!(refusals("claims_per_second"), 1.0);
    assert_eq!(refusals("writes_per_second"), 0.0);
    assert_eq!(moves.after.types["claimd_quota_refusals_total"], "counter");
    assert_eq!(moves.after.types["claimd_quota_waiting"], "gauge");
    app.shutdown().await;
}

async fn storage_refusals_are_counted_by_tenant_and_quota(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let quota = Quota {
        storage: claimd::domain::Storage {
            max_receipts: Some(1),
            max_stored_bytes: Some(200),
        },
        ..Quota::default()
    };
    let mut policies = Policies::default();
    policies.quotas.tenants.insert(TENANT.into(), quota);
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies = policies)
        .spawn()
        .await;
    let (_, key) = app.create_key(TENANT, None).await;
    let (before, _) = scrape(&app).await;
    let mut client = app.new_client().await;
    let holder = client.claim(keyed(claim("evt-s", 0), &key)).await;
    let token = holder.expect("claimed").into_inner().claim_token;
    let over = client.claim(keyed(claim("evt-t", 0), &key)).await;
    assert_eq!(over.unwrap_err().code(), Code::ResourceExhausted);
    let done = CompleteRequest {
        namespace: "orders".into(),
        key: "evt-s".into(),
        claim_token: token,
        response: vec![0; 500],
    };
    let too_big = client.complete(keyed(done, &key)).await;
    assert_eq!(too_big.unwrap_err().code(), Code::ResourceExhausted);
    let (after, _) = scrape(&app).await;
    let moves = Moves { before, after };
    let refusals = |quota: &str| {
        let labels = [("tenant", TENANT), ("quota", quota)];
        moves.of("claimd_quota_refusals_total", &labels)
    };
    assert_eq!(refusals("max_receipts"), 1.0);
    assert_eq!(refusals("max_stored_bytes"), 1.0);
    app.shutdown().await;
}

conformance!(
    quota_refusals_are_counted_by_tenant_and_quota_and_parked_claims_gauged,
    storage_refusals_are_counted_by_tenant_and_quota,
);
