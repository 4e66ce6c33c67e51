//! The Rust client helper against a live claimd: a won claim gives a guard that heartbeats,
//! notices a takeover, settles once, and gives the work back when dropped unsettled.

use crate::common::app::{Backend, TestApp};
use claimd_client::pb::{Decision, State};
use claimd_client::{Claimed, Claims};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

async fn claims(app: &TestApp) -> Claims {
    let channel = Channel::from_shared(format!("http://{}", app.addr)).unwrap();
    Claims::new(channel.connect().await.unwrap(), None)
}

async fn a_won_claim_completes_once_and_duplicates_replay(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claims = claims(&app).await;
    let Claimed::Won(guard) = claims
        .claim("hooks", "ev", b"fp", Duration::from_secs(30))
        .await
        .unwrap()
    else {
        panic!("the first claim wins");
    };
    assert_eq!(guard.claim().receipt.as_ref().unwrap().attempt, 1);
    let Claimed::Not(dup) = claims
        .claim("hooks", "ev", b"fp", Duration::from_secs(30))
        .await
        .unwrap()
    else {
        panic!("a duplicate does not win");
    };
    assert_eq!(dup.decision(), Decision::InFlight);
    let done = guard.complete(b"posted".to_vec()).await.unwrap();
    assert_eq!(done.state(), State::Completed);
    let Claimed::Not(replay) = claims
        .claim("hooks", "ev", b"fp", Duration::from_secs(30))
        .await
        .unwrap()
    else {
        panic!("a completed event does not win");
    };
    assert_eq!(
        (replay.decision(), replay.receipt.unwrap().response),
        (Decision::Completed, b"posted".to_vec())
    );
}

async fn heartbeats_keep_the_lease_and_a_takeover_is_reported_as_lost(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claims = claims(&app).await;
    let Claimed::Won(mut guard) = claims
        .claim("hooks", "long", b"fp", Duration::from_secs(1))
        .await
        .unwrap()
    else {
        panic!("the first claim wins");
    };
    // Real time passes beyond the 1 s lease: only the background heartbeats keep it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let Claimed::Not(dup) = claims
        .claim("hooks", "long", b"fp", Duration::from_secs(1))
        .await
        .unwrap()
    else {
        panic!("the heartbeating holder kept its lease");
    };
    assert_eq!(dup.decision(), Decision::InFlight);

    // The database clock jumps past the lease; another worker takes over.
    app.advance(Duration::from_secs(60));
    let Claimed::Won(_thief) = claims
        .claim("hooks", "long", b"fp", Duration::from_secs(30))
        .await
        .unwrap()
    else {
        panic!("the expired lease is taken over");
    };
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the guard notices the takeover");
    let err = guard.complete(b"late".to_vec()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Aborted);
}

async fn a_guard_dropped_unsettled_gives_the_work_back(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claims = claims(&app).await;
    match claims
        .claim("hooks", "panicky", b"fp", Duration::from_secs(30))
        .await
        .unwrap()
    {
        Claimed::Won(guard) => drop(guard),
        Claimed::Not(r) => panic!("the first claim wins: {r:?}"),
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let receipt = app.get("hooks", "panicky").await.unwrap();
        if receipt.state() == claimd::pb::State::RetryWait {
            assert!(receipt.last_error.contains("dropped"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dropped guard never gave the work back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

conformance!(
    a_won_claim_completes_once_and_duplicates_replay,
    heartbeats_keep_the_lease_and_a_takeover_is_reported_as_lost,
    a_guard_dropped_unsettled_gives_the_work_back,
);
