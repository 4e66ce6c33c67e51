//! A batch whose write committed but whose answer never reached claimd (docs/RELIABILITY.md,
//! "answer lost after the commit"): claimd gives the statement up at `--db-timeout` + 0.5 s
//! and runs each of its jobs again alone. Found by the 30-minute PostgreSQL soak: a Claim
//! whose own insert had committed was then answered IN_FLIGHT (its re-run found its own
//! row), and the re-runs took one connection each, all at once (the pool grew by the
//! batch's size). Now a job that wrote reads its row first and answers as written when
//! the row is as its write made it, and the re-runs go a few at a time.
//!
//! How the answer is lost: claimd (one group-commit lane) reaches PostgreSQL through the
//! test's proxy. A Complete held on a row lock keeps the lane busy while 20 new Claims and
//! a Complete queue behind it; that batch then waits on a second row lock, the proxy
//! blackholes the link, and the lock is released, so the batch commits while its answer is
//! held. Once claimd has given the statement up, the link comes back for the re-runs.

use crate::common::app::{TestApp, decision};
use crate::common::blocker::Blocker;
use crate::common::pg::PrivateCluster;
use crate::common::proxy::Proxy;
use crate::common::receipt_ops::{FP, claim, claim_request, claimed, complete, get};
use crate::faults_network::through;
use claimd::pb::{Decision, State};
use std::time::Duration;

/// `--db-timeout` here: claimd gives a statement up 0.5 s after it.
const DB_TIMEOUT: Duration = Duration::from_secs(3);
/// New keys claimed in the batch whose answer is lost.
const CLAIMS: usize = 20;

/// The PostgreSQL backends connected to the database `url` names.
async fn backends(url: &str) -> i64 {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_one(&mut conn)
    .await
    .expect("count backends");
    n
}

/// A private PostgreSQL on TCP, a fresh database on it (its URL), the test's proxy in front
/// of it, and a claimd with one group-commit lane reaching it through the proxy, with
/// `--db-timeout` of `db_timeout`.
async fn one_lane_behind_a_proxy(db_timeout: Duration) -> (PrivateCluster, String, Proxy, TestApp) {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let app = TestApp::builder()
        .database_url(through(&proxy, &url))
        .configure(move |c| {
            c.store.acquire_timeout = db_timeout;
            c.store.batch.lanes = Some(1);
            c.store.max_connections = 64;
        })
        .spawn()
        .await;
    (cluster, url, proxy, app)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_claims_whose_batch_committed_but_whose_answer_was_lost_are_answered_claimed() {
    let (_cluster, url, proxy, app) = one_lane_behind_a_proxy(DB_TIMEOUT).await;
    let (busy, _) = claimed(&app, "busy", b"").await;
    let (held, _) = claimed(&app, "held", b"").await;

    // The lane is busy with a Complete waiting on a lock...
    let mut first_lock = Blocker::hold(&url, "busy").await;
    let c = app.client.clone();
    let busy_done = tokio::spawn(async move {
        let mut c = c;
        let request = claimd::pb::CompleteRequest {
            namespace: crate::common::receipt_ops::NS.into(),
            key: "busy".into(),
            claim_token: busy,
            response: b"r".to_vec(),
        };
        c.complete(request).await.map(drop)
    });
    first_lock.wait_for_waiter().await;
    // ...so the Claims and a Complete on a locked row queue behind it as one batch.
    let second_lock = Blocker::hold(&url, "held").await;
    let claims: Vec<_> = (0..CLAIMS)
        .map(|i| {
            let c = app.client.clone();
            tokio::spawn(async move {
                let mut c = c;
                c.claim(claim_request(&format!("new-{i}"), FP)).await
            })
        })
        .collect();
    let c = app.client.clone();
    let held_done = tokio::spawn(async move {
        let mut c = c;
        let request = claimd::pb::CompleteRequest {
            namespace: crate::common::receipt_ops::NS.into(),
            key: "held".into(),
            claim_token: held,
            response: b"r".to_vec(),
        };
        c.complete(request).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first_lock.release().await;
    busy_done
        .await
        .unwrap()
        .expect("the first Complete succeeds");
    let mut second_lock = second_lock;
    second_lock.wait_for_waiter().await;

    // The batch commits while its answer is held, and is given up on.
    proxy.blackhole();
    second_lock.release().await;
    tokio::time::sleep(DB_TIMEOUT + Duration::from_millis(1500)).await;
    proxy.normal();

    for (i, answer) in claims.into_iter().enumerate() {
        let answer = answer
            .await
            .unwrap()
            .expect("the Claim succeeds")
            .into_inner();
        assert_eq!(decision(&answer), Decision::Claimed, "new-{i}: {answer:?}");
        let receipt = get(&app, &format!("new-{i}")).await;
        assert_eq!((receipt.state(), receipt.attempt), (State::Processing, 1));
        complete(&app, &format!("new-{i}"), &answer.claim_token, b"ok")
            .await
            .expect("the token the Claim answered holds the lease");
    }
    let done = held_done
        .await
        .unwrap()
        .expect("the locked Complete succeeds");
    assert_eq!(done.into_inner().receipt.unwrap().state(), State::Completed);
    let again = claim(&app, claim_request("new-0", FP)).await;
    assert_eq!(decision(&again), Decision::Completed);
    // The 21 re-runs went a few at a time: the pool did not open a connection for each
    // (which it did before: 21 more backends at once). The count also holds the backends
    // of connections given up behind the blackhole that PostgreSQL has not noticed yet,
    // and the two lock holders': a loaded machine leaves a few more of those.
    let open = backends(&url).await;
    assert!(open < 21, "{open} backends: the re-runs were not bounded");
}

/// Reproduction 4: a Claim with `wait` takes the receipt over at its holder's lease end,
/// and the answer of that takeover write is lost after it committed (the write waits on a
/// row lock, the link is blackholed, the lock released; claimd gives the statement up).
/// The waiter must be answered CLAIMED on the lease its own write made — it was answered
/// IN_FLIGHT on it at the end of its wait, and the receipt stayed blocked for the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_waiting_claim_whose_takeover_answer_was_lost_is_answered_claimed() {
    let (_cluster, url, proxy, app) = one_lane_behind_a_proxy(Duration::from_secs(2)).await;
    let holder = claim(
        &app,
        claimd::pb::ClaimRequest {
            lease_ttl: crate::common::receipt_ops::secs(2),
            ..claim_request("k", FP)
        },
    )
    .await;
    assert_eq!(decision(&holder), Decision::Claimed);

    let mut lock = Blocker::hold(&url, "k").await;
    let mut client = app.client.clone();
    let waiter = tokio::spawn(async move {
        let request = claimd::pb::ClaimRequest {
            wait: crate::common::receipt_ops::secs(30),
            lease_ttl: crate::common::receipt_ops::secs(60),
            ..claim_request("k", FP)
        };
        client.claim(request).await.map(tonic::Response::into_inner)
    });
    // At the holder's lease end the waiter's takeover waits on the test's lock.
    lock.wait_for_waiter().await;
    proxy.blackhole();
    lock.release().await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    proxy.normal();

    let answer = tokio::time::timeout(Duration::from_secs(40), waiter)
        .await
        .expect("the waiter is answered")
        .unwrap()
        .expect("the waiting Claim succeeds");
    assert_eq!(
        decision(&answer),
        Decision::Claimed,
        "the waiter was answered on its own lease: {answer:?}"
    );
    assert_eq!(answer.receipt.as_ref().map(|r| r.attempt), Some(2));
    complete(&app, "k", &answer.claim_token, b"ok")
        .await
        .expect("the waiter's token holds the lease");
}
