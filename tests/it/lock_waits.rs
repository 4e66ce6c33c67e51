//! Calls that wait behind a database lock (issue: cancelled Claims that commit, leases timed
//! before the lock), on both stores through the real server:
//! - a Claim whose deadline passes while it waits answers DEADLINE_EXCEEDED and has taken
//!   nothing over: no attempt spent, no token nobody holds (docs/DESIGN.md §5.9);
//! - a lease granted after a lock wait runs from when the lock was had, not from when the
//!   call arrived, so it is never already over when the answer arrives (§3.4).

use crate::common::app::{Backend, TestApp, decision};
use crate::common::blocker::Blocker;
use crate::common::receipt_ops::{FP, NS, SECOND, claim_request, claimed, get, micros, secs};
use claimd::pb::{ClaimRequest, Decision, HeartbeatRequest, State};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tonic::{Code, Request};

/// Now on the store's clock (this machine's, shifted by the test's offset), in microseconds.
fn store_now(app: &TestApp) -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_micros()).unwrap() + app.clock.offset_micros()
}

async fn a_claim_whose_deadline_passes_behind_a_lock_takes_nothing_over(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 2)
        .spawn()
        .await;
    let (_, first) = claimed(&app, "held", b"payload").await;
    assert_eq!(first.attempt, 1);
    app.advance(Duration::from_secs(31)); // the 30 s lease is over: a takeover is due

    let mut blocker = Blocker::hold(&app.database_url, "held").await;
    let mut request = Request::new(claim_request("held", FP));
    request.set_timeout(Duration::from_millis(500));
    let mut client = app.new_client().await;
    let call = tokio::spawn(async move { client.claim(request).await });
    blocker.wait_for_waiter().await;
    let status = call
        .await
        .unwrap()
        .expect_err("the Claim cannot finish in time");
    // claimd answers a moment before the deadline; on a loaded machine the client's own
    // timer may still fire first (CANCELLED). What matters here is what was written.
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );

    // The lock stays held well past the deadline, as a slow transaction would hold it (a
    // statement freed within a few milliseconds of the deadline may still commit: the
    // documented race of an answer lost after its commit).
    tokio::time::sleep(Duration::from_millis(300)).await;
    blocker.release().await;
    // Give the abandoned statement every chance to (wrongly) finish once the lock is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = get(&app, "held").await;
    assert_eq!(
        after.attempt, 1,
        "the timed-out Claim spent an attempt: {after:?}"
    );
    assert_eq!(after.state(), State::Processing);
    assert_eq!(
        after.updated_at, first.updated_at,
        "the timed-out Claim wrote"
    );

    // The next delivery takes over as the second attempt, within the budget of two.
    let next = app
        .client
        .clone()
        .claim(claim_request("held", FP))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(decision(&next), Decision::Claimed, "{next:?}");
    assert_eq!(next.receipt.unwrap().attempt, 2);
}

async fn a_heartbeat_that_waited_for_the_lock_gets_its_whole_lease(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "beat", b"payload").await;

    let mut blocker = Blocker::hold(&app.database_url, "beat").await;
    let request = HeartbeatRequest {
        namespace: NS.into(),
        key: "beat".into(),
        claim_token: token,
        lease_ttl: secs(2),
        checkpoint: None,
    };
    let mut client = app.new_client().await;
    let call = tokio::spawn(async move { client.heartbeat(request).await });
    blocker.wait_for_waiter().await;
    // Held for longer than the lease the Heartbeat asks for.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    blocker.release().await;
    let receipt = call.await.unwrap().unwrap().into_inner().receipt.unwrap();
    let answered_at = store_now(&app);
    let lease_end = micros(receipt.lease_expires_at);
    assert!(
        lease_end > answered_at,
        "the lease ended {} ms before the answer arrived",
        (answered_at - lease_end) / 1_000
    );
    let duplicate = app
        .client
        .clone()
        .claim(claim_request("beat", FP))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(decision(&duplicate), Decision::InFlight, "{duplicate:?}");
}

async fn a_takeover_that_waited_for_the_lock_gets_its_whole_lease(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claimed(&app, "taken", b"payload").await;
    app.advance(Duration::from_secs(31));

    let mut blocker = Blocker::hold(&app.database_url, "taken").await;
    let request = ClaimRequest {
        lease_ttl: secs(2),
        ..claim_request("taken", FP)
    };
    let mut client = app.new_client().await;
    let call = tokio::spawn(async move { client.claim(request).await });
    blocker.wait_for_waiter().await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    blocker.release().await;
    let response = call.await.unwrap().unwrap().into_inner();
    assert_eq!(decision(&response), Decision::Claimed, "{response:?}");
    let answered_at = store_now(&app);
    let receipt = response.receipt.unwrap();
    let lease_end = micros(receipt.lease_expires_at);
    assert!(
        lease_end > answered_at,
        "the new lease ended {} ms before the answer arrived",
        (answered_at - lease_end) / 1_000
    );
    assert!(lease_end - micros(receipt.updated_at) <= 2 * SECOND);
}

conformance!(
    a_claim_whose_deadline_passes_behind_a_lock_takes_nothing_over,
    a_heartbeat_that_waited_for_the_lock_gets_its_whole_lease,
    a_takeover_that_waited_for_the_lock_gets_its_whole_lease,
);
