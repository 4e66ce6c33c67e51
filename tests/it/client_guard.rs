//! The Rust client helper against a live claimd: a won claim gives a guard that heartbeats,
//! notices a takeover, settles once, and gives the work back when dropped unsettled; a
//! refusal by a tenant quota (docs/DESIGN.md §5.15) is `Error::Quota` with the quota's name
//! and the retry delay.

use crate::common::app::{Backend, TestApp};
use claimd::domain::{Policies, Quota, Rate};
use claimd_client::pb::{Decision, State};
use claimd_client::{Claimed, Claims, Error};
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

/// A claimd whose anonymous callers (tenant `default`) have `quota`.
async fn with_default_quota(backend: Backend, quota: Quota) -> TestApp {
    let mut policies = Policies::default();
    policies.quotas.tenants.insert("default".into(), quota);
    TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies = policies)
        .spawn()
        .await
}

/// One token per thousand seconds, in a bucket of one: nothing refills while a test runs.
const SLOW: f64 = 0.001;

async fn a_claim_over_the_tenants_claims_quota_is_a_quota_error_with_its_name_and_retry_delay(
    backend: Backend,
) {
    let quota = Quota {
        claims_per_second: Rate::new(SLOW),
        burst: Some(1),
        ..Quota::default()
    };
    let app = with_default_quota(backend, quota).await;
    let claims = claims(&app).await;
    let lease = Duration::from_secs(30);
    let Claimed::Won(guard) = claims.claim("hooks", "ev1", b"fp", lease).await.unwrap() else {
        panic!("the first claim wins");
    };
    let err = claims
        .claim("hooks", "ev2", b"fp", lease)
        .await
        .unwrap_err();
    let Error::Quota {
        quota,
        retry_after,
        status,
    } = &err
    else {
        panic!("not a quota error: {err:?}");
    };
    assert_eq!(quota, "claims_per_second");
    assert!(*retry_after > Duration::ZERO, "{err:?}");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert_eq!(err.retry_after(), Some(*retry_after));
    // Nothing was written for the refused Claim.
    assert_eq!(
        app.get("hooks", "ev2").await.unwrap_err().code(),
        tonic::Code::NotFound
    );
    guard.complete(b"done".to_vec()).await.unwrap();
}

async fn a_complete_over_the_tenants_writes_quota_is_a_quota_error_and_the_lease_stays_held(
    backend: Backend,
) {
    let quota = Quota {
        writes_per_second: Rate::new(SLOW),
        ..Quota::default()
    };
    let app = with_default_quota(backend, quota).await;
    let claims = claims(&app).await;
    let lease = Duration::from_secs(30);
    for (key, settles) in [("ev1", true), ("ev2", false)] {
        let Claimed::Won(guard) = claims.claim("hooks", key, b"fp", lease).await.unwrap() else {
            panic!("{key}: the first claim wins");
        };
        let answer = guard.complete(b"done".to_vec()).await;
        match (settles, answer) {
            (true, answer) => assert_eq!(answer.unwrap().state(), State::Completed),
            (
                false,
                Err(Error::Quota {
                    quota, retry_after, ..
                }),
            ) => {
                assert_eq!(quota, "writes_per_second");
                assert!(retry_after > Duration::ZERO);
            }
            (false, other) => panic!("{key}: not a quota error: {other:?}"),
        }
    }
    // The refused Complete wrote nothing: the receipt is still being processed.
    let receipt = app.get("hooks", "ev2").await.unwrap();
    assert_eq!(receipt.state(), claimd::pb::State::Processing);
}

conformance!(
    a_won_claim_completes_once_and_duplicates_replay,
    heartbeats_keep_the_lease_and_a_takeover_is_reported_as_lost,
    a_guard_dropped_unsettled_gives_the_work_back,
    a_claim_over_the_tenants_claims_quota_is_a_quota_error_with_its_name_and_retry_delay,
    a_complete_over_the_tenants_writes_quota_is_a_quota_error_and_the_lease_stays_held,
);
