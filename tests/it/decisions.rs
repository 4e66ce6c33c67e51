//! One test per Claim decision of docs/DESIGN.md §2, through the real gRPC server.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{
    FP, LEASE_SECS, NS, SECOND, claim, claim_request, claimed, complete, get, heartbeat, micros,
    quarantine, retry,
};
use claimd::pb::{self, ClaimRequest, CompleteRequest, Decision, State};
use std::time::Duration;
use tonic::Code;

/// Claims `key` with another fingerprint and demands CONFLICT with nothing changed.
async fn assert_conflict_changes_nothing(app: &TestApp, key: &str) {
    let before = get(app, key).await;
    let response = claim(app, claim_request(key, b"another body")).await;
    assert_eq!(decision(&response), Decision::Conflict, "{response:?}");
    assert!(response.claim_token.is_empty());
    assert_eq!(
        get(app, key).await,
        before,
        "a conflict changed the receipt"
    );
}

/// Claims `key` with [`FP`] and demands `expected` without a token or any change.
async fn assert_read(app: &TestApp, key: &str, expected: Decision) -> pb::Receipt {
    let before = get(app, key).await;
    let response = claim(app, claim_request(key, FP)).await;
    assert_eq!(decision(&response), expected, "{response:?}");
    assert!(
        response.claim_token.is_empty(),
        "only CLAIMED carries a token"
    );
    let after = get(app, key).await;
    assert_eq!(after, before, "a duplicate delivery wrote to the receipt");
    response.receipt.expect("a receipt")
}

async fn first_claim_is_claimed_and_completed_claims_replay_the_response(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let first = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&first), Decision::Claimed);
    assert!(!first.claim_token.is_empty());
    let receipt = first.receipt.clone().unwrap();
    assert_eq!((receipt.attempt, receipt.state()), (1, State::Processing));

    let again = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&again), Decision::InFlight);
    assert!(again.claim_token.is_empty());

    let done = app
        .client
        .clone()
        .complete(CompleteRequest {
            namespace: "slack-events".into(),
            key: "Ev1".into(),
            claim_token: first.claim_token.clone(),
            response: b"200 ok".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.receipt.unwrap().state(), State::Completed);

    let replay = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&replay), Decision::Completed);
    assert_eq!(replay.receipt.unwrap().response, b"200 ok");
    app.shutdown().await;
}

async fn first_claim_creates_a_processing_receipt_with_attempt_one_and_a_lease_of_lease_ttl(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, r) = claimed(&app, "Ev1", b"body").await;
    assert!(uuid::Uuid::try_parse(&token).is_ok(), "token {token:?}");
    assert_eq!((r.state(), r.attempt), (State::Processing, 1));
    assert_eq!((r.namespace.as_str(), r.key.as_str()), (NS, "Ev1"));
    assert_eq!(
        (r.fingerprint.as_slice(), r.recovery_payload.as_slice()),
        (FP, &b"body"[..])
    );
    assert_eq!(
        micros(r.lease_expires_at),
        micros(r.created_at) + LEASE_SECS * SECOND
    );
    assert_eq!(r.updated_at, r.created_at);
    assert_eq!((r.next_attempt_at, r.completed_at), (None, None));
    assert_eq!(get(&app, "Ev1").await, r, "Get shows what Claim returned");
}

async fn claim_with_another_fingerprint_conflicts_while_processing_even_after_the_lease(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claimed(&app, "Ev1", b"body").await;
    assert_conflict_changes_nothing(&app, "Ev1").await;
    app.advance(Duration::from_secs(60));
    assert_conflict_changes_nothing(&app, "Ev1").await;
}

async fn claim_with_another_fingerprint_conflicts_in_retry_wait_even_when_due(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    retry(&app, "Ev1", &token, Some(10), None).await.unwrap();
    assert_conflict_changes_nothing(&app, "Ev1").await;
    app.advance(Duration::from_secs(60));
    assert_conflict_changes_nothing(&app, "Ev1").await;
}

async fn claim_with_another_fingerprint_conflicts_after_completion(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    complete(&app, "Ev1", &token, b"200 ok").await.unwrap();
    assert_conflict_changes_nothing(&app, "Ev1").await;
}

async fn claim_with_another_fingerprint_conflicts_after_quarantine(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    quarantine(&app, "Ev1", &token, "poison").await.unwrap();
    assert_conflict_changes_nothing(&app, "Ev1").await;
}

async fn claim_returns_quarantined_with_the_last_error_after_a_quarantine(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    quarantine(&app, "Ev1", &token, "unparseable payload")
        .await
        .unwrap();
    let r = assert_read(&app, "Ev1", Decision::Quarantined).await;
    assert_eq!(
        (r.state(), r.last_error.as_str()),
        (State::Quarantined, "unparseable payload")
    );
    app.advance(Duration::from_secs(3600));
    let r = assert_read(&app, "Ev1", Decision::Quarantined).await;
    assert_eq!(
        (r.attempt, r.last_error.as_str()),
        (1, "unparseable payload")
    );
}

async fn claim_returns_in_flight_while_the_lease_is_held(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (_, first) = claimed(&app, "Ev1", b"body").await;
    for _ in 0..3 {
        let r = assert_read(&app, "Ev1", Decision::InFlight).await;
        assert_eq!((r.state(), r.attempt), (State::Processing, 1));
        assert_eq!(r.lease_expires_at, first.lease_expires_at);
        assert_eq!(r.updated_at, first.updated_at);
    }
    app.advance(Duration::from_secs(LEASE_SECS as u64 - 1));
    let r = assert_read(&app, "Ev1", Decision::InFlight).await;
    assert_eq!((r.attempt, r.lease_expires_at), (1, first.lease_expires_at));
}

