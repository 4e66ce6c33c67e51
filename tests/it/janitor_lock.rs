//! Several claimd replicas on one PostgreSQL: only one janitor prunes at a time. While the
//! advisory lock is held — by another replica's janitor, or by any session — a pass is
//! skipped and prunes nothing; once it is released (or its session dies), a pass runs.

use crate::common::app::{Backend, TestApp, decision};
use claimd::janitor::Pass;
use claimd::store::postgres::JANITOR_LOCK_KEY;
use claimd::store::{JanitorLock, Store};
use sqlx::Connection;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NS: &str = "slack-events";

async fn completed(app: &TestApp, key: &str) {
    let reply = app.claim(NS, key, b"fp").await;
    assert_eq!(decision(&reply), claimd::pb::Decision::Claimed);
    let request = claimd::pb::CompleteRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: reply.claim_token,
        response: b"200 ok".to_vec(),
    };
    app.client
        .clone()
        .complete(request)
        .await
        .expect("Complete");
}

/// Two replicas on one database and clock, background janitors off, one receipt past
/// retention.
async fn two_replicas() -> (TestApp, TestApp) {
    let a = TestApp::builder()
        .backend(Backend::Postgres)
        .configure(|c| c.janitor.interval = Duration::ZERO)
        .spawn()
        .await;
    let b = TestApp::builder()
        .database_url(a.database_url.clone())
        .configure(|c| {
            c.janitor.interval = Duration::ZERO;
            c.store.clock = a.clock.clone();
            c.store.seal = a.seal.clone();
        })
        .spawn()
        .await;
    completed(&a, "Ev1").await;
    a.advance(Duration::from_secs(31 * 86_400));
    (a, b)
}

fn deleted(pass: Pass) -> u64 {
    match pass {
        Pass::Ran(report) => report.deleted,
        Pass::Skipped => panic!("the pass was skipped although the lock was free"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_janitor_skips_its_pass_while_another_replica_holds_the_lock() {
    let (a, b) = two_replicas().await;
    let store = a.store().await;
    let held = store
        .try_lock_janitor()
        .await
        .unwrap()
        .expect("the lock is free");
    for janitor in [&a.janitor, &b.janitor] {
        let pass = janitor.run_once().await.expect("pass");
        assert!(matches!(pass, Pass::Skipped), "{pass:?}");
    }
    assert!(store.try_lock_janitor().await.unwrap().is_none());
    assert_eq!(a.receipt_rows().await, 1, "a skipped pass pruned");

    held.release().await.expect("release");
    assert_eq!(deleted(b.janitor.run_once().await.expect("pass")), 1);
    assert_eq!(deleted(a.janitor.run_once().await.expect("pass")), 0);
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_is_the_documented_advisory_lock_and_dies_with_its_session() {
    let (a, b) = two_replicas().await;
    let mut session = sqlx::PgConnection::connect(&a.database_url).await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(JANITOR_LOCK_KEY)
        .execute(&mut session)
        .await
        .unwrap();
    let pass = b.janitor.run_once().await.expect("pass");
    assert!(matches!(pass, Pass::Skipped), "{pass:?}");
    assert_eq!(a.receipt_rows().await, 1);

    // Closing a session releases its lock; so does dropping the janitor's guard without
    // release (a cancelled pass), which closes the guard's own session.
    drop(session);
    let guard = wait_for_lock(&a.store().await).await;
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match b.janitor.run_once().await.expect("pass") {
            Pass::Ran(report) => {
                assert_eq!(report.deleted, 1);
                break;
            }
            Pass::Skipped => assert!(Instant::now() < deadline, "the lock outlived its session"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.shutdown().await;
    a.shutdown().await;
}

/// The janitor lock, once the server has noticed that its last holder's session closed.
async fn wait_for_lock(store: &Arc<dyn Store>) -> JanitorLock {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(guard) = store.try_lock_janitor().await.unwrap() {
            return guard;
        }
        assert!(Instant::now() < deadline, "the lock outlived its session");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
