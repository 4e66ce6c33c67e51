//! Waiting across replicas on PostgreSQL (docs/DESIGN.md §2.9): a holder's Complete on one
//! claimd wakes the waiters on another through `pg_notify` and that claimd's one `LISTEN`
//! connection; and a notification lost while that connection was down (the link
//! blackholed, then cut) is made good by reading again once it listens again. In both, the
//! holder's lease (10 minutes) and the wait (60 s) are far beyond [`super::PATIENCE`], so
//! only a wake-up can answer the waiters in time.

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
