//! Group-commit lanes (docs/DESIGN.md §4.2.1) through the real server on PostgreSQL: one
//! lane serves while it keeps up, so batches fill; a lane stuck behind a lock does not hold
//! back the calls that arrive after it, because another lane starts for them.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::blocker::Blocker;
use crate::common::receipt_ops::{FP, claim_request, claimed, heartbeat};
use claimd::pb::{Decision, State};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn postgres_calls_behind_a_lane_stuck_on_a_lock_are_served_by_another_lane() {
    let app = TestApp::builder().backend(Backend::Postgres).spawn().await;
    let (busy, _) = claimed(&app, "busy", b"payload").await;

    // The first lane waits behind the test's lock with a Heartbeat of "busy".
    let mut blocker = Blocker::hold(&app.database_url, "busy").await;
    let app = Arc::new(app);
    let stuck = {
        let app = app.clone();
        tokio::spawn(async move { heartbeat(&app, "busy", &busy, Some(60), None).await })
    };
    blocker.wait_for_waiter().await;

    // Calls for other rows are answered while the lock is still held.
    for n in 0..5 {
        let key = format!("free-{n}");
        let answer = tokio::time::timeout(
            Duration::from_secs(3),
            app.client.clone().claim(claim_request(&key, FP)),
        )
        .await
        .unwrap_or_else(|_| panic!("Claim of {key} waited for the stuck lane"))
        .expect("Claim succeeds")
        .into_inner();
        assert_eq!(decision(&answer), Decision::Claimed, "{answer:?}");
    }
    assert!(!stuck.is_finished(), "the lock is still held");

    blocker.release().await;
    let beat = stuck.await.unwrap().expect("the Heartbeat that waited");
    assert_eq!(beat.state(), State::Processing);
}
