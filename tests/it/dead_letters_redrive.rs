//! Redrive (the dead-letter admin call): a QUARANTINED receipt becomes RETRY_WAIT, due now,
//! with a fresh attempt budget; the attempt number keeps rising; the old holder is ABORTED;
//! payload, checkpoint and error are kept. Anything not quarantined is FAILED_PRECONDITION,
//! anything unknown NOT_FOUND. List is in `dead_letters.rs`.

use crate::common::app::{Backend, TestApp, decision, secs};
use claimd::pb::{
    ClaimRequest, CompleteRequest, Decision, HeartbeatRequest, ListOrphanedRequest, ListRequest,
    OrphanReason, QuarantineRequest, Receipt, RedriveRequest, RetryRequest, State,
};
use std::time::Duration;
use tonic::Code;

const NS: &str = "ns";

/// Claims `key`; must be CLAIMED. Returns the token and the receipt.
async fn claim(app: &TestApp, key: &str) -> (String, Receipt) {
    let request = ClaimRequest {
        namespace: NS.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        recovery_payload: b"the body".to_vec(),
        ..Default::default()
    };
    let response = app.client.clone().claim(request).await.expect("Claim");
    let response = response.into_inner();
    assert_eq!(decision(&response), Decision::Claimed, "{response:?}");
    (response.claim_token, response.receipt.expect("a receipt"))
}

/// A counted Retry after 1 s; returns the receipt (RETRY_WAIT or, budget spent, QUARANTINED).
async fn retry(app: &TestApp, key: &str, token: &str) -> Receipt {
    let request = retry_request(key, token);
    let response = app.client.clone().retry(request).await.expect("Retry");
    response.into_inner().receipt.expect("a receipt")
}

fn retry_request(key: &str, token: &str) -> RetryRequest {
    RetryRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: "upstream 503".into(),
        retry_after: secs(1, 0),
        count_attempt: None,
    }
}

fn redrive_request(key: &str) -> RedriveRequest {
    RedriveRequest {
        namespace: NS.into(),
        key: key.into(),
    }
}

async fn redrive(app: &TestApp, key: &str) -> Receipt {
    let response = app.client.clone().redrive(redrive_request(key)).await;
    response
        .expect("Redrive")
        .into_inner()
        .receipt
        .expect("a receipt")
}

/// The keys List shows as dead letters.
async fn dead_letters(app: &TestApp) -> Vec<String> {
    let request = ListRequest {
        states: vec![State::Quarantined as i32],
        ..Default::default()
    };
    let page = app.client.clone().list(request).await.expect("List");
    page.into_inner()
        .receipts
        .into_iter()
        .map(|r| r.key)
        .collect()
}

async fn a_redriven_dead_letter_runs_a_full_budget_again_with_a_rising_attempt(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 2)
        .spawn()
        .await;
    let (token, _) = claim(&app, "Ev").await;
    let heartbeat = HeartbeatRequest {
        namespace: NS.into(),
        key: "Ev".into(),
        claim_token: token.clone(),
        lease_ttl: secs(30, 0),
        checkpoint: Some(b"reply staged".to_vec()),
    };
    app.client
        .clone()
        .heartbeat(heartbeat)
        .await
        .expect("Heartbeat");
    assert_eq!(retry(&app, "Ev", &token).await.state(), State::RetryWait);
    app.advance(Duration::from_secs(2));
    let (old_token, r) = claim(&app, "Ev").await;
    assert_eq!(r.attempt, 2);
    let dead = retry(&app, "Ev", &old_token).await;
    assert_eq!(dead.state(), State::Quarantined, "the budget of 2 is spent");
    assert_eq!(dead_letters(&app).await, ["Ev"]);

    let r = redrive(&app, "Ev").await;
    assert_eq!(r.state(), State::RetryWait);
    assert_eq!(r.attempt, 2, "the fencing number is not reset");
    assert_eq!(r.next_attempt_at, r.updated_at, "due at once");
    let micros = |t: &Option<prost_types::Timestamp>| t.map(|t| (t.seconds, t.nanos));
    assert!(micros(&r.next_attempt_at) >= micros(&dead.updated_at));
    assert_eq!(r.lease_expires_at, None);
    assert_eq!(r.last_error, dead.last_error, "the error is kept");
    assert!(r.last_error.starts_with("exceeded max attempts"), "{r:?}");
    assert_eq!(r.checkpoint, b"reply staged");
    assert_eq!(r.recovery_payload, b"the body");
    assert_eq!(app.get(NS, "Ev").await.expect("Get"), r);
    assert!(dead_letters(&app).await.is_empty());
    let mut client = app.client.clone();
    let orphans = client.list_orphaned(ListOrphanedRequest::default()).await;
    let orphans = orphans.expect("ListOrphaned").into_inner().orphans;
    assert_eq!(orphans.len(), 1, "a recovery worker finds it");
    assert_eq!(orphans[0].reason(), OrphanReason::RetryDue);

    let stale = app
        .client
        .clone()
        .retry(retry_request("Ev", &old_token))
        .await;
    assert_eq!(stale.unwrap_err().code(), Code::Aborted, "the old holder");

    // A full budget again: attempt 3 retries, attempt 4 is the last.
    let (token, r) = claim(&app, "Ev").await;
    assert_eq!(r.attempt, 3);
    assert_eq!(
        (r.checkpoint, r.recovery_payload),
        (b"reply staged".to_vec(), b"the body".to_vec())
    );
    assert_eq!(retry(&app, "Ev", &token).await.state(), State::RetryWait);
    app.advance(Duration::from_secs(2));
    let (token, r) = claim(&app, "Ev").await;
    assert_eq!(r.attempt, 4);
    assert_eq!(retry(&app, "Ev", &token).await.state(), State::Quarantined);
    assert_eq!(
        redrive(&app, "Ev").await.attempt,
        4,
        "and it can be redriven again"
    );
    app.shutdown().await;
}

