//! The HTTP door (issue 15, in progress): ClaimService in the Connect protocol's unary form
//! through real HTTP/1.1 on claimd's gRPC port, on both stores — a Claim, Complete and the
//! replayed duplicate in JSON and in binary proto, bad input answered with Connect's error
//! body and HTTP status (nothing written), and API keys; fields given twice, long timeouts,
//! other content types and methods (`connect/refusals.rs`). Requests are written by hand
//! on a TCP socket, so what goes over the wire is exactly what the test says.

mod refusals;

use crate::common::app::{Backend, TestApp};
use crate::common::blocker::Blocker;
use claimd::pb;
use prost::Message as _;
use serde_json::{Value, json};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 answer.
struct Answer {
    status: u16,
    content_type: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A valid Claim body (what matters is that it would be written if it were accepted).
fn body_of_a_claim() -> &'static [u8] {
    br#"{"namespace":"a","key":"compressed"}"#
}

/// The field the `google.rpc.BadRequest` detail of a Connect error names, if it has one.
fn violated_field(answer: &Answer) -> Option<String> {
    use base64::Engine as _;
    let error = answer.json();
    let detail = error["details"].as_array()?.first()?.clone();
    assert_eq!(detail["type"], "google.rpc.BadRequest", "{error}");
    let value = detail["value"].as_str().expect("a value");
    let value = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(value.trim_end_matches('='))
        .expect("base64");
    let bad = tonic_types::pb::BadRequest::decode(value.as_slice()).expect("a BadRequest");
    // The same violations as JSON, for callers without protobuf (Connect's `debug`).
    let debug = &detail["debug"]["fieldViolations"];
    let fields: Vec<(&str, &str)> = debug
        .as_array()
        .expect("debug.fieldViolations in the detail")
        .iter()
        .map(|v| {
            let text = |k: &str| v[k].as_str().expect("field and description are strings");
            (text("field"), text("description"))
        })
        .collect();
    let decoded: Vec<(&str, &str)> = bad
        .field_violations
        .iter()
        .map(|v| (v.field.as_str(), v.description.as_str()))
        .collect();
    assert_eq!(fields, decoded, "debug and value disagree: {error}");
    Some(bad.field_violations[0].field.clone())
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
    let verb = if method == "OPTIONS" {
        "OPTIONS"
    } else {
        "POST"
    };
    let path = if method == "OPTIONS" { "Claim" } else { method };
    let mut head = format!(
        "{verb} /claimd.v1.ClaimService/{path} HTTP/1.1\r\nHost: {addr}\r\n\
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
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let content_type = headers
        .iter()
        .find(|(n, _)| n == "content-type")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v == "chunked")
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        content_type,
        headers,
        body,
    }
}

/// The body of a chunked HTTP/1.1 answer.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = std::str::from_utf8(&raw[..end]).ok();
        let size = size
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 2 + size + 2..];
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
    claim_complete_and_replay_in_json(&app).await;
}

