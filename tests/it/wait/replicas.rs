//! Waiting across replicas on PostgreSQL (docs/DESIGN.md §2.9): a holder's Complete on one
//! claimd wakes the waiters on another through `pg_notify` and that claimd's one `LISTEN`
//! connection; and a notification lost while that connection was down (the link
//! blackholed, then cut) is made good by reading again once it listens again. In both, the
//! holder's lease (10 minutes) and the wait (60 s) are far beyond [`super::PATIENCE`], so
//! only a wake-up can answer the waiters in time. A listening connection left half-open
//! (the link blackholed, nothing closed) is noticed by its heartbeat and made again.

use super::{PATIENCE, assert_still_waiting, spawn_claim, waiting};
use crate::common::app::{Backend, TestApp, decision};
use crate::common::pg::PrivateCluster;
use crate::common::proxy::Proxy;
use crate::common::receipt_ops::{FP, claim, claim_request, complete, secs};
use crate::faults_network::through;
use claimd::pb::{ClaimRequest, Decision};
use std::time::Duration;

/// A Claim of `key` on `app` with a 10-minute lease, which must be CLAIMED: the token.
async fn held(app: &TestApp, key: &str) -> String {
    let request = ClaimRequest {
        lease_ttl: secs(600),
        ..claim_request(key, FP)
    };
    let answer = claim(app, request).await;
    assert_eq!(decision(&answer), Decision::Claimed, "{answer:?}");
    answer.claim_token
}

/// A second claimd on `first`'s database and seal keys.
async fn replica_of(first: &TestApp, url: String) -> TestApp {
    let seal = first.seal.clone();
    TestApp::builder()
        .database_url(url)
        .configure(move |c| c.store.seal = seal)
        .spawn()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_waiters_on_both_replicas_get_the_response_completed_on_one_of_them() {
    let a = TestApp::builder().backend(Backend::Postgres).spawn().await;
    let b = replica_of(&a, a.database_url.clone()).await;
    let token = held(&a, "ev").await;
    let waiters: Vec<_> = (0..20)
        .map(|i| spawn_claim(if i % 2 == 0 { &a } else { &b }, waiting("ev", 60)))
        .collect();
    for w in &waiters {
        assert_still_waiting(w).await;
    }
    complete(&a, "ev", &token, b"the reply").await.unwrap();
    for w in waiters {
        let answer = w.await.unwrap();
        assert_eq!(decision(&answer), Decision::Completed, "{answer:?}");
        assert_eq!(answer.receipt.unwrap().response, b"the reply");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_waiter_whose_notification_was_lost_reads_again_once_its_replica_listens_again()
{
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let a = TestApp::builder().database_url(url.clone()).spawn().await;
    let b = replica_of(&a, through(&proxy, &url)).await;
    let token = held(&a, "ev").await;
    let waiter = spawn_claim(&b, waiting("ev", 60));
    assert_still_waiting(&waiter).await;
    // The notification goes into the blackholed link and is thrown away with it.
    proxy.blackhole();
    complete(&a, "ev", &token, b"the reply").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.drop_connections();
    // Still blackholed while the cut connections end, so none forwards what it held.
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.normal();
    let answer = tokio::time::timeout(PATIENCE, waiter).await;
    let answer = answer.expect("answered within PATIENCE").unwrap();
    assert_eq!(decision(&answer), Decision::Completed, "{answer:?}");
    assert_eq!(answer.receipt.unwrap().response, b"the reply");
}

/// The backend of the listening connection that reaches the database over TCP (the one
/// through the proxy; the other replica's uses the unix socket).
async fn listener_over_tcp(url: &str) -> Option<i32> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .expect("a connection of the test's own");
    let sql = "SELECT pid FROM pg_stat_activity WHERE application_name = 'claimd-listen' \
               AND client_addr IS NOT NULL AND datname = current_database()";
    sqlx::query_scalar(sql)
        .fetch_optional(&mut conn)
        .await
        .expect("pg_stat_activity")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_half_open_listening_connection_is_noticed_by_its_heartbeat_and_made_again() {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let a = TestApp::builder().database_url(url.clone()).spawn().await;
    let seal = a.seal.clone();
    let _b = TestApp::builder()
        .database_url(through(&proxy, &url))
        .configure(move |c| {
            c.store.seal = seal;
            c.store.acquire_timeout = Duration::from_secs(1);
        })
        .spawn()
        .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let before = loop {
        if let Some(pid) = listener_over_tcp(&url).await {
            break pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "b never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Half-open for longer than a heartbeat and its bound (1 s + 0.5 s), then whole again:
    // no connection was closed, so only the heartbeat can tell the listener to start over.
    proxy.blackhole();
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.normal();
    loop {
        let now = listener_over_tcp(&url).await;
        if now.is_some_and(|pid| pid != before) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline + PATIENCE,
            "the listening connection was not made again: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(a);
}
