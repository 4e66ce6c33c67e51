//! Client deadlines through the real server: a call stuck behind a database lock answers
//! DEADLINE_EXCEEDED when the caller's deadline passes, and the unfinished work changes
//! nothing, on both stores.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::blocker::Blocker;
use claimd::pb::{CompleteRequest, Decision, State};
use std::time::Duration;
use tonic::{Code, Request};

async fn a_call_past_its_deadline_is_deadline_exceeded_and_changes_nothing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claimed = app.claim("deadline", "slow", b"fp").await;
    assert_eq!(decision(&claimed), Decision::Claimed);
    let before = app.get("deadline", "slow").await.unwrap();

    let mut blocker = Blocker::hold(&app.database_url, "slow").await;
    let complete = CompleteRequest {
        namespace: "deadline".into(),
        key: "slow".into(),
        claim_token: claimed.claim_token.clone(),
        response: b"late".to_vec(),
    };
    let mut request = Request::new(complete.clone());
    request.set_timeout(Duration::from_millis(300));
    let mut client = app.new_client().await;
    let call = tokio::spawn(async move { client.complete(request).await });
    blocker.wait_for_waiter().await;
    let status = call
        .await
        .unwrap()
        .expect_err("the call cannot finish in time");
    // tonic's channel also enforces `grpc-timeout` on the client, from the moment the call
    // was sent; claimd counts from its arrival. On a loaded machine the trip can outlast
    // claimd's margin and the client's own timer answers first (CANCELLED, "Timeout
    // expired", from the transport). Either way the caller stopped waiting, which is what
    // the rest of this test is about.
    let clients_own_timer =
        status.code() == Code::Cancelled && status.message() == "Timeout expired";
    assert!(
        status.code() == Code::DeadlineExceeded || clients_own_timer,
        "{status:?}"
    );

    blocker.release().await;
    // Give the abandoned work every chance to (wrongly) finish once the lock is gone.
    let after = app.get("deadline", "slow").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let later = app.get("deadline", "slow").await.unwrap();
    assert_eq!(after, before, "the timed-out Complete changed the receipt");
    assert_eq!(
        later, before,
        "the timed-out Complete changed the receipt later"
    );

    // The same call with time to spare succeeds.
    let mut request = Request::new(complete);
    request.set_timeout(Duration::from_secs(10));
    let done = app
        .new_client()
        .await
        .complete(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(done.receipt.unwrap().state(), State::Completed);
}

conformance!(a_call_past_its_deadline_is_deadline_exceeded_and_changes_nothing);

/// A `grpc-timeout` of more digits than the spec's 8 (here 19, whose seconds overflow any
/// clock) is no deadline, as tonic treats it: the call is answered, and a valid 8-digit
/// value of hours (11,000 years) is armed without overflowing either. Sent without an API
/// key on a server that has keys: the header is read before authentication, so a caller
/// without a key could once panic the request task.
#[tokio::test]
async fn a_grpc_timeout_of_too_many_digits_is_no_deadline_and_panics_nothing() {
    use crate::limits::wire::{h2_connect, message, request, status};
    let app = TestApp::builder().spawn().await;
    let (_, key) = app.create_key("default", None).await;
    let (mut send, _connection) = h2_connect(app.addr).await;
    let claim = claimd::pb::ClaimRequest {
        namespace: "deadline".into(),
        key: "huge".into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    for (timeout, bearer, code) in [
        ("9300000000000000000S", None, Code::Unauthenticated),
        ("9300000000000000000S", Some(&key), Code::Ok),
        ("99999999H", Some(&key), Code::Ok),
        ("18446744073709551616n", Some(&key), Code::Ok),
    ] {
        let mut call = request(app.addr, "Claim");
        call.headers_mut()
            .insert("grpc-timeout", timeout.parse().unwrap());
        if let Some(key) = bearer {
            let value = format!("Bearer {key}").parse().unwrap();
            call.headers_mut().insert("authorization", value);
        }
        let (response, mut stream) = send.send_request(call, false).unwrap();
        stream.send_data(message(&claim).into(), true).unwrap();
        assert_eq!(status(response).await, code, "grpc-timeout: {timeout}");
    }
    assert_eq!(app.receipt_rows().await, 1, "claimed once, then in flight");
}
