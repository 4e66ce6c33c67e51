//! What a holder's Retry, Heartbeat and Complete do to its receipt, and how the attempt
//! budget ends in quarantine, by Claim or by Retry (docs/DESIGN.md §2), through the real gRPC server.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{
    FP, LEASE_SECS, SECOND, claim, claim_request, claimed, complete, get, heartbeat, micros, retry,
};
use claimd::pb::{Decision, State};
use std::time::Duration;

/// `next_attempt_at - updated_at` of a RETRY_WAIT receipt, in microseconds.
fn delay(r: &claimd::pb::Receipt) -> i64 {
    micros(r.next_attempt_at) - micros(r.updated_at)
}

async fn claim_quarantines_an_expired_lease_when_the_attempt_budget_is_spent(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 2)
        .spawn()
        .await;
    claimed(&app, "Ev1", b"body").await;
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));
    let (_, second) = claimed(&app, "Ev1", b"").await;
    assert_eq!(second.attempt, 2);
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 1));

    let spent = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&spent), Decision::Quarantined, "{spent:?}");
    assert!(spent.claim_token.is_empty());
    let r = spent.receipt.unwrap();
    assert_eq!((r.state(), r.attempt), (State::Quarantined, 2));
    assert_eq!(r.last_error, "exceeded max attempts");
    assert_eq!(r.lease_expires_at, None);
    assert_eq!(get(&app, "Ev1").await, r);
    let again = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&again), Decision::Quarantined);
    assert_eq!(get(&app, "Ev1").await, r, "a second look changes nothing");
}

async fn claim_quarantines_a_due_retry_when_the_attempt_budget_is_spent(backend: Backend) {
    // Retry itself quarantines a spent budget, so a due RETRY_WAIT with a spent budget only
    // exists after the policy was lowered: a replica with max_attempts = 1 sees one.
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    retry(&app, "Ev1", &token, Some(5), None).await.unwrap();
    let strict = TestApp::builder()
        .database_url(app.database_url.clone())
        .configure(|c| {
            c.policies.default.max_attempts = 1;
            // A replica reads what the other sealed: the same keys.
            c.store.seal = app.seal.clone();
        })
        .spawn()
        .await;
    strict.advance(Duration::from_secs(6));
    let spent = claim(&strict, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&spent), Decision::Quarantined, "{spent:?}");
    assert!(spent.claim_token.is_empty());
    let r = spent.receipt.unwrap();
    assert_eq!(
        (r.state(), r.attempt, r.next_attempt_at),
        (State::Quarantined, 1, None)
    );
    assert_eq!(r.last_error, "exceeded max attempts");
    assert_eq!(get(&app, "Ev1").await, r);
}

async fn retry_without_counting_the_attempt_does_not_spend_the_budget(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 1)
        .spawn()
        .await;
    let (mut token, _) = claimed(&app, "Ev1", b"body").await;
    for attempt in 1..=2 {
        let r = retry(&app, "Ev1", &token, Some(5), Some(false))
            .await
            .unwrap();
        assert_eq!((r.state(), r.attempt), (State::RetryWait, attempt));
        assert_eq!(r.last_error, "upstream 503");
        app.advance(Duration::from_secs(6));
        let again = claim(&app, claim_request("Ev1", FP)).await;
        assert_eq!(decision(&again), Decision::Claimed, "{again:?}");
        assert_eq!(
            again.receipt.unwrap().attempt,
            attempt + 1,
            "the fencing number rises"
        );
        token = again.claim_token;
    }
    // One counted attempt is the whole budget of max_attempts = 1.
    let r = retry(&app, "Ev1", &token, Some(5), None).await.unwrap();
    assert_eq!((r.state(), r.attempt), (State::Quarantined, 3));
}

async fn retry_with_the_budget_spent_quarantines(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 2)
        .spawn()
        .await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let r = retry(&app, "Ev1", &token, Some(5), Some(true))
        .await
        .unwrap();
    assert_eq!(r.state(), State::RetryWait, "one of two attempts spent");
    app.advance(Duration::from_secs(6));
    let (token, _) = claimed(&app, "Ev1", b"").await;

    let r = retry(&app, "Ev1", &token, Some(5), None).await.unwrap();
    assert_eq!((r.state(), r.attempt), (State::Quarantined, 2));
    assert!(
        r.last_error.starts_with("exceeded max attempts"),
        "{:?}",
        r.last_error
    );
    assert_eq!((r.next_attempt_at, r.lease_expires_at), (None, None));
    assert_eq!(get(&app, "Ev1").await, r);
    app.advance(Duration::from_secs(6));
    let after = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&after), Decision::Quarantined);
}

