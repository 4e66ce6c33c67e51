//! A node of the Citus cluster killed (SIGKILL of its postmaster and every backend) and
//! started again while a Claim waits (`wait`, docs/DESIGN.md §2.9) on a receipt another
//! caller holds: first the worker that holds the tenant's shard, then the coordinator
//! (where claimd connects and LISTENs). The waiter is answered something it can act on —
//! UNAVAILABLE (retry) or, once the holder completes, COMPLETED — never INTERNAL, and
//! claimd goes on serving the tenant afterwards.

use super::cluster::CitusCluster;
use super::{claimd_on, contract::with_key};
use claimd::pb::{ClaimRequest, CompleteRequest, Decision};
use std::time::{Duration, Instant};
use tokio::task::block_in_place;
use tonic::Code;

/// Which node is restarted.
#[derive(Debug, Clone, Copy)]
enum Node {
    /// The worker that holds the tenant's shard.
    TenantsWorker,
    Coordinator,
}

fn claim_of(key: &str, wait: Option<u64>) -> ClaimRequest {
    ClaimRequest {
        namespace: "restarts".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        wait: wait.map(|seconds| prost_types::Duration {
            seconds: seconds as i64,
            nanos: 0,
        }),
        ..Default::default()
    }
}

/// Sends `call` again while it is answered UNAVAILABLE, for up to 20 s; any other error
/// fails the test.
async fn until_served<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match call().await {
            Ok(answer) => return answer.into_inner(),
            Err(s) if s.code() == Code::Unavailable && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(s) => panic!("{what}: {s:?}"),
        }
    }
}

/// One round: a held receipt, a Claim waiting on it, `node` killed and started again
/// (down 1 s), the holder completing once it is served again.
async fn round(node: Node) {
    let mut citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let (tenant, worker) = citus.tenants_on_both(&url, 1).await.remove(0);
    let (_, key) = app.create_key(&tenant, None).await;
    let client = app.client.clone();

    let held = client
        .clone()
        .claim(with_key(claim_of("held", None), &key))
        .await
        .expect("the holder's Claim")
        .into_inner();
    assert_eq!(held.decision(), Decision::Claimed);
    let waiter = {
        let (mut client, key) = (client.clone(), key.clone());
        tokio::spawn(async move {
            let began = Instant::now();
            let answer = client
                .claim(with_key(claim_of("held", Some(15)), &key))
                .await;
            (answer, began.elapsed())
        })
    };
    // The waiter is waiting (it is answered only when the receipt settles or its wait ends).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "the waiter was answered at once");
    let restarted = Instant::now();
    block_in_place(|| {
        let server = match node {
            Node::TenantsWorker => &mut citus.workers[worker],
            Node::Coordinator => &mut citus.coordinator,
        };
        server.kill_9();
        std::thread::sleep(Duration::from_secs(1));
        server.restart();
    });
    let back = restarted.elapsed();
    // The holder completes as soon as claimd serves it again.
    let done = CompleteRequest {
        namespace: "restarts".into(),
        key: "held".into(),
        claim_token: held.claim_token.clone(),
        response: b"done".to_vec(),
    };
    until_served("the holder's Complete", || {
        let (mut c, req) = (client.clone(), with_key(done.clone(), &key));
        async move { c.complete(req).await }
    })
    .await;
    let completed = restarted.elapsed();
    let (answer, waited) = waiter.await.expect("the waiter ran");
    println!(
        "citus {node:?} restart under a waiting Claim: back after {:.1} s, the holder \
         completed after {:.1} s, the waiter answered after {:.1} s: {:?}",
        back.as_secs_f64(),
        completed.as_secs_f64(),
        waited.as_secs_f64(),
        answer.as_ref().map(|a| a.get_ref().decision()),
    );
    match answer {
        Ok(answer) => {
            let answer = answer.into_inner();
            assert_eq!(
                answer.decision(),
                Decision::Completed,
                "{node:?}: the waiter's answer after the holder completed: {answer:?}"
            );
            let response = answer.receipt.as_ref().map(|r| r.response.clone());
            assert_eq!(response.as_deref(), Some(&b"done"[..]), "{node:?}");
        }
        Err(status) => assert_eq!(
            status.code(),
            Code::Unavailable,
            "{node:?}: the waiter is answered UNAVAILABLE or its decision: {status:?}"
        ),
    }
    // The waiter, retrying as UNAVAILABLE asks, finds the completed receipt; new keys are
    // claimed again.
    let replay = until_served("the waiter's retry", || {
        let (mut c, req) = (client.clone(), with_key(claim_of("held", None), &key));
        async move { c.claim(req).await }
    })
    .await;
    assert_eq!(
        replay.decision(),
        Decision::Completed,
        "{node:?}: {replay:?}"
    );
    let fresh = until_served("a new key", || {
        let (mut c, req) = (client.clone(), with_key(claim_of("after", None), &key));
        async move { c.claim(req).await }
    })
    .await;
    assert_eq!(fresh.decision(), Decision::Claimed, "{node:?}: {fresh:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_waiting_while_its_tenants_worker_restarts_is_answered_unavailable_or_its_decision_and_claimd_serves_on()
 {
    round(Node::TenantsWorker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_waiting_while_the_coordinator_restarts_is_answered_unavailable_or_its_decision_and_claimd_serves_on()
 {
    round(Node::Coordinator).await;
}
