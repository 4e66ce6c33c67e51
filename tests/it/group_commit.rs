//! Group commit (docs/DESIGN.md §4.2) through the real server, on both stores:
//! - a batch mixing new, duplicate, conflicting, invalid, expired, cancelled and holder
//!   calls answers each one as if it had been alone, and the expired and cancelled ones
//!   write nothing;
//! - a `kill -9` in the middle of loaded batches loses no acknowledged answer;
//! - a holder call decided from what this claimd last wrote is still fenced when another
//!   replica changed the row since (PostgreSQL, two servers on one database).
//!
//! To put calls into one batch, the server runs with one lane and that lane is kept busy by
//! a call waiting behind a lock the test holds: every call sent meanwhile queues, and all of
//! them go as the next batch once the lock is released.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{
    FP, NS, claim, claim_request, claimed, complete, exists, heartbeat, hold_the_lane, secs,
};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, CompleteRequest, Decision, GetRequest, State};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request};

async fn a_batch_mixing_every_kind_of_call_answers_each_as_if_it_were_alone(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.store.batch.lanes = Some(1))
        .spawn()
        .await;
    let (done, _) = claimed(&app, "done", b"payload").await;
    complete(&app, "done", &done, b"the response")
        .await
        .unwrap();
    let (held, _) = claimed(&app, "held", b"payload").await;
    let (other, _) = claimed(&app, "other", b"payload").await;
    let app = Arc::new(app);
    let (blocker, first) = hold_the_lane(&app).await;

    let call = |request: ClaimRequest| {
        let mut client = app.client.clone();
        tokio::spawn(async move { client.claim(request).await })
    };
    let new = call(claim_request("new", FP));
    let duplicate = call(claim_request("done", FP));
    let conflict = call(claim_request("done", b"another event"));
    let invalid = call(claim_request("", FP));
    let in_flight = call(claim_request("other", FP));
    let completes = {
        let app = app.clone();
        tokio::spawn(async move { complete(&app, "held", &held, b"held done").await })
    };
    let missing = {
        let app = app.clone();
        let wrong = uuid_like(&other);
        tokio::spawn(async move { heartbeat(&app, "nobody", &wrong, Some(60), None).await })
    };
    let mut expiring = Request::new(claim_request("expired", FP));
    expiring.set_timeout(Duration::from_millis(150));
    let expired = {
        let mut client = app.new_client().await;
        tokio::spawn(async move { client.claim(expiring).await })
    };
    let cancelled = call(claim_request("cancelled", FP));
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancelled.abort();
    // Long enough for the expiring call's deadline to pass while it is queued.
    tokio::time::sleep(Duration::from_millis(300)).await;
    blocker.release().await;

    let beat = first.await.unwrap().expect("the Heartbeat that waited");
    assert_eq!(beat.state(), State::Processing);
    let new = new.await.unwrap().expect("Claim").into_inner();
    assert_eq!(decision(&new), Decision::Claimed, "{new:?}");
    assert_eq!(new.receipt.unwrap().attempt, 1);
    let duplicate = duplicate.await.unwrap().expect("Claim").into_inner();
    assert_eq!(decision(&duplicate), Decision::Completed, "{duplicate:?}");
    assert_eq!(duplicate.receipt.unwrap().response, b"the response");
    let conflict = conflict.await.unwrap().expect("Claim").into_inner();
    assert_eq!(decision(&conflict), Decision::Conflict, "{conflict:?}");
    let invalid = invalid.await.unwrap().expect_err("an empty key");
    assert_eq!(invalid.code(), Code::InvalidArgument, "{invalid:?}");
    let in_flight = in_flight.await.unwrap().expect("Claim").into_inner();
    assert_eq!(decision(&in_flight), Decision::InFlight, "{in_flight:?}");
    let completed = completes.await.unwrap().expect("Complete");
    assert_eq!(completed.state(), State::Completed);
    assert_eq!(completed.response, b"held done");
    let missing = missing
        .await
        .unwrap()
        .expect_err("a Heartbeat of a row nobody claimed");
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
    let expired = expired
        .await
        .unwrap()
        .expect_err("the deadline passed while queued");
    assert!(
        matches!(expired.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{expired:?}"
    );

    // Neither the expired nor the cancelled Claim wrote anything, then or later.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!exists(&app, "expired").await, "the expired Claim wrote");
    assert!(
        !exists(&app, "cancelled").await,
        "the cancelled Claim wrote"
    );
    let again = claim(&app, claim_request("expired", FP)).await;
    assert_eq!(decision(&again), Decision::Claimed, "{again:?}");
}

