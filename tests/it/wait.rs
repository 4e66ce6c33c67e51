//! Claim with `wait` (docs/DESIGN.md §2.9) through the real server, on both stores: a
//! duplicate that arrives while the holder works is held and answered with what a fresh
//! Claim decides once the receipt settles (COMPLETED with the response, RETRY_SCHEDULED,
//! QUARANTINED), CLAIMED when the holder's lease ran out meanwhile, IN_FLIGHT when the wait
//! or the call's deadline comes first, at once when claimd drains or too many wait; bad
//! waits are refused naming the field. Across replicas on PostgreSQL: `wait/replicas.rs`.
//!
//! Each test makes a waiter and checks it is still waiting before the holder acts: a claimd
//! that ignored `wait` would have answered IN_FLIGHT at once. Liveness bounds (a waiter
//! answered within [`PATIENCE`]) are far above any wait that should happen.

mod replicas;

use crate::common::app::{Backend, TestApp, assert_names_field, decision};
use crate::common::receipt_ops::{
    FP, claim, claim_request, claimed, complete, get, quarantine, retry, secs,
};
use claimd::pb::{ClaimRequest, ClaimResponse, Decision, State};
use std::time::Duration;
use tokio::task::JoinHandle;
use tonic::Code;

/// Far longer than any answer here should take.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a waiter is watched before the holder acts, to see it does wait.
const STILL_WAITING: Duration = Duration::from_millis(300);

/// A Claim of `key` that waits up to `wait_secs`.
fn waiting(key: &str, wait_secs: i64) -> ClaimRequest {
    ClaimRequest {
        wait: secs(wait_secs),
        ..claim_request(key, FP)
    }
}

/// Sends `request` from a client of its own; the answer, once it comes.
fn spawn_claim(app: &TestApp, request: ClaimRequest) -> JoinHandle<ClaimResponse> {
    let client = app.client.clone();
    tokio::spawn(async move {
        let answer = tokio::time::timeout(PATIENCE, client.clone().claim(request)).await;
        let answer = answer.expect("the waiting Claim is answered within PATIENCE");
        answer.expect("the waiting Claim succeeds").into_inner()
    })
}

/// Fails unless `waiter` is still waiting after [`STILL_WAITING`].
async fn assert_still_waiting(waiter: &JoinHandle<ClaimResponse>) {
    tokio::time::sleep(STILL_WAITING).await;
    assert!(
        !waiter.is_finished(),
        "the Claim with wait was answered at once"
    );
}

async fn a_waiting_claim_gets_the_stored_response_once_the_holder_completes(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "ev", b"body").await;
    let waiters: Vec<_> = (0..5)
        .map(|_| spawn_claim(&app, waiting("ev", 20)))
        .collect();
    for w in &waiters {
        assert_still_waiting(w).await;
    }
    complete(&app, "ev", &token, b"the reply").await.unwrap();
    for w in waiters {
        let answer = w.await.unwrap();
        assert_eq!(decision(&answer), Decision::Completed, "{answer:?}");
        let r = answer.receipt.unwrap();
        assert_eq!(
            (r.state(), r.response.as_slice()),
            (State::Completed, &b"the reply"[..])
        );
        assert!(answer.claim_token.is_empty());
    }
}

async fn a_waiting_claim_gets_retry_scheduled_or_quarantined_when_the_holder_settles_so(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (retried, _) = claimed(&app, "retried", b"").await;
    let (poisoned, _) = claimed(&app, "poisoned", b"").await;
    let on_retry = spawn_claim(&app, waiting("retried", 20));
    let on_quarantine = spawn_claim(&app, waiting("poisoned", 20));
    assert_still_waiting(&on_retry).await;
    assert_still_waiting(&on_quarantine).await;
    retry(&app, "retried", &retried, Some(600), None)
        .await
        .unwrap();
    quarantine(&app, "poisoned", &poisoned, "bad event")
        .await
        .unwrap();
    let answer = on_retry.await.unwrap();
    assert_eq!(decision(&answer), Decision::RetryScheduled, "{answer:?}");
    let answer = on_quarantine.await.unwrap();
    assert_eq!(decision(&answer), Decision::Quarantined, "{answer:?}");
    assert_eq!(answer.receipt.unwrap().last_error, "bad event");
}

async fn a_waiting_claim_takes_the_work_over_when_the_holders_lease_runs_out(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let first = claim(
        &app,
        ClaimRequest {
            lease_ttl: secs(1),
            ..claim_request("dies", FP)
        },
    )
    .await;
    assert_eq!(decision(&first), Decision::Claimed);
    // The holder never comes back; the waiter wakes at its lease's end.
    let answer = spawn_claim(&app, waiting("dies", 20)).await.unwrap();
    assert_eq!(decision(&answer), Decision::Claimed, "{answer:?}");
    assert_eq!(answer.receipt.as_ref().unwrap().attempt, 2);
    assert_ne!(answer.claim_token, first.claim_token);
    // Fenced as usual: the old holder's token is refused, the new one completes.
    let late = complete(&app, "dies", &first.claim_token, b"late").await;
    assert_eq!(late.unwrap_err().code(), Code::Aborted);
    complete(&app, "dies", &answer.claim_token, b"ok")
        .await
        .unwrap();
}