async fn retry_without_retry_after_backs_off_with_equal_jitter(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    heartbeat(&app, "Ev1", &token, Some(LEASE_SECS), Some(b"step 1"))
        .await
        .unwrap();
    let r = retry(&app, "Ev1", &token, None, None).await.unwrap();
    assert_eq!((r.state(), r.lease_expires_at), (State::RetryWait, None));
    assert_eq!(r.checkpoint, b"step 1", "Retry keeps the checkpoint");
    let first = delay(&r);
    assert!(
        (SECOND / 2..=SECOND).contains(&first),
        "attempt 1 waited {first} µs"
    );

    app.advance(Duration::from_secs(2));
    let (token, _) = claimed(&app, "Ev1", b"").await;
    let r = retry(&app, "Ev1", &token, None, None).await.unwrap();
    let second = delay(&r);
    assert!(
        (SECOND..=2 * SECOND).contains(&second),
        "attempt 2 waited {second} µs"
    );
    assert_eq!(r.checkpoint, b"step 1");
}

async fn retry_after_schedules_the_next_attempt_exactly_that_far_ahead(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev1", b"body").await;
    let r = retry(&app, "Ev1", &token, Some(40), None).await.unwrap();
    assert_eq!(delay(&r), 40 * SECOND);
    assert_eq!(get(&app, "Ev1").await, r);
    app.advance(Duration::from_secs(39));
    let early = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&early), Decision::RetryScheduled);
    app.advance(Duration::from_secs(2));
    let due = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(decision(&due), Decision::Claimed);
}

async fn heartbeat_extends_the_lease_to_now_plus_ttl_and_stores_the_checkpoint(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.lease_ttl = chrono::TimeDelta::seconds(45))
        .spawn()
        .await;
    let (token, first) = claimed(&app, "Ev1", b"body").await;
    app.advance(Duration::from_secs(20));
    let r = heartbeat(&app, "Ev1", &token, Some(60), Some(b"run 7"))
        .await
        .unwrap();
    assert!(micros(r.updated_at) >= micros(first.created_at) + 20 * SECOND);
    assert_eq!(
        micros(r.lease_expires_at),
        micros(r.updated_at) + 60 * SECOND
    );
    assert_eq!((r.state(), r.attempt), (State::Processing, 1));
    assert_eq!(
        (r.checkpoint.as_slice(), r.recovery_payload.as_slice()),
        (&b"run 7"[..], &b"body"[..])
    );
    assert_eq!(get(&app, "Ev1").await, r);

    app.advance(Duration::from_secs(40));
    let dup = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(
        decision(&dup),
        Decision::InFlight,
        "the old lease end has passed"
    );
    let r = heartbeat(&app, "Ev1", &token, None, None).await.unwrap();
    assert_eq!(r.checkpoint, b"run 7", "no checkpoint keeps the stored one");
    assert_eq!(
        micros(r.lease_expires_at),
        micros(r.updated_at) + 45 * SECOND,
        "policy lease"
    );
}

async fn heartbeat_after_the_lease_ran_out_succeeds_while_nobody_took_over(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, first) = claimed(&app, "Ev1", b"body").await;
    app.advance(Duration::from_secs(LEASE_SECS as u64 + 5));
    let r = heartbeat(&app, "Ev1", &token, Some(LEASE_SECS), Some(b"late"))
        .await
        .unwrap();
    assert_eq!((r.state(), r.attempt), (State::Processing, 1));
    assert!(micros(r.lease_expires_at) > micros(first.lease_expires_at) + 5 * SECOND);
    assert_eq!(r.checkpoint, b"late");
    let dup = claim(&app, claim_request("Ev1", FP)).await;
    assert_eq!(
        decision(&dup),
        Decision::InFlight,
        "the renewed lease holds"
    );
    let done = complete(&app, "Ev1", &token, b"ok").await.unwrap();
    assert_eq!(done.state(), State::Completed);
}

async fn complete_drops_checkpoint_and_recovery_payload_and_sets_completed_at(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, first) = claimed(&app, "Ev1", b"body").await;
    heartbeat(&app, "Ev1", &token, Some(LEASE_SECS), Some(b"reply staged"))
        .await
        .unwrap();
    app.advance(Duration::from_secs(5));
    let r = complete(&app, "Ev1", &token, b"200 ok").await.unwrap();
    assert_eq!((r.state(), r.attempt), (State::Completed, 1));
    assert_eq!(r.response, b"200 ok");
    assert!(
        r.checkpoint.is_empty() && r.recovery_payload.is_empty(),
        "{r:?}"
    );
    assert_eq!(r.completed_at, r.updated_at);
    assert!(micros(r.completed_at) >= micros(first.created_at) + 5 * SECOND);
    assert_eq!((r.lease_expires_at, r.next_attempt_at), (None, None));
    assert_eq!(get(&app, "Ev1").await, r);
}

conformance_every_door!(
    claim_quarantines_an_expired_lease_when_the_attempt_budget_is_spent,
    claim_quarantines_a_due_retry_when_the_attempt_budget_is_spent,
    retry_without_counting_the_attempt_does_not_spend_the_budget,
    retry_with_the_budget_spent_quarantines,
    retry_without_retry_after_backs_off_with_equal_jitter,
    retry_after_schedules_the_next_attempt_exactly_that_far_ahead,
    heartbeat_extends_the_lease_to_now_plus_ttl_and_stores_the_checkpoint,
    heartbeat_after_the_lease_ran_out_succeeds_while_nobody_took_over,
    complete_drops_checkpoint_and_recovery_payload_and_sets_completed_at,
);
