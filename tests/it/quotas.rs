//! Per-tenant quotas (docs/DESIGN.md §5.15) through the real server, on both stores: a
//! tenant over its Claims rate is refused RESOURCE_EXHAUSTED with RetryInfo and
//! QuotaFailure while another tenant's concurrent Claims all succeed; a refused Claim
//! leaves no receipt and a Claim once the token is due is CLAIMED with attempt 1; a refused
//! write leaves the receipt as it was; replaced quotas apply to the next call; calls
//! without a valid key take no token; `max_waiting` (`quotas/waiting.rs`); the HTTP door's
//! 429 and `Retry-After` (`quotas/door.rs`); the storage limits (`quotas/storage.rs`) and a
//! checked batch given up on mid-way (`quotas/turn.rs`); `check-config` and SIGHUP through the real
//! binary (`quotas/binary.rs`).
//!
//! Rates are tiny (one token per thousand seconds) so that no test depends on how fast it
//! runs: a bucket refills only when the test moves the clock (`app.advance`).

mod binary;
mod door;
mod storage;
mod turn;
mod waiting;

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{FP, NS, claim_request, secs};
use claimd::domain::{Policies, Quota, Rate};
use claimd::pb::{self, Decision, State};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

type Client = pb::claim_service_client::ClaimServiceClient<Channel>;

/// One token per thousand seconds: nothing refills while a test runs unless it moves the
/// clock.
const SLOW: f64 = 0.001;

/// Policies whose only change is `tenant`'s quota.
fn quota_for(tenant: &str, quota: Quota) -> Policies {
    let mut policies = Policies::default();
    policies.quotas.tenants.insert(tenant.into(), quota);
    policies
}

/// `burst` Claims, then one per `1 / per_second` seconds.
fn claims(per_second: f64, burst: u32) -> Quota {
    Quota {
        claims_per_second: Rate::new(per_second),
        burst: Some(burst),
        ..Quota::default()
    }
}

/// `message` with `key`'s bearer header.
fn keyed<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("ASCII key");
    request.metadata_mut().insert("authorization", value);
    request
}

/// A claimd with `policies` and a client with an API key for each of `tenants`.
async fn spawn(backend: Backend, policies: Policies, tenants: &[&str]) -> (TestApp, Vec<String>) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies = policies)
        .spawn()
        .await;
    let mut keys = Vec::new();
    for tenant in tenants {
        keys.push(app.create_key(tenant, None).await.1);
    }
    (app, keys)
}

/// Asserts a refusal by `quota`: RESOURCE_EXHAUSTED naming it, with a RetryInfo delay and a
/// QuotaFailure whose violation is `quota`; the delay.
pub fn assert_refused_by(status: &Status, quota: &str) -> Duration {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains(quota), "{status:?}");
    let failure = status.get_details_quota_failure().expect("a QuotaFailure");
    let subjects: Vec<&str> = failure
        .violations
        .iter()
        .map(|v| v.subject.as_str())
        .collect();
    assert_eq!(subjects, [quota], "{status:?}");
    let retry = status.get_details_retry_info().expect("a RetryInfo");
    let delay = retry.retry_delay.expect("a retry delay");
    assert!(delay > Duration::ZERO, "{status:?}");
    delay
}

async fn get(client: &mut Client, key: &str, api_key: &str) -> Result<pb::Receipt, Status> {
    let request = pb::GetRequest {
        namespace: NS.into(),
        key: key.into(),
    };
    let response = client.get(keyed(request, api_key)).await?.into_inner();
    Ok(response.receipt.expect("Get returns a receipt"))
}

