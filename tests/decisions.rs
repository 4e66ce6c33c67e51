//! One test per Claim decision of DESIGN §2, through the real gRPC server.

mod common;

use claimd::pb::{CompleteRequest, Decision, State};
use common::app::{decision, spawn_app};

#[tokio::test]
async fn first_claim_is_claimed_and_completed_claims_replay_the_response() {
    let app = spawn_app().await;
    let first = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&first), Decision::Claimed);
    assert!(!first.claim_token.is_empty());
    let receipt = first.receipt.clone().unwrap();
    assert_eq!((receipt.attempt, receipt.state()), (1, State::Processing));

    let again = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&again), Decision::InFlight);
    assert!(again.claim_token.is_empty());

    let done = app
        .client
        .clone()
        .complete(CompleteRequest {
            namespace: "slack-events".into(),
            key: "Ev1".into(),
            claim_token: first.claim_token.clone(),
            response: b"200 ok".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.receipt.unwrap().state(), State::Completed);

    let replay = app.claim("slack-events", "Ev1", b"fp").await;
    assert_eq!(decision(&replay), Decision::Completed);
    assert_eq!(replay.receipt.unwrap().response, b"200 ok");
    app.shutdown().await;
}
