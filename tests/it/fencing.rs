//! Fencing (docs/DESIGN.md §3.3), through the real gRPC server: only the current claim token may
//! Complete, Heartbeat, Retry or Quarantine. A holder whose lease was taken over gets
//! ABORTED and nothing it sends changes the receipt; the current holder gets
//! FAILED_PRECONDITION once the receipt has left PROCESSING (completing again is OK).

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{
    FP, LEASE_SECS, claim, claim_request, claimed, complete, get, heartbeat, quarantine, retry,
};
use claimd::pb::{self, Decision, State};
use std::time::Duration;
use tonic::{Code, Status};

/// What a holder may send with its claim token.
#[derive(Debug, Clone, Copy)]
enum Act {
    Complete,
    Heartbeat,
    Retry,
    Quarantine,
}

const ALL: [Act; 4] = [Act::Complete, Act::Heartbeat, Act::Retry, Act::Quarantine];

/// Sends `act` for `key` with `token`, carrying values that would show if they were stored.
async fn send(app: &TestApp, act: Act, key: &str, token: &str) -> Result<pb::Receipt, Status> {
    match act {
        Act::Complete => complete(app, key, token, b"late response").await,
        Act::Heartbeat => heartbeat(app, key, token, Some(3600), Some(b"late checkpoint")).await,
        Act::Retry => retry(app, key, token, Some(3600), Some(false)).await,
        Act::Quarantine => quarantine(app, key, token, "late poison").await,
    }
}

/// Demands that `act` with `token` fails with `code` and leaves the receipt as it was.
async fn assert_refused(app: &TestApp, act: Act, key: &str, token: &str, code: Code) {
    let before = get(app, key).await;
    let result = send(app, act, key, token).await;
    let err = result.expect_err(&format!("{act:?} must be refused"));
    assert_eq!(err.code(), code, "{act:?}: {err:?}");
    assert_eq!(
        get(app, key).await,
        before,
        "a refused {act:?} changed the receipt"
    );
}

/// A receipt whose first holder's lease ran out and was taken over: (old token, new token).
async fn taken_over(app: &TestApp, key: &str) -> (String, String) {
    let (old, _) = claimed(app, key, b"body").await;
    heartbeat(app, key, &old, Some(LEASE_SECS), Some(b"step 1"))
        .await
        .expect("the holder's heartbeat");
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));
    let (new, r) = claimed(app, key, b"").await;
    assert_eq!(r.attempt, 2);
    (old, new)
}

/// After a takeover, `act` by the old holder is ABORTED while the receipt is PROCESSING,
/// RETRY_WAIT and COMPLETED under the new holder, and never changes it.
async fn assert_taken_over_holder_is_aborted(backend: Backend, act: Act) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (old, new) = taken_over(&app, "Ev1").await;
    assert_refused(&app, act, "Ev1", &old, Code::Aborted).await;
    // The old lease's end has passed too: still no way back in.
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));
    heartbeat(&app, "Ev1", &new, Some(LEASE_SECS), None)
        .await
        .expect("the new holder is unaffected");
    assert_refused(&app, act, "Ev1", &old, Code::Aborted).await;
    retry(&app, "Ev1", &new, Some(5), None).await.unwrap();
    assert_refused(&app, act, "Ev1", &old, Code::Aborted).await;
    app.advance(Duration::from_secs(6));
    let (newest, _) = claimed(&app, "Ev1", b"").await;
    let done = complete(&app, "Ev1", &newest, b"200 ok").await.unwrap();
    assert_refused(&app, act, "Ev1", &old, Code::Aborted).await;
    assert_refused(&app, act, "Ev1", &new, Code::Aborted).await;
    assert_eq!(get(&app, "Ev1").await.response, done.response);
}

async fn complete_with_a_taken_over_token_is_aborted_and_changes_nothing(backend: Backend) {
    assert_taken_over_holder_is_aborted(backend, Act::Complete).await;
}

async fn heartbeat_with_a_taken_over_token_is_aborted_and_changes_nothing(backend: Backend) {
    assert_taken_over_holder_is_aborted(backend, Act::Heartbeat).await;
}