async fn a_waiting_claim_is_answered_in_flight_when_its_wait_or_its_deadline_ends_first(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "slow", b"").await;
    let short = ClaimRequest {
        wait: Some(prost_types::Duration {
            seconds: 0,
            nanos: 400_000_000,
        }),
        ..claim_request("slow", FP)
    };
    let answer = spawn_claim(&app, short.clone());
    assert_still_waiting(&answer).await;
    assert_eq!(decision(&answer.await.unwrap()), Decision::InFlight);
    // A wait of 60 s inside a call with a 1 s deadline: IN_FLIGHT, not DEADLINE_EXCEEDED.
    let mut request = tonic::Request::new(waiting("slow", 60));
    request.set_timeout(Duration::from_secs(1));
    let started = std::time::Instant::now();
    let answer = app.client.clone().claim(request).await;
    let answer = answer.expect("answered before the deadline").into_inner();
    assert_eq!(decision(&answer), Decision::InFlight, "{answer:?}");
    assert!(started.elapsed() >= STILL_WAITING, "it waited");
    // Nothing of this changed the holder's receipt.
    complete(&app, "slow", &token, b"done").await.unwrap();
}

async fn a_claim_that_need_not_wait_is_answered_at_once(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    // New, then a duplicate after Complete: neither waits, whatever `wait` says.
    let first = spawn_claim(&app, waiting("fresh", 60));
    let first = tokio::time::timeout(Duration::from_secs(10), first).await;
    let first = first
        .expect("a new key is claimed without waiting")
        .unwrap();
    assert_eq!(decision(&first), Decision::Claimed);
    complete(&app, "fresh", &first.claim_token, b"r")
        .await
        .unwrap();
    let again = claim(&app, waiting("fresh", 60)).await;
    assert_eq!(decision(&again), Decision::Completed);
    // A conflicting fingerprint is answered at once too.
    let other = ClaimRequest {
        fingerprint: b"another body".to_vec(),
        ..waiting("fresh", 60)
    };
    assert_eq!(decision(&claim(&app, other).await), Decision::Conflict);
}

async fn a_bad_wait_is_refused_naming_the_field_and_writes_nothing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let bad = [
        prost_types::Duration {
            seconds: -1,
            nanos: 0,
        },
        prost_types::Duration {
            seconds: 61,
            nanos: 0,
        },
        prost_types::Duration {
            seconds: 60,
            nanos: 1,
        },
        prost_types::Duration {
            seconds: 1,
            nanos: -1,
        },
        prost_types::Duration {
            seconds: 0,
            nanos: 1_000_000_000,
        },
        prost_types::Duration {
            seconds: i64::MAX,
            nanos: 0,
        },
    ];
    for wait in bad {
        let request = ClaimRequest {
            wait: Some(wait),
            ..claim_request("never", FP)
        };
        let status = app.client.clone().claim(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{wait:?}: {status:?}");
        assert_names_field(&status, "wait");
    }
    let status = app
        .get(crate::common::receipt_ops::NS, "never")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "no receipt was written");
    assert_eq!(app.receipt_rows().await, 0);
    // The bounds themselves are accepted.
    for seconds in [0, 60] {
        let request = ClaimRequest {
            wait: secs(seconds),
            ..claim_request(&format!("bound-{seconds}"), FP)
        };
        assert_eq!(decision(&claim(&app, request).await), Decision::Claimed);
    }
}

async fn waiters_beyond_the_limit_are_answered_in_flight_at_once(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.max_waiting_claims = 1)
        .spawn()
        .await;
    let (token, _) = claimed(&app, "busy", b"").await;
    let first = spawn_claim(&app, waiting("busy", 20));
    assert_still_waiting(&first).await;
    let second = tokio::time::timeout(Duration::from_secs(10), claim(&app, waiting("busy", 20)));
    let second = second
        .await
        .expect("the one over the limit is answered at once");
    assert_eq!(decision(&second), Decision::InFlight);
    complete(&app, "busy", &token, b"r").await.unwrap();
    assert_eq!(decision(&first.await.unwrap()), Decision::Completed);
}

async fn waiters_are_answered_in_flight_at_once_when_claimd_drains(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.shutdown_grace = Duration::from_secs(60))
        .spawn()
        .await;
    claimed(&app, "held", b"").await;
    let waiter = spawn_claim(&app, waiting("held", 60));
    assert_still_waiting(&waiter).await;
    let shutdown = tokio::spawn(app.shutdown());
    let answer = waiter.await.unwrap();
    assert_eq!(decision(&answer), Decision::InFlight, "{answer:?}");
    let receipt = answer.receipt.unwrap();
    assert_eq!(receipt.state(), State::Processing);
    tokio::time::timeout(PATIENCE, shutdown)
        .await
        .expect("the drain ends once the waiter is answered")
        .unwrap();
}

async fn a_cancelled_waiting_claim_leaves_the_receipt_as_it_was(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, before) = claimed(&app, "left", b"").await;
    let mut request = tonic::Request::new(waiting("left", 60));
    request.set_timeout(Duration::from_secs(60));
    let mut client = app.client.clone();
    let gone = tokio::time::timeout(STILL_WAITING, client.claim(request)).await;
    assert!(gone.is_err(), "the caller gave up while it waited");
    assert_eq!(get(&app, "left").await, before);
    complete(&app, "left", &token, b"r").await.unwrap();
}

conformance!(
    a_waiting_claim_gets_the_stored_response_once_the_holder_completes,
    a_waiting_claim_gets_retry_scheduled_or_quarantined_when_the_holder_settles_so,
    a_waiting_claim_takes_the_work_over_when_the_holders_lease_runs_out,
    a_waiting_claim_is_answered_in_flight_when_its_wait_or_its_deadline_ends_first,
    a_claim_that_need_not_wait_is_answered_at_once,
    a_bad_wait_is_refused_naming_the_field_and_writes_nothing,
    waiters_beyond_the_limit_are_answered_in_flight_at_once,
    waiters_are_answered_in_flight_at_once_when_claimd_drains,
    a_cancelled_waiting_claim_leaves_the_receipt_as_it_was,
);