/// A token-shaped string that is not `token`.
fn uuid_like(token: &str) -> String {
    let mut s = token.to_owned();
    let last = if s.ends_with('0') { "1" } else { "0" };
    s.replace_range(s.len() - 1.., last);
    s
}

/// One caller of the loaded server: new keys, each claimed then completed, until claimd
/// stops answering; every acknowledged answer is recorded as (key, completed).
async fn caller(
    mut client: ClaimServiceClient<Channel>,
    caller: usize,
    acked: Arc<Mutex<Vec<(String, bool)>>>,
) {
    for i in 0.. {
        let key = format!("c{caller}-{i}");
        let Ok(reply) = client.claim(claim_request(&key, FP)).await else {
            return;
        };
        let reply = reply.into_inner();
        assert_eq!(decision(&reply), Decision::Claimed, "{key}: {reply:?}");
        acked.lock().unwrap().push((key.clone(), false));
        let request = CompleteRequest {
            namespace: NS.into(),
            key: key.clone(),
            claim_token: reply.claim_token,
            response: key.clone().into_bytes(),
        };
        if client.complete(request).await.is_err() {
            return;
        }
        acked.lock().unwrap().push((key, true));
    }
}

async fn kill_9_in_the_middle_of_loaded_batches_loses_no_acknowledged_answer(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let (server, client) = crate::durability::start(&url).await;
    let acked = Arc::new(Mutex::new(Vec::new()));
    let callers: Vec<_> = (0..32)
        .map(|c| tokio::spawn(caller(client.clone(), c, acked.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.kill_9();
    for c in callers {
        c.await.expect("a caller checks every answer it got");
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(
        acked.len() > 64,
        "the server was not loaded when it was killed: {} answers",
        acked.len()
    );

    let (server, mut client) = crate::durability::start(&url).await;
    for (key, completed) in &acked {
        let request = GetRequest {
            namespace: NS.into(),
            key: key.clone(),
        };
        let got = client.get(request).await;
        let got = got.unwrap_or_else(|s| panic!("{key} lost after kill -9: {s:?}"));
        let receipt = got.into_inner().receipt.expect("a receipt");
        assert_eq!(receipt.attempt, 1, "{key}");
        if *completed {
            assert_eq!(receipt.state(), State::Completed, "{key}");
            assert_eq!(receipt.response, key.as_bytes(), "{key}");
        } else {
            // Its Complete may have committed with its answer lost: either is acknowledged.
            assert!(
                matches!(receipt.state(), State::Processing | State::Completed),
                "{key}: {receipt:?}"
            );
        }
    }
    drop(client);
    assert!(server.terminate().await.success());
}

conformance!(
    a_batch_mixing_every_kind_of_call_answers_each_as_if_it_were_alone,
    kill_9_in_the_middle_of_loaded_batches_loses_no_acknowledged_answer,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_call_is_fenced_when_another_replica_changed_the_row_since() {
    let a = TestApp::builder().backend(Backend::Postgres).spawn().await;
    let (clock, seal) = (a.clock.clone(), a.seal.clone());
    let b = TestApp::builder()
        .database_url(a.database_url.clone())
        .configure(|c| {
            c.store.clock = clock;
            c.store.seal = seal;
        })
        .spawn()
        .await;
    // A claims "k": A remembers the row as it wrote it.
    let (token_a, _) = claimed(&a, "k", b"payload").await;
    heartbeat(&a, "k", &token_a, Some(30), Some(b"step 1"))
        .await
        .expect("A's own Heartbeat");
    // The lease runs out and B takes the work over.
    a.advance(Duration::from_secs(31));
    let taken = claim(&b, claim_request("k", FP)).await;
    assert_eq!(decision(&taken), Decision::Claimed, "{taken:?}");

    // A still remembers its own token as current; the row says otherwise.
    let lost = heartbeat(&a, "k", &token_a, Some(30), None)
        .await
        .expect_err("A's lease was taken over");
    assert_eq!(lost.code(), Code::Aborted, "{lost:?}");
    let lost = complete(&a, "k", &token_a, b"A's answer")
        .await
        .expect_err("A's lease was taken over");
    assert_eq!(lost.code(), Code::Aborted, "{lost:?}");

    // B finishes; A answers duplicates with B's response.
    let done = complete(&b, "k", &taken.claim_token, b"B's answer")
        .await
        .expect("B completes");
    assert_eq!(done.attempt, 2);
    let replay = claim(&a, claim_request("k", FP)).await;
    assert_eq!(decision(&replay), Decision::Completed, "{replay:?}");
    assert_eq!(replay.receipt.unwrap().response, b"B's answer");
    let late = ClaimRequest {
        lease_ttl: secs(60),
        ..claim_request("k", FP)
    };
    assert_eq!(decision(&claim(&b, late).await), Decision::Completed);
}