async fn the_old_holders_token_is_aborted_after_a_redrive(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claim(&app, "Ev-poison").await;
    let quarantine = |error: &str| QuarantineRequest {
        namespace: NS.into(),
        key: "Ev-poison".into(),
        claim_token: token.clone(),
        error: error.into(),
    };
    let mut client = app.client.clone();
    client
        .quarantine(quarantine("poison"))
        .await
        .expect("Quarantine");
    let redriven = redrive(&app, "Ev-poison").await;
    assert_eq!(redriven.last_error, "poison");

    let complete = CompleteRequest {
        namespace: NS.into(),
        key: "Ev-poison".into(),
        claim_token: token.clone(),
        response: b"late".to_vec(),
    };
    let heartbeat = HeartbeatRequest {
        namespace: NS.into(),
        key: "Ev-poison".into(),
        claim_token: token.clone(),
        lease_ttl: secs(30, 0),
        checkpoint: None,
    };
    let outcomes = [
        ("Complete", client.complete(complete).await.map(drop)),
        ("Heartbeat", client.heartbeat(heartbeat).await.map(drop)),
        (
            "Retry",
            client
                .retry(retry_request("Ev-poison", &token))
                .await
                .map(drop),
        ),
        (
            "Quarantine",
            client.quarantine(quarantine("again")).await.map(drop),
        ),
    ];
    for (rpc, outcome) in outcomes {
        assert_eq!(outcome.unwrap_err().code(), Code::Aborted, "{rpc}");
    }
    assert_eq!(app.get(NS, "Ev-poison").await.expect("Get"), redriven);
    app.shutdown().await;
}

async fn only_a_quarantined_receipt_can_be_redriven_and_an_unknown_one_is_not_found(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claim(&app, "Ev-processing").await;
    let (token, _) = claim(&app, "Ev-waiting").await;
    retry(&app, "Ev-waiting", &token).await;
    let (token, _) = claim(&app, "Ev-done").await;
    let complete = CompleteRequest {
        namespace: NS.into(),
        key: "Ev-done".into(),
        claim_token: token,
        response: b"ok".to_vec(),
    };
    app.client
        .clone()
        .complete(complete)
        .await
        .expect("Complete");
    for (key, state) in [
        ("Ev-processing", "PROCESSING"),
        ("Ev-waiting", "RETRY_WAIT"),
        ("Ev-done", "COMPLETED"),
    ] {
        let before = app.get(NS, key).await.expect("Get");
        let status = app.client.clone().redrive(redrive_request(key)).await;
        let status = status.unwrap_err();
        assert_eq!(status.code(), Code::FailedPrecondition, "{key}: {status:?}");
        assert!(status.message().contains(state), "{status:?}");
        assert_eq!(app.get(NS, key).await.expect("Get"), before, "{key}");
    }
    let rows = app.receipt_rows().await;
    for (ns, key) in [(NS, "Ev-unknown"), ("other-ns", "Ev-done")] {
        let request = RedriveRequest {
            namespace: ns.into(),
            key: key.into(),
        };
        let status = app.client.clone().redrive(request).await.unwrap_err();
        assert_eq!(status.code(), Code::NotFound, "{ns}/{key}: {status:?}");
    }
    assert_eq!(app.receipt_rows().await, rows, "NOT_FOUND creates nothing");
    app.shutdown().await;
}

conformance!(
    a_redriven_dead_letter_runs_a_full_budget_again_with_a_rising_attempt,
    the_old_holders_token_is_aborted_after_a_redrive,
    only_a_quarantined_receipt_can_be_redriven_and_an_unknown_one_is_not_found,
);