async fn a_tenant_over_its_claims_rate_is_refused_with_retry_info_while_another_tenants_concurrent_claims_all_succeed(
    backend: Backend,
) {
    let policies = quota_for("acme", claims(SLOW, 5));
    let (app, keys) = spawn(backend, policies, &["acme", "globex"]).await;
    let mut tasks = Vec::new();
    for n in 0..40 {
        let (tenant, key) = match n % 2 {
            0 => ("acme", keys[0].clone()),
            _ => ("globex", keys[1].clone()),
        };
        let mut client = app.new_client().await;
        tasks.push(tokio::spawn(async move {
            let request = claim_request(&format!("Ev{n}"), FP);
            (tenant, n, client.claim(keyed(request, &key)).await)
        }));
    }
    let (mut acme_claimed, mut acme_refused) = (Vec::new(), Vec::new());
    for task in tasks {
        let (tenant, n, answer) = task.await.expect("the task ends");
        match (tenant, answer) {
            ("globex", Ok(reply)) => {
                assert_eq!(decision(reply.get_ref()), Decision::Claimed, "{reply:?}")
            }
            ("globex", Err(status)) => panic!("globex refused: {status:?}"),
            (_, Ok(reply)) => {
                assert_eq!(decision(reply.get_ref()), Decision::Claimed, "{reply:?}");
                acme_claimed.push(n);
            }
            (_, Err(status)) => {
                assert_refused_by(&status, "claims_per_second");
                acme_refused.push(n);
            }
        }
    }
    assert_eq!((acme_claimed.len(), acme_refused.len()), (5, 15));
    let mut client = app.new_client().await;
    for n in acme_refused {
        let status = get(&mut client, &format!("Ev{n}"), &keys[0]).await;
        assert_eq!(status.unwrap_err().code(), Code::NotFound, "Ev{n}");
    }
    assert_eq!(app.receipt_rows().await, 25);
    app.shutdown().await;
}

async fn a_refused_claim_writes_nothing_and_a_claim_once_the_token_is_due_is_claimed_with_attempt_1(
    backend: Backend,
) {
    let (app, keys) = spawn(backend, quota_for("acme", claims(1.0, 1)), &["acme"]).await;
    let mut client = app.new_client().await;
    let first = client
        .claim(keyed(claim_request("Ev1", FP), &keys[0]))
        .await;
    assert_eq!(decision(first.unwrap().get_ref()), Decision::Claimed);
    let refused = client
        .claim(keyed(claim_request("Ev2", FP), &keys[0]))
        .await;
    let delay = assert_refused_by(&refused.unwrap_err(), "claims_per_second");
    assert!(delay <= Duration::from_secs(1), "{delay:?}");
    let status = get(&mut client, "Ev2", &keys[0]).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(app.receipt_rows().await, 1);

    app.advance(delay);
    let later = client
        .claim(keyed(claim_request("Ev2", FP), &keys[0]))
        .await;
    let later = later.expect("a token is due").into_inner();
    assert_eq!(decision(&later), Decision::Claimed, "{later:?}");
    assert_eq!(later.receipt.expect("a receipt").attempt, 1);
    app.shutdown().await;
}

async fn a_refused_takeover_spends_no_attempt(backend: Backend) {
    let (app, keys) = spawn(backend, quota_for("acme", claims(SLOW, 1)), &["acme"]).await;
    let mut client = app.new_client().await;
    let request = || pb::ClaimRequest {
        lease_ttl: secs(1),
        ..claim_request("Ev1", FP)
    };
    let first = client.claim(keyed(request(), &keys[0])).await.unwrap();
    assert_eq!(decision(first.get_ref()), Decision::Claimed);
    // The lease is over: a Claim would take the work over as attempt 2, if it were let in.
    app.advance(Duration::from_secs(2));
    let refused = client.claim(keyed(request(), &keys[0])).await.unwrap_err();
    assert_refused_by(&refused, "claims_per_second");
    let receipt = get(&mut client, "Ev1", &keys[0]).await.unwrap();
    assert_eq!(receipt, first.into_inner().receipt.unwrap(), "unchanged");
    assert_eq!(receipt.attempt, 1);
    app.shutdown().await;
}