async fn retry_with_a_taken_over_token_is_aborted_and_changes_nothing(backend: Backend) {
    assert_taken_over_holder_is_aborted(backend, Act::Retry).await;
}

async fn quarantine_with_a_taken_over_token_is_aborted_and_changes_nothing(backend: Backend) {
    assert_taken_over_holder_is_aborted(backend, Act::Quarantine).await;
}

async fn completing_twice_with_the_current_token_is_ok_and_keeps_the_first_response(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let first = complete(&app, "Ev1", &token, b"first").await.unwrap();
    app.advance(Duration::from_secs(5));
    let second = complete(&app, "Ev1", &token, b"second").await.unwrap();
    assert_eq!(second, first, "the second Complete changed nothing");
    assert_eq!(second.response, b"first");
    assert_eq!(get(&app, "Ev1").await, first);
    let replay = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&replay), Decision::Completed);
    assert_eq!(replay.receipt.unwrap().response, b"first");
}

async fn every_action_after_the_holders_own_retry_fails_precondition(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let r = retry(&app, "Ev1", &token, Some(10), None).await.unwrap();
    assert_eq!(r.state(), State::RetryWait);
    for act in ALL {
        assert_refused(&app, act, "Ev1", &token, Code::FailedPrecondition).await;
    }
    // Due but not yet claimed again: the old holder still cannot act on it.
    app.advance(Duration::from_secs(11));
    for act in ALL {
        assert_refused(&app, act, "Ev1", &token, Code::FailedPrecondition).await;
    }
}

async fn every_action_after_the_holders_own_quarantine_fails_precondition(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let r = quarantine(&app, "Ev1", &token, "poison").await.unwrap();
    assert_eq!(r.state(), State::Quarantined);
    for act in ALL {
        assert_refused(&app, act, "Ev1", &token, Code::FailedPrecondition).await;
    }
    assert_eq!(get(&app, "Ev1").await.last_error, "poison");
}

async fn heartbeat_retry_and_quarantine_after_completion_fail_precondition(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    complete(&app, "Ev1", &token, b"200 ok").await.unwrap();
    for act in [Act::Heartbeat, Act::Retry, Act::Quarantine] {
        assert_refused(&app, act, "Ev1", &token, Code::FailedPrecondition).await;
    }
    assert_eq!(get(&app, "Ev1").await.state(), State::Completed);
}

async fn every_action_on_an_unknown_key_is_not_found(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let stranger = uuid::Uuid::new_v4().to_string();
    for act in ALL {
        for t in [&token, &stranger] {
            let err = send(&app, act, "Ev2", t).await.expect_err("no receipt");
            assert_eq!(err.code(), Code::NotFound, "{act:?}: {err:?}");
        }
    }
    let err = app
        .get(crate::common::receipt_ops::NS, "Ev2")
        .await
        .expect_err("not created");
    assert_eq!(err.code(), Code::NotFound);
}

async fn the_holder_of_a_receipt_claim_quarantined_for_its_budget_is_aborted(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 1)
        .spawn()
        .await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));
    let spent = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&spent), Decision::Quarantined, "{spent:?}");
    for act in ALL {
        assert_refused(&app, act, "Ev1", &token, Code::Aborted).await;
    }
    assert_eq!(get(&app, "Ev1").await.last_error, "exceeded max attempts");
}

conformance_every_door!(
    complete_with_a_taken_over_token_is_aborted_and_changes_nothing,
    heartbeat_with_a_taken_over_token_is_aborted_and_changes_nothing,
    retry_with_a_taken_over_token_is_aborted_and_changes_nothing,
    quarantine_with_a_taken_over_token_is_aborted_and_changes_nothing,
    completing_twice_with_the_current_token_is_ok_and_keeps_the_first_response,
    every_action_after_the_holders_own_retry_fails_precondition,
    every_action_after_the_holders_own_quarantine_fails_precondition,
    heartbeat_retry_and_quarantine_after_completion_fail_precondition,
    every_action_on_an_unknown_key_is_not_found,
    the_holder_of_a_receipt_claim_quarantined_for_its_budget_is_aborted,
);
