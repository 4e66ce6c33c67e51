//! ClaimService calls as the decision, holder and fencing tests write them: a Claim request
//! to adjust, the four holder actions by key and token, and timestamps in microseconds.
//! Shared by the `decisions`, `holder_actions`, `fencing` and `sealing` tests; the batch
//! tests (`group_commit`, `hot_key`) also hold a claimd's one lane ([`hold_the_lane`]).

use super::app::{TestApp, decision};
use super::blocker::Blocker;
use claimd::pb::{
    self, ClaimRequest, ClaimResponse, CompleteRequest, Decision, HeartbeatRequest,
    QuarantineRequest, RetryRequest,
};
use std::sync::Arc;
use tokio::task::JoinHandle;
use tonic::Status;

/// The namespace every test uses.
pub const NS: &str = "slack-events";
/// The fingerprint of "the" event.
pub const FP: &[u8] = b"sha256-of-body";
/// The lease every helper claims with, in seconds.
pub const LEASE_SECS: i64 = 30;
/// One second in microseconds.
pub const SECOND: i64 = 1_000_000;

/// A wire duration of `s` seconds.
pub fn secs(s: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: s,
        nanos: 0,
    })
}

/// A timestamp that must be set, in microseconds since the epoch.
pub fn micros(t: Option<prost_types::Timestamp>) -> i64 {
    let t = t.expect("timestamp is set");
    t.seconds * SECOND + i64::from(t.nanos) / 1_000
}

/// A Claim of `key` in [`NS`] with fingerprint `fp` and a [`LEASE_SECS`] lease; adjust it
/// with struct update syntax.
pub fn claim_request(key: &str, fp: &[u8]) -> ClaimRequest {
    ClaimRequest {
        namespace: NS.into(),
        key: key.into(),
        fingerprint: fp.to_vec(),
        lease_ttl: secs(LEASE_SECS),
        ..Default::default()
    }
}

/// Sends a Claim, which must succeed (decisions are answers, not errors).
pub async fn claim(app: &TestApp, request: ClaimRequest) -> ClaimResponse {
    app.client
        .clone()
        .claim(request)
        .await
        .expect("Claim succeeds")
        .into_inner()
}

/// Claims `key` with [`FP`] and `recovery_payload`, demands CLAIMED, and returns the token
/// and the receipt.
pub async fn claimed(app: &TestApp, key: &str, recovery_payload: &[u8]) -> (String, pb::Receipt) {
    let request = ClaimRequest {
        recovery_payload: recovery_payload.to_vec(),
        ..claim_request(key, FP)
    };
    let response = claim(app, request).await;
    assert_eq!(decision(&response), Decision::Claimed, "{response:?}");
    assert!(!response.claim_token.is_empty());
    (response.claim_token, response.receipt.expect("a receipt"))
}

/// Whether `key` has a receipt in [`NS`], read with Get (to prove a refused or timed-out
/// call wrote nothing).
pub async fn exists(app: &TestApp, key: &str) -> bool {
    let request = pb::GetRequest {
        namespace: NS.into(),
        key: key.into(),
    };
    match app.client.clone().get(request).await {
        Ok(_) => true,
        Err(status) if status.code() == tonic::Code::NotFound => false,
        Err(status) => panic!("Get {key}: {status:?}"),
    }
}

/// The receipt as Get returns it; the receipt must exist.
pub async fn get(app: &TestApp, key: &str) -> pb::Receipt {
    app.get(NS, key).await.expect("Get finds the receipt")
}

/// Complete by the holder of `token`.
pub async fn complete(
    app: &TestApp,
    key: &str,
    token: &str,
    response: &[u8],
) -> Result<pb::Receipt, Status> {
    let request = CompleteRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        response: response.to_vec(),
    };
    let reply = app.client.clone().complete(request).await?.into_inner();
    Ok(reply.receipt.expect("Complete returns a receipt"))
}

/// Heartbeat by the holder of `token`, with an optional lease (seconds) and checkpoint.
pub async fn heartbeat(
    app: &TestApp,
    key: &str,
    token: &str,
    lease_secs: Option<i64>,
    checkpoint: Option<&[u8]>,
) -> Result<pb::Receipt, Status> {
    let request = HeartbeatRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        lease_ttl: lease_secs.and_then(secs),
        checkpoint: checkpoint.map(<[u8]>::to_vec),
    };
    let reply = app.client.clone().heartbeat(request).await?.into_inner();
    Ok(reply.receipt.expect("Heartbeat returns a receipt"))
}

/// Retry by the holder of `token`, with an optional retry_after (seconds) and count_attempt.
pub async fn retry(
    app: &TestApp,
    key: &str,
    token: &str,
    retry_after_secs: Option<i64>,
    count_attempt: Option<bool>,
) -> Result<pb::Receipt, Status> {
    let request = RetryRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: "upstream 503".into(),
        retry_after: retry_after_secs.and_then(secs),
        count_attempt,
    };
    let reply = app.client.clone().retry(request).await?.into_inner();
    Ok(reply.receipt.expect("Retry returns a receipt"))
}

/// Quarantine by the holder of `token` with `error`.
pub async fn quarantine(
    app: &TestApp,
    key: &str,
    token: &str,
    error: &str,
) -> Result<pb::Receipt, Status> {
    let request = QuarantineRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: error.into(),
    };
    let reply = app.client.clone().quarantine(request).await?.into_inner();
    Ok(reply.receipt.expect("Quarantine returns a receipt"))
}

/// Holds `app`'s one lane (`--group-commit-lanes 1`): a Heartbeat of the key `busy`, claimed
/// here, waits behind the test's lock on its row, so every call sent until the blocker is
/// released queues for one batch. Returns the blocker and the Heartbeat's task.
pub async fn hold_the_lane(
    app: &Arc<TestApp>,
) -> (Blocker, JoinHandle<Result<pb::Receipt, Status>>) {
    let (busy, _) = claimed(app, "busy", b"").await;
    let mut blocker = Blocker::hold(&app.database_url, "busy").await;
    let first = {
        let app = app.clone();
        tokio::spawn(async move { heartbeat(&app, "busy", &busy, Some(60), None).await })
    };
    blocker.wait_for_waiter().await;
    (blocker, first)
}