async fn claim_returns_retry_scheduled_until_next_attempt_at_then_claims_attempt_two(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    heartbeat(&app, "Ev1", &token, None, Some(b"reply staged"))
        .await
        .unwrap();
    let waiting = retry(&app, "Ev1", &token, Some(10), None).await.unwrap();
    let r = assert_read(&app, "Ev1", Decision::RetryScheduled).await;
    assert_eq!((r.state(), r.attempt), (State::RetryWait, 1));
    assert_eq!(r.next_attempt_at, waiting.next_attempt_at);
    app.advance(Duration::from_secs(9));
    let r = assert_read(&app, "Ev1", Decision::RetryScheduled).await;
    assert_eq!(r.next_attempt_at, waiting.next_attempt_at);

    app.advance(Duration::from_secs(2));
    let again = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&again), Decision::Claimed);
    assert!(!again.claim_token.is_empty() && again.claim_token != token);
    let r = again.receipt.unwrap();
    assert_eq!(
        (r.state(), r.attempt, r.next_attempt_at),
        (State::Processing, 2, None)
    );
    assert_eq!(
        (r.checkpoint.as_slice(), r.recovery_payload.as_slice()),
        (&b"reply staged"[..], &b"body"[..])
    );
    assert_eq!(
        micros(r.lease_expires_at),
        micros(r.updated_at) + LEASE_SECS * SECOND
    );
    assert_eq!(get(&app, "Ev1").await, r);
}

async fn claim_takes_over_an_expired_lease_with_a_new_token_keeping_checkpoint_and_payload(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, first) = claimed(&app, "Ev1", b"original body").await;
    heartbeat(&app, "Ev1", &token, Some(LEASE_SECS), Some(b"session 42"))
        .await
        .unwrap();
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));

    let request = ClaimRequest {
        recovery_payload: b"recovery worker's body".to_vec(),
        lease_ttl: crate::common::receipt_ops::secs(60),
        ..claim_request("Ev1", FP)
    };
    let takeover = claim(&app, request).await;
    assert_eq!(decision(&takeover), Decision::Claimed);
    assert!(!takeover.claim_token.is_empty() && takeover.claim_token != token);
    let r = takeover.receipt.unwrap();
    assert_eq!((r.state(), r.attempt), (State::Processing, 2));
    assert_eq!(r.checkpoint, b"session 42");
    assert_eq!(
        r.recovery_payload, b"original body",
        "the first claim's payload is kept"
    );
    assert_eq!(r.created_at, first.created_at);
    assert!(micros(r.updated_at) >= micros(first.created_at) + (LEASE_SECS + 1) * SECOND);
    assert_eq!(
        micros(r.lease_expires_at),
        micros(r.updated_at) + 60 * SECOND
    );
    assert_eq!(get(&app, "Ev1").await, r);
    assert_read(&app, "Ev1", Decision::InFlight).await;
}

async fn get_returns_not_found_for_an_unknown_key(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claimed(&app, "Ev1", b"").await;
    let err = app.get(NS, "Ev2").await.expect_err("no receipt for Ev2");
    assert_eq!(err.code(), Code::NotFound);
    let err = app
        .get("stripe-webhooks", "Ev1")
        .await
        .expect_err("other namespace");
    assert_eq!(err.code(), Code::NotFound);
}

async fn delivery_attempt_does_not_change_the_decision(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let redelivered = |key: &str, n: u32| ClaimRequest {
        delivery_attempt: n,
        ..claim_request(key, FP)
    };
    let first = claim(&app, redelivered("Ev1", 3)).await;
    assert_eq!(
        decision(&first),
        Decision::Claimed,
        "a hint never refuses a claim"
    );
    assert_eq!(first.receipt.as_ref().unwrap().attempt, 1);
    let before = get(&app, "Ev1").await;
    for n in [0, 3] {
        let dup = claim(&app, redelivered("Ev1", n)).await;
        assert_eq!(
            (decision(&dup), dup.claim_token.as_str()),
            (Decision::InFlight, "")
        );
    }
    assert_eq!(get(&app, "Ev1").await, before);

    complete(&app, "Ev1", &first.claim_token, b"ok")
        .await
        .unwrap();
    for n in [0, 3] {
        let replay = claim(&app, redelivered("Ev1", n)).await;
        assert_eq!(decision(&replay), Decision::Completed);
        assert_eq!(replay.receipt.unwrap().response, b"ok");
    }
    let other = claim(&app, redelivered("Ev2", 0)).await;
    assert_eq!(decision(&other), Decision::Claimed);
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));
    let takeover = claim(&app, redelivered("Ev2", 3)).await;
    assert_eq!(decision(&takeover), Decision::Claimed);
    assert_eq!(takeover.receipt.unwrap().attempt, 2);
}

conformance_every_door!(
    first_claim_is_claimed_and_completed_claims_replay_the_response,
    first_claim_creates_a_processing_receipt_with_attempt_one_and_a_lease_of_lease_ttl,
    claim_with_another_fingerprint_conflicts_while_processing_even_after_the_lease,
    claim_with_another_fingerprint_conflicts_in_retry_wait_even_when_due,
    claim_with_another_fingerprint_conflicts_after_completion,
    claim_with_another_fingerprint_conflicts_after_quarantine,
    claim_returns_quarantined_with_the_last_error_after_a_quarantine,
    claim_returns_in_flight_while_the_lease_is_held,
    claim_returns_retry_scheduled_until_next_attempt_at_then_claims_attempt_two,
    claim_takes_over_an_expired_lease_with_a_new_token_keeping_checkpoint_and_payload,
    get_returns_not_found_for_an_unknown_key,
    delivery_attempt_does_not_change_the_decision,
);
