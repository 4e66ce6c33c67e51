//! docs/DESIGN.md §2.8, what one connection may ask for: the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS holds a client to its streams, calls beyond
//! `--max-calls-per-connection` wait for one to finish, a request that declares a message
//! larger than the largest valid one is RESOURCE_EXHAUSTED before its body arrives, and
//! requests and answers of the largest valid sizes still work.

use super::{BOUND, wire};
use crate::common::app::{Backend, TestApp, decision, secs};
use claimd::pb::{
    ClaimRequest, CompleteRequest, Decision, GetRequest, HeartbeatRequest, RetryRequest,
};
use prost::Message;
use std::time::Duration;
use tonic::Code;

/// How long a queued call is watched to see that it does not finish.
const QUEUED: Duration = Duration::from_millis(500);
/// How long the server is given to start serving calls it has the headers of.
const SETTLE: Duration = Duration::from_secs(1);

fn get(key: &str) -> Vec<u8> {
    wire::message(&GetRequest {
        namespace: "ns".into(),
        key: key.into(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_announces_max_concurrent_streams_and_holds_a_client_to_it() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| c.connections.max_concurrent_streams = 2)
        .spawn()
        .await;
    let (mut send, conn) = wire::h2_connect(app.addr).await;
    // One whole call, so the server's SETTINGS have been read.
    let (answer, mut body) = wire::open_call(&mut send, app.addr, "Get", Vec::new());
    body.send_data(get("a").into(), true).unwrap();
    assert_eq!(wire::status(answer).await, Code::NotFound);
    assert_eq!(send.current_max_send_streams(), 2);
    // Two calls held open take both streams; a third waits for one of them.
    // (h2 sends a request once the one before it has a stream: `ready`.)
    let whole = get("a");
    let mut send = send.ready().await.expect("ready");
    let (first, mut first_body) = wire::open_call(&mut send, app.addr, "Get", whole[..3].to_vec());
    let mut send = send.ready().await.expect("ready");
    let (_second, _second_body) = wire::open_call(&mut send, app.addr, "Get", whole[..3].to_vec());
    let mut send = send.ready().await.expect("ready");
    // h2 keeps it pending until the server's limit lets it open.
    let (third, mut third_body) = wire::open_call(&mut send, app.addr, "Get", Vec::new());
    third_body.send_data(get("a").into(), true).unwrap();
    let mut third = Box::pin(wire::status(third));
    assert!(tokio::time::timeout(QUEUED, &mut third).await.is_err());
    first_body
        .send_data(whole[3..].to_vec().into(), true)
        .unwrap();
    assert_eq!(wire::status(first).await, Code::NotFound);
    let third = tokio::time::timeout(BOUND, third).await;
    assert_eq!(third.expect("the third call ran"), Code::NotFound);
    // The calls left open would hold up the server's shutdown for its grace period.
    conn.abort();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_per_connection_limit_wait_for_one_to_finish() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| c.connections.max_calls_per_connection = 2)
        .spawn()
        .await;
    let (mut send, conn) = wire::h2_connect(app.addr).await;
    let whole = get("a");
    let (first, mut first_body) = wire::open_call(&mut send, app.addr, "Get", whole[..3].to_vec());
    let (_second, _second_body) = wire::open_call(&mut send, app.addr, "Get", whole[..3].to_vec());
    // The two are served (and hold the limit) once the server has read their headers; calls
    // take the limit in the order they reach it, not in stream order.
    tokio::time::sleep(SETTLE).await;
    let (third, mut third_body) = wire::open_call(&mut send, app.addr, "Get", Vec::new());
    third_body.send_data(get("a").into(), true).unwrap();
    let mut third = Box::pin(wire::status(third));
    let early = tokio::time::timeout(QUEUED, &mut third).await;
    assert!(
        early.is_err(),
        "a third call ran while two held the connection's limit: {early:?}"
    );
    // Another connection is not held up.
    assert_eq!(app.get("ns", "a").await.unwrap_err().code(), Code::NotFound);
    first_body
        .send_data(whole[3..].to_vec().into(), true)
        .unwrap();
    assert_eq!(wire::status(first).await, Code::NotFound);
    let third = tokio::time::timeout(BOUND, third).await;
    assert_eq!(third.expect("the third call ran"), Code::NotFound);
    // The calls left open would hold up the server's shutdown for its grace period.
    conn.abort();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_declaring_4_mib_is_resource_exhausted_before_its_body_arrives() {
    let app = TestApp::builder().backend(Backend::Sqlite).spawn().await;
    let (mut send, conn) = wire::h2_connect(app.addr).await;
    let mut body = vec![0];
    body.extend((4u32 * 1024 * 1024).to_be_bytes());
    body.extend([0; 1024]);
    // The rest of the 4 MiB never comes.
    let (answer, _body) = wire::open_call(&mut send, app.addr, "Claim", body);
    let code = tokio::time::timeout(BOUND, wire::status(answer)).await;
    assert_eq!(code.expect("answered at once"), Code::ResourceExhausted);
    assert_eq!(app.receipt_rows().await, 0);
    // The calls left open would hold up the server's shutdown for its grace period.
    conn.abort();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_byte_over_the_request_limit_is_refused_and_the_largest_valid_calls_work() {
    let app = TestApp::builder().backend(Backend::Sqlite).spawn().await;
    let limit = claimd::api::MAX_REQUEST_BYTES;
    let mut over = ClaimRequest {
        namespace: "ns".into(),
        key: "over".into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    let mut n = limit - 100;
    while over.encoded_len() != limit + 1 {
        assert!(
            n < limit,
            "no payload size makes the request one byte too large"
        );
        over.recovery_payload = vec![0; n];
        n += 1;
    }
    let status = app.client.clone().claim(over).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");

    // The largest valid Claim, Heartbeat, Retry and Complete, and the receipts they make.
    let blob = |b: u8| vec![b; claimd::api::DEFAULT_MAX_BLOB];
    let (namespace, key) = ("n".repeat(128), "k".repeat(512));
    let claim = ClaimRequest {
        namespace: namespace.clone(),
        key: key.clone(),
        fingerprint: vec![7; 64],
        lease_ttl: secs(30, 0),
        recovery_payload: blob(1),
        delivery_attempt: u32::MAX,
        wait: None,
    };
    let claimed = app.client.clone().claim(claim.clone()).await.unwrap();
    let token = claimed.into_inner().claim_token;
    let heartbeat = HeartbeatRequest {
        namespace: namespace.clone(),
        key: key.clone(),
        claim_token: token.clone(),
        lease_ttl: secs(30, 0),
        checkpoint: Some(blob(2)),
    };
    app.client.clone().heartbeat(heartbeat).await.unwrap();
    let retry = RetryRequest {
        namespace: namespace.clone(),
        key: key.clone(),
        claim_token: token,
        error: "e".repeat(claimd::api::DEFAULT_MAX_BLOB),
        retry_after: secs(1, 0),
        count_attempt: Some(false),
    };
    app.client.clone().retry(retry).await.unwrap();
    // Three 64 KiB fields in one receipt: Get and List answer it whole.
    let full = app.get(&namespace, &key).await.unwrap();
    assert_eq!(full.recovery_payload, blob(1));
    assert_eq!(full.checkpoint, blob(2));
    assert_eq!(full.last_error.len(), claimd::api::DEFAULT_MAX_BLOB);
    let list = crate::common::dead_letters::list_request(&namespace, &[], 10);
    let listed = crate::common::dead_letters::list(&app, list).await;
    assert_eq!(listed.receipts, [full]);
    app.advance(Duration::from_secs(2));
    let again = app.client.clone().claim(claim).await.unwrap().into_inner();
    assert_eq!(decision(&again), Decision::Claimed);
    let complete = CompleteRequest {
        namespace: namespace.clone(),
        key: key.clone(),
        claim_token: again.claim_token,
        response: blob(3),
    };
    app.client.clone().complete(complete).await.unwrap();
    assert_eq!(app.get(&namespace, &key).await.unwrap().response, blob(3));
    app.shutdown().await;
}