async fn writes_per_second_refuses_a_complete_and_leaves_the_receipt_as_it_was(backend: Backend) {
    let writes = Quota {
        writes_per_second: Rate::new(SLOW),
        ..Quota::default()
    };
    let (app, keys) = spawn(backend, quota_for("acme", writes), &["acme"]).await;
    let mut client = app.new_client().await;
    let mut held = Vec::new();
    for key in ["Ev1", "Ev2"] {
        let reply = client.claim(keyed(claim_request(key, FP), &keys[0])).await;
        held.push(reply.expect("Claims are not limited").into_inner());
    }
    let heartbeat = pb::HeartbeatRequest {
        namespace: NS.into(),
        key: "Ev1".into(),
        claim_token: held[0].claim_token.clone(),
        ..Default::default()
    };
    client
        .heartbeat(keyed(heartbeat, &keys[0]))
        .await
        .expect("the one write a second");
    let complete = pb::CompleteRequest {
        namespace: NS.into(),
        key: "Ev2".into(),
        claim_token: held[1].claim_token.clone(),
        response: b"done".to_vec(),
    };
    let refused = client
        .complete(keyed(complete, &keys[0]))
        .await
        .unwrap_err();
    assert_refused_by(&refused, "writes_per_second");
    let receipt = get(&mut client, "Ev2", &keys[0]).await.unwrap();
    assert_eq!(receipt.state(), State::Processing);
    assert_eq!(Some(receipt), held[1].receipt, "unchanged");
    app.shutdown().await;
}

async fn replaced_quotas_apply_to_the_next_call(backend: Backend) {
    let (app, keys) = spawn(backend, quota_for("acme", claims(1000.0, 1000)), &["acme"]).await;
    let mut client = app.new_client().await;
    let claim = |key: String| {
        let request = keyed(claim_request(&key, FP), &keys[0]);
        let mut client = client.clone();
        async move { client.claim(request).await }
    };
    for n in 0..3 {
        claim(format!("Ev{n}")).await.expect("well under the quota");
    }
    // Lowered: the bucket keeps its fill, capped at the new burst of 1.
    app.policies.replace(quota_for("acme", claims(SLOW, 1)));
    claim("Ev3".into()).await.expect("the one token left");
    let refused = claim("Ev4".into()).await.unwrap_err();
    assert_refused_by(&refused, "claims_per_second");
    // Lifted: no section, no limit.
    app.policies.replace(Policies::default());
    for n in 5..10 {
        claim(format!("Ev{n}")).await.expect("no quota");
    }
    let status = get(&mut client, "Ev4", &keys[0]).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    app.shutdown().await;
}

async fn calls_without_a_valid_key_take_no_token(backend: Backend) {
    let mut policies = Policies::default();
    policies.quotas.default = claims(SLOW, 1);
    let (app, keys) = spawn(backend, policies, &["acme"]).await;
    let mut client = app.new_client().await;
    let wrong = format!("{}x", keys[0]);
    for n in 0..5 {
        let refused = client
            .claim(keyed(claim_request(&format!("Ev{n}"), FP), &wrong))
            .await;
        assert_eq!(refused.unwrap_err().code(), Code::Unauthenticated);
        let anonymous = client.claim(claim_request(&format!("Ev{n}"), FP)).await;
        assert_eq!(anonymous.unwrap_err().code(), Code::Unauthenticated);
    }
    let first = client
        .claim(keyed(claim_request("Ev1", FP), &keys[0]))
        .await;
    assert_eq!(
        decision(first.expect("the burst is whole").get_ref()),
        Decision::Claimed
    );
    app.shutdown().await;
}

conformance!(
    a_tenant_over_its_claims_rate_is_refused_with_retry_info_while_another_tenants_concurrent_claims_all_succeed,
    a_refused_claim_writes_nothing_and_a_claim_once_the_token_is_due_is_claimed_with_attempt_1,
    a_refused_takeover_spends_no_attempt,
    writes_per_second_refuses_a_complete_and_leaves_the_receipt_as_it_was,
    replaced_quotas_apply_to_the_next_call,
    calls_without_a_valid_key_take_no_token,
);
