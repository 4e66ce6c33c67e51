//! The HTTP door (issue 15, in progress): ClaimService in the Connect protocol's unary form
//! through real HTTP/1.1 on claimd's gRPC port, on both stores — a Claim, Complete and the
//! replayed duplicate in JSON and in binary proto, bad input answered with Connect's error
//! body and HTTP status (nothing written), and API keys. Requests are written by hand on a
//! TCP socket, so what goes over the wire is exactly what the test says.

use crate::common::app::{Backend, TestApp};
use claimd::pb;
use prost::Message as _;
use serde_json::{Value, json};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 answer.
struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// POSTs `body` as `content_type` to `/claimd.v1.ClaimService/<method>` over HTTP/1.1.
async fn post(
    addr: SocketAddr,
    method: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    // The server under test is listening; anything else is a test failure.
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut head = format!(
        "POST /claimd.v1.ClaimService/{method} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.expect("send head");
    stream.write_all(body).await.expect("send body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head and a body");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let content_type = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: raw[split + 4..].to_vec(),
    }
}

async fn json_call(addr: SocketAddr, method: &str, body: Value) -> Answer {
    post(
        addr,
        method,
        "application/json",
        &[],
        body.to_string().as_bytes(),
    )
    .await
}

async fn a_claim_complete_and_replay_work_in_json_over_http1(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claim = json!({"namespace": "hooks", "key": "Ev1", "fingerprint": "c2hh",
                       "lease_ttl": "30s", "recovery_payload": "Ym9keQ=="});
    let first = json_call(app.addr, "Claim", claim.clone()).await;
    assert_eq!(
        (first.status, first.content_type.as_str()),
        (200, "application/json")
    );
    let first = first.json();
    assert_eq!(first["decision"], "DECISION_CLAIMED", "{first}");
    let token = first["claimToken"].as_str().expect("a token").to_owned();
    let dup = json_call(app.addr, "Claim", claim.clone()).await.json();
    assert_eq!(dup["decision"], "DECISION_IN_FLIGHT");
    let done = json_call(
        app.addr,
        "Complete",
        json!({"namespace": "hooks", "key": "Ev1", "claimToken": token, "response": "b2s="}),
    )
    .await;
    assert_eq!(done.status, 200);
    assert_eq!(done.json()["receipt"]["state"], "STATE_COMPLETED");
    let replay = json_call(app.addr, "Claim", claim).await.json();
    assert_eq!(replay["decision"], "DECISION_COMPLETED");
    assert_eq!(replay["receipt"]["response"], "b2s=");
    // The gRPC client sees the same receipt.
    let receipt = app.get("hooks", "Ev1").await.expect("Get");
    assert_eq!(receipt.response, b"ok");
}

async fn a_claim_works_in_binary_proto_over_http1(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let request = pb::ClaimRequest {
        namespace: "hooks".into(),
        key: "Ev2".into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    let answer = post(
        app.addr,
        "Claim",
        "application/proto",
        &[],
        &request.encode_to_vec(),
    )
    .await;
    assert_eq!(
        (answer.status, answer.content_type.as_str()),
        (200, "application/proto")
    );
    let response = pb::ClaimResponse::decode(answer.body.as_slice()).expect("a ClaimResponse");
    assert_eq!(response.decision(), pb::Decision::Claimed);
    assert!(!response.claim_token.is_empty());
}

async fn bad_input_gets_connects_error_and_its_http_status_and_writes_nothing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let addr = app.addr;
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "malformed JSON",
            "application/json",
            b"{\"namespace\": ".to_vec(),
            400,
            "invalid_argument",
        ),
        (
            "an unknown field",
            "application/json",
            br#"{"namespace":"a","key":"k","nope":1}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            "a wrong type",
            "application/json",
            br#"{"namespace":1}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            "an empty key",
            "application/json",
            br#"{"namespace":"a","key":""}"#.to_vec(),
            400,
            "invalid_argument",
        ),
        (
            "a body over the limit",
            "application/json",
            vec![b' '; 300 * 1024],
            429,
            "resource_exhausted",
        ),
        (
            "bytes that are no message",
            "application/proto",
            vec![0xff; 8],
            400,
            "invalid_argument",
        ),
    ];
    for (what, content_type, body, status, code) in cases {
        let answer = post(addr, "Claim", content_type, &[], &body).await;
        assert_eq!(
            answer.status,
            status,
            "{what}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.content_type, "application/json", "{what}");
        assert_eq!(answer.json()["code"], code, "{what}");
    }
    // The field is named in the message and in the BadRequest details.
    let empty_key = post(
        addr,
        "Claim",
        "application/json",
        &[],
        br#"{"namespace":"a","key":""}"#,
    )
    .await;
    let error = empty_key.json();
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("key"),
        "{error}"
    );
    let detail = &error["details"][0];
    assert_eq!(detail["type"], "google.rpc.BadRequest");
    use base64::Engine as _;
    let value = detail["value"].as_str().expect("a value");
    let value = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(value.trim_end_matches('='))
        .expect("base64");
    let bad = tonic_types::pb::BadRequest::decode(value.as_slice()).expect("a BadRequest");
    assert_eq!(bad.field_violations[0].field, "key");
    // Another content type; a bad timeout.
    let plain = post(addr, "Claim", "text/plain", &[], b"hi").await;
    assert_eq!(plain.status, 415);
    let timeout = [("Connect-Timeout-Ms", "soon")];
    let body = br#"{"namespace":"a","key":"k"}"#;
    let bad_timeout = post(addr, "Claim", "application/json", &timeout, body).await;
    assert_eq!(
        (bad_timeout.status, bad_timeout.json()["code"].clone()),
        (400, json!("invalid_argument"))
    );
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
}

async fn connect_calls_need_the_api_key_like_grpc_calls(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let generated = claimd::auth::generate_key();
    let key = claimd::store::keys::NewApiKey {
        id: generated.id.clone(),
        tenant: "t1".into(),
        secret_hash: generated.secret_hash.clone(),
        label: None,
        namespaces: None,
    };
    app.store()
        .await
        .create_key(&key)
        .await
        .expect("key created");
    let body = br#"{"namespace":"a","key":"k"}"#;
    let anonymous = post(app.addr, "Claim", "application/json", &[], body).await;
    assert_eq!(
        (anonymous.status, anonymous.json()["code"].clone()),
        (401, json!("unauthenticated"))
    );
    let bearer = format!("Bearer {}", generated.key);
    let keyed = [("Authorization", bearer.as_str())];
    let answer = post(app.addr, "Claim", "application/json", &keyed, body).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["decision"], "DECISION_CLAIMED");
    assert!(!String::from_utf8_lossy(&anonymous.body).contains(&generated.key));
}

conformance!(
    a_claim_complete_and_replay_work_in_json_over_http1,
    a_claim_works_in_binary_proto_over_http1,
    bad_input_gets_connects_error_and_its_http_status_and_writes_nothing,
    connect_calls_need_the_api_key_like_grpc_calls,
);
