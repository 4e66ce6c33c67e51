//! Issue 46 §9, §10 through the real HTTP door (HTTP/1.1 on claimd's port), on both stores:
//! a JSON body that gives a field twice — the same key, or `leaseTtl` and `lease_ttl` — is
//! refused 400 `invalid_argument` naming the field (message and BadRequest), nothing
//! written; a `Connect-Timeout-Ms` of 10 digits, which Connect allows, is a deadline like any
//! other (11 are refused); a content type no protocol here speaks (`application/grpcfoo`,
//! `application/grpc-web+json`) is 415 and another method than POST 405 with `Allow: POST`,
//! each with Connect's error body.

use super::{Answer, post, violated_field};
use crate::common::app::{Backend, TestApp};
use serde_json::json;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn a_field_given_twice_is_refused_naming_it_and_nothing_is_written(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let twice: [(&[u8], &str); 3] = [
        (br#"{"namespace":"n","key":"k4","key":"k5"}"#, "key"),
        (
            br#"{"namespace":"n","key":"k","leaseTtl":"5s","lease_ttl":"6s"}"#,
            "lease_ttl",
        ),
        (
            br#"{"namespace":"n","namespace":"n","key":"k"}"#,
            "namespace",
        ),
    ];
    for (body, field) in twice {
        let answer = post(app.addr, "Claim", "application/json", &[], body).await;
        let shown = String::from_utf8_lossy(body);
        assert_eq!(answer.status, 400, "{shown}");
        assert_eq!(answer.json()["code"], "invalid_argument", "{shown}");
        assert_eq!(violated_field(&answer).as_deref(), Some(field), "{shown}");
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.starts_with(&format!("{field}: ")), "{message}");
        assert!(
            !message.contains("k4") && !message.contains("k5"),
            "{message}"
        );
    }
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
    // Each field once: claimed.
    let once = json!({"namespace": "n", "key": "k5", "leaseTtl": "5s"}).to_string();
    let answer = post(app.addr, "Claim", "application/json", &[], once.as_bytes()).await;
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.json()["decision"], "DECISION_CLAIMED");
}

async fn a_connect_timeout_of_ten_digits_is_a_deadline_and_eleven_are_refused(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    for (n, ms) in ["1000000000", "9999999999"].iter().enumerate() {
        let body = json!({"namespace": "n", "key": format!("long-{n}")}).to_string();
        let timeout = [("Connect-Timeout-Ms", *ms)];
        let answer = post(
            app.addr,
            "Claim",
            "application/json",
            &timeout,
            body.as_bytes(),
        )
        .await;
        assert_eq!(
            answer.status,
            200,
            "{ms}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.json()["decision"], "DECISION_CLAIMED", "{ms}");
    }
    let body = br#"{"namespace":"n","key":"too-long"}"#;
    let timeout = [("Connect-Timeout-Ms", "10000000000")];
    let answer = post(app.addr, "Claim", "application/json", &timeout, body).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["code"], "invalid_argument");
    assert_eq!(app.receipt_rows().await, 2);
}

/// `verb` on ClaimService's Claim over HTTP/1.1, with a JSON body: the answer.
async fn request(
    addr: SocketAddr,
    verb: &str,
    body: &[u8],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    // The server under test is listening; anything else is a test failure.
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "{verb} /claimd.v1.ClaimService/Claim HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("send head");
    stream.write_all(body).await.expect("send body");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let answer = crate::common::http1::parse(&raw).expect("an HTTP answer");
    (answer.status, answer.headers, answer.body)
}

async fn other_content_types_are_415_and_other_methods_405_with_connects_error(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let body = br#"{"namespace":"n","key":"k"}"#;
    for content_type in [
        "application/grpcfoo",
        "application/grpc-web+json",
        "text/plain",
    ] {
        let answer: Answer = post(app.addr, "Claim", content_type, &[], body).await;
        assert_eq!(answer.status, 415, "{content_type}");
        assert_eq!(answer.content_type, "application/json", "{content_type}");
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.contains("Content-Type"),
            "{content_type}: {message}"
        );
    }
    for verb in ["GET", "PUT"] {
        let (status, headers, answer) = request(app.addr, verb, body).await;
        assert_eq!(status, 405, "{verb}");
        let header = |name: &str| {
            let found = headers.iter().find(|(n, _)| n == name);
            found
                .map(|(_, v)| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("allow"), "POST", "{verb}");
        assert_eq!(header("content-type"), "application/json", "{verb}");
        let error: serde_json::Value = serde_json::from_slice(&answer).expect("Connect's error");
        assert_eq!(error["code"], "unimplemented", "{verb}: {error}");
    }
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
}

conformance!(
    a_field_given_twice_is_refused_naming_it_and_nothing_is_written,
    a_connect_timeout_of_ten_digits_is_a_deadline_and_eleven_are_refused,
    other_content_types_are_415_and_other_methods_405_with_connects_error,
);