/// The JSON test's calls on `app` (a claimd without API keys; also run on Citus,
/// `citus::surfaces`).
pub(crate) async fn claim_complete_and_replay_in_json(app: &TestApp) {
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
    assert_eq!(violated_field(&empty_key).as_deref(), Some("key"));
    // JSON that does not decode names the field decoding stopped at, by its proto name, and
    // never echoes the value it could not use.
    let named: [(&[u8], Option<&str>); 6] = [
        (br#"{"namespace":"a","key":"k","nope":1}"#, Some("nope")),
        (br#"{"namespace":1}"#, Some("namespace")),
        (
            br#"{"key":"k","leaseTtl":"SECRET-7f3a"}"#,
            Some("lease_ttl"),
        ),
        (
            br#"{"key":"k","lease_ttl":{"seconds":5}}"#,
            Some("lease_ttl"),
        ),
        (br#"{"namespace": "#, Some("namespace")),
        (b"nonsense", None),
    ];
    for (body, field) in named {
        let answer = post(addr, "Claim", "application/json", &[], body).await;
        let shown = String::from_utf8_lossy(body);
        assert_eq!(answer.status, 400, "{shown}");
        assert_eq!(violated_field(&answer).as_deref(), field, "{shown}");
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(field) = field {
            assert!(message.starts_with(&format!("{field}: ")), "{message}");
        }
        assert!(
            !message.contains("SECRET"),
            "the value came back: {message}"
        );
    }
    // A compressed body: claimd decompresses nothing, so the compression is unimplemented.
    let gzip = [("Content-Encoding", "gzip")];
    let compressed = post(addr, "Claim", "application/json", &gzip, body_of_a_claim()).await;
    assert_eq!(compressed.status, 501);
    assert_eq!(compressed.json()["code"], "unimplemented");
    let message = compressed.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("gzip"), "{message}");
    let identity = [("Content-Encoding", "identity")];
    let plain = post(
        addr,
        "Claim",
        "application/json",
        &identity,
        br#"{"key":""}"#,
    )
    .await;
    assert_eq!(violated_field(&plain).as_deref(), Some("namespace"));
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

async fn decoding_errors_never_echo_what_the_caller_sent(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    // Values in every quoting serde and prost-reflect use ("…", '…', `…`), and names that
    // are no field names.
    let cases: [(&str, &[u8], Option<&str>); 10] = [
        ("List", br#"{"states":["tok-SECRET-123"]}"#, Some("states")),
        (
            "List",
            br#"{"namespace":"a","states":"tok-SECRET-1"}"#,
            Some("states"),
        ),
        ("List", br#"{"pageSize":"tok-SECRET-2"}"#, Some("page_size")),
        ("List", br#"{"pageSize":987654321098}"#, Some("page_size")),
        (
            "Claim",
            br#"{"leaseTtl":"tok-SECRET-3"}"#,
            Some("lease_ttl"),
        ),
        ("Claim", br#"{"leaseTtl":987654321098}"#, Some("lease_ttl")),
        (
            "Claim",
            br#"{"fingerprint":"tok-SECRET-4!"}"#,
            Some("fingerprint"),
        ),
        (
            "Claim",
            br#"{"deliveryAttempt":"tok-SECRET-5"}"#,
            Some("delivery_attempt"),
        ),
        ("Claim", br#"{"namespace":"a","tok-SECRET-6":1}"#, None),
        ("Claim", br#"{"namespace":"a"} tok-SECRET-7"#, None),
    ];
    for (method, body, field) in cases {
        let answer = post(app.addr, method, "application/json", &[], body).await;
        let shown = String::from_utf8_lossy(body);
        assert_eq!(answer.status, 400, "{shown}");
        assert_eq!(answer.json()["code"], "invalid_argument", "{shown}");
        assert_eq!(violated_field(&answer).as_deref(), field, "{shown}");
        // Nowhere in the answer: message or details.
        let all = String::from_utf8_lossy(&answer.body).into_owned();
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for value in ["SECRET", "987654321098"] {
            assert!(
                !all.contains(value) && !message.contains(value),
                "{shown}: {all}"
            );
        }
        if let Some(field) = field {
            assert!(message.starts_with(&format!("{field}: ")), "{message}");
        }
    }
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
}

async fn connect_calls_need_the_api_key_like_grpc_calls(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (_, key) = app.create_key("t1", None).await;
    let body = br#"{"namespace":"a","key":"k"}"#;
    let anonymous = post(app.addr, "Claim", "application/json", &[], body).await;
    assert_eq!(
        (anonymous.status, anonymous.json()["code"].clone()),
        (401, json!("unauthenticated"))
    );
    let bearer = format!("Bearer {key}");
    let keyed = [("Authorization", bearer.as_str())];
    let answer = post(app.addr, "Claim", "application/json", &keyed, body).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["decision"], "DECISION_CLAIMED");
    assert!(!String::from_utf8_lossy(&anonymous.body).contains(&key));
}

async fn a_grpc_web_call_is_answered_in_grpc_web_framing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let request = pb::ClaimRequest {
        namespace: "hooks".into(),
        key: "Ev3".into(),
        ..Default::default()
    };
    let message = request.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let web = [("X-Grpc-Web", "1")];
    let answer = post(
        app.addr,
        "Claim",
        "application/grpc-web+proto",
        &web,
        &framed,
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(
        answer.content_type.starts_with("application/grpc-web"),
        "{}",
        answer.content_type
    );
    // A data frame with the ClaimResponse, then the trailers frame (flag 0x80).
    let body = &answer.body;
    assert_eq!(body[0], 0, "a data frame first");
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let response = pb::ClaimResponse::decode(&body[5..5 + len]).expect("a ClaimResponse");
    assert_eq!(response.decision(), pb::Decision::Claimed);
    let trailers = &body[5 + len..];
    assert_eq!(trailers[0], 0x80, "then the trailers frame");
    let text = String::from_utf8_lossy(&trailers[5..]).to_ascii_lowercase();
    assert!(text.contains("grpc-status:0"), "{text}");
}

async fn cors_is_off_by_default_and_answers_only_the_allowed_origins(backend: Backend) {
    let preflight = |origin: &'static str| {
        [
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type,x-grpc-web"),
        ]
    };
    let allowed = |a: &Answer| {
        a.headers
            .iter()
            .find(|(n, _)| n == "access-control-allow-origin")
            .map(|(_, v)| v.clone())
    };
    let off = TestApp::builder().backend(backend).spawn().await;
    let answer = post(
        off.addr,
        "OPTIONS",
        "text/plain",
        &preflight("https://admin.example"),
        b"",
    )
    .await;
    assert_eq!(allowed(&answer), None, "no CORS unless configured");
    let on = TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.cors_allow_origins = vec![http::HeaderValue::from_static("https://admin.example")]
        })
        .spawn()
        .await;
    let answer = post(
        on.addr,
        "OPTIONS",
        "text/plain",
        &preflight("https://admin.example"),
        b"",
    )
    .await;
    assert_eq!(allowed(&answer).as_deref(), Some("https://admin.example"));
    let other = post(
        on.addr,
        "OPTIONS",
        "text/plain",
        &preflight("https://evil.example"),
        b"",
    )
    .await;
    assert_eq!(allowed(&other), None, "another origin is not allowed");
}

async fn connect_timeout_ms_is_the_calls_deadline_and_the_late_work_changes_nothing(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let claimed = app.claim("hooks", "slow", b"fp").await;
    let before = app.get("hooks", "slow").await.expect("Get");
    let mut blocker = Blocker::hold(&app.database_url, "slow").await;
    let body = json!({"namespace": "hooks", "key": "slow",
                      "claimToken": claimed.claim_token, "response": "bGF0ZQ=="});
    let addr = app.addr;
    let call = tokio::spawn(async move {
        let timeout = [("Connect-Timeout-Ms", "300")];
        post(
            addr,
            "Complete",
            "application/json",
            &timeout,
            body.to_string().as_bytes(),
        )
        .await
    });
    blocker.wait_for_waiter().await;
    let answer = call.await.expect("the call task");
    assert_eq!(
        answer.status,
        504,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.json()["code"], "deadline_exceeded");
    blocker.release().await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(app.get("hooks", "slow").await.expect("Get"), before);
}

conformance!(
    a_claim_complete_and_replay_work_in_json_over_http1,
    a_claim_works_in_binary_proto_over_http1,
    bad_input_gets_connects_error_and_its_http_status_and_writes_nothing,
    decoding_errors_never_echo_what_the_caller_sent,
    connect_calls_need_the_api_key_like_grpc_calls,
    a_grpc_web_call_is_answered_in_grpc_web_framing,
    cors_is_off_by_default_and_answers_only_the_allowed_origins,
    connect_timeout_ms_is_the_calls_deadline_and_the_late_work_changes_nothing,
);
