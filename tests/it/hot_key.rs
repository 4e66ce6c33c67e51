//! Jobs of one row in one batch (docs/DESIGN.md §4.2), through the real server on both
//! stores: with the one lane held behind a lock the test holds, a burst of calls on a few
//! keys queues and goes as one batch — Claims of a fresh key, of a completed key (one with
//! another body), of an in-flight key, and its holder's Complete sent twice. Each is
//! answered as if it had been alone: exactly one Claim of the fresh key is CLAIMED, the
//! others IN_FLIGHT on its attempt; the completed key's duplicates COMPLETED with the
//! stored response and the other body CONFLICT; both Completes succeed and leave one
//! completed receipt.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{FP, NS, claim_request, claimed, complete, hold_the_lane};
use claimd::pb::{ClaimResponse, Decision, State};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// Claims of each key in the burst.
const EACH: usize = 8;

async fn duplicates_of_one_key_in_one_batch_are_each_answered_as_if_alone(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.store.batch.lanes = Some(1))
        .spawn()
        .await;
    let (done, _) = claimed(&app, "done", b"").await;
    complete(&app, "done", &done, b"the response")
        .await
        .unwrap();
    let (held, _) = claimed(&app, "held", b"").await;
    let app = Arc::new(app);
    let (blocker, first) = hold_the_lane(&app).await;

    let claims = |key: &str, fp: &[u8]| -> Vec<JoinHandle<ClaimResponse>> {
        (0..EACH)
            .map(|_| {
                let (mut client, request) = (app.client.clone(), claim_request(key, fp));
                tokio::spawn(async move { client.claim(request).await.unwrap().into_inner() })
            })
            .collect()
    };
    let fresh = claims("fresh", FP);
    let duplicates = claims("done", FP);
    let conflicts = claims("done", b"another event");
    let in_flight = claims("held", FP);
    let completes: Vec<_> = (0..2)
        .map(|_| {
            let (app, held) = (app.clone(), held.clone());
            tokio::spawn(async move { complete(&app, "held", &held, b"held done").await })
        })
        .collect();
    // Every call queued behind the held lane before it goes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    blocker.release().await;
    first.await.unwrap().expect("the Heartbeat that waited");

    let fresh = answers(fresh).await;
    let won: Vec<_> = fresh
        .iter()
        .filter(|a| decision(a) == Decision::Claimed)
        .collect();
    assert_eq!(won.len(), 1, "one CLAIMED of the fresh key: {fresh:?}");
    let token = &won[0].claim_token;
    for answer in &fresh {
        let receipt = answer.receipt.as_ref().expect("a receipt");
        assert_eq!(receipt.attempt, 1, "{answer:?}");
        if decision(answer) != Decision::Claimed {
            assert_eq!(decision(answer), Decision::InFlight, "{answer:?}");
            assert!(
                answer.claim_token.is_empty(),
                "only the winner gets a token"
            );
        }
    }
    for answer in answers(duplicates).await {
        assert_eq!(decision(&answer), Decision::Completed, "{answer:?}");
        assert_eq!(answer.receipt.unwrap().response, b"the response");
    }
    for answer in answers(conflicts).await {
        assert_eq!(decision(&answer), Decision::Conflict, "{answer:?}");
    }
    for answer in answers(in_flight).await {
        // Decided before or after the holder's Complete of the same batch committed.
        let d = decision(&answer);
        assert!(
            matches!(d, Decision::InFlight | Decision::Completed),
            "{answer:?}"
        );
    }
    for done in completes {
        let receipt = done
            .await
            .unwrap()
            .expect("both Completes of the holder succeed");
        assert_eq!(
            (receipt.state(), receipt.response.as_slice()),
            (State::Completed, &b"held done"[..])
        );
    }
    let held = app.get(NS, "held").await.expect("the held receipt");
    assert_eq!((held.state(), held.attempt), (State::Completed, 1));
    complete(&app, "fresh", token, b"fresh done")
        .await
        .expect("the one CLAIMED holds the fresh key's lease");
}

/// Every answer of `calls`, in order.
async fn answers(calls: Vec<JoinHandle<ClaimResponse>>) -> Vec<ClaimResponse> {
    let mut all = Vec::new();
    for call in calls {
        all.push(call.await.expect("the Claim's task"));
    }
    all
}

conformance!(duplicates_of_one_key_in_one_batch_are_each_answered_as_if_alone);
