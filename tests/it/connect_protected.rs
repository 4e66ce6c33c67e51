//! Issue 27 §6: protected mode against DNS rebinding. While no API key exists, a call
//! without one on the Connect door or gRPC-Web is served as tenant `default` only if it is
//! addressed to this machine (`Host` or `:authority` localhost or loopback, with or without
//! a port) and comes from no browser origin but `--cors-allow-origin`'s. Plain gRPC, which
//! a page cannot speak (claimd answers it 400 over HTTP/1.1), is served as before; a call
//! with a valid key is unaffected.

use crate::common::app::{Backend, TestApp};
use crate::common::{http1, http2};
use tonic::Code;

const BOUND: std::time::Duration = std::time::Duration::from_secs(15);
const ALLOWED: &str = "http://localhost:3000";

/// A case: what it is, the `Host` it sends, its other headers.
type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>);

/// A Connect Claim of `key` over HTTP/1.1 with `host` and `headers`.
async fn connect_claim(
    app: &TestApp,
    host: &str,
    key: &str,
    headers: &[(&str, &str)],
) -> http1::Answer {
    let body = format!(r#"{{"namespace":"rebind","key":"{key}"}}"#);
    let head = http1::head("Claim", host, "application/json", body.len(), headers);
    let mut stream = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connects");
    http1::send(&mut stream, &head, body.as_bytes()).await;
    http1::answer(&mut stream, BOUND).await.expect("answered")
}

/// A Claim in gRPC framing of `key`, over HTTP/1.1 as `content_type` with `host`: the
/// HTTP status and the gRPC status, from the headers of a trailers-only answer or the
/// gRPC-Web trailers (`None`: an answer whose status is in HTTP/1.1 trailers, not read).
async fn framed_claim(
    app: &TestApp,
    host: &str,
    content_type: &str,
    key: &str,
) -> (u16, Option<String>) {
    use prost::Message as _;
    let message = claimd::pb::ClaimRequest {
        namespace: "rebind".into(),
        key: key.into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend((message.len() as u32).to_be_bytes());
    framed.extend(message);
    let head = http1::head("Claim", host, content_type, framed.len(), &[]);
    let mut stream = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connects");
    http1::send(&mut stream, &head, &framed).await;
    let answer = http1::answer(&mut stream, BOUND).await.expect("answered");
    let in_headers = answer.headers.iter().find(|(n, _)| n == "grpc-status");
    let status = match in_headers {
        Some((_, v)) => Some(v.clone()),
        None => {
            let text = String::from_utf8_lossy(&answer.body).to_ascii_lowercase();
            let at = text.find("grpc-status:");
            at.map(|at| {
                text[at + 12..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect()
            })
        }
    };
    (answer.status, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_mode_serves_only_calls_addressed_to_this_machine_from_allowed_origins() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| c.cors_allow_origins = vec![http::HeaderValue::from_static(ALLOWED)])
        .spawn()
        .await;
    let port = app.addr.port();
    let rebound = format!("evil.example:{port}");
    let page = format!("http://evil.example:{port}");
    // Refused: a rebound name, with or without its page's Origin; a foreign Origin.
    let refused: [Case; 4] = [
        (
            "rebound with origin",
            rebound.clone(),
            vec![("Origin", page.as_str())],
        ),
        ("rebound", rebound.clone(), vec![]),
        ("rebound without port", "evil.example".into(), vec![]),
        (
            "foreign origin",
            format!("localhost:{port}"),
            vec![("Origin", "http://evil.example")],
        ),
    ];
    for (what, host, headers) in &refused {
        let answer = connect_claim(&app, host, what, headers).await;
        assert_eq!(
            answer.status,
            403,
            "{what}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.code(), "permission_denied", "{what}");
    }
    // gRPC-Web with the rebound name; gRPC over HTTP/1.1, which a page could send, is not
    // served at all.
    let denied = Some((Code::PermissionDenied as i32).to_string());
    let (_, web) = framed_claim(&app, &rebound, "application/grpc-web+proto", "web").await;
    assert_eq!(web, denied, "gRPC-Web");
    let (status, _) = framed_claim(&app, &rebound, "application/grpc", "grpc1").await;
    assert_eq!(status, 400, "gRPC over HTTP/1.1");
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
    // gRPC over HTTP/2 (no browser speaks it in plaintext) is served as before, whatever
    // its :authority.
    use prost::Message as _;
    let message = claimd::pb::ClaimRequest {
        namespace: "rebind".into(),
        key: "grpc-h2".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend((message.len() as u32).to_be_bytes());
    framed.extend(message);
    let tcp = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connects");
    let (mut send, _conn) = http2::handshake(tcp).await;
    let request = http2::post(&rebound, "Claim", "application/grpc", &[("te", "trailers")]);
    let (response, _done) = http2::open(&mut send, request, framed, true).await;
    let (_, _, code) = http2::answer(response, BOUND).await.expect("answered");
    assert_eq!(code, Some(Code::Ok));

    // Served: loopback names and addresses, with or without a port; the allowed origin.
    let served: [Case; 5] = [
        ("localhost", format!("localhost:{port}"), vec![]),
        ("localhost without port", "localhost".into(), vec![]),
        ("ipv4", app.addr.to_string(), vec![]),
        ("ipv6", format!("[::1]:{port}"), vec![]),
        (
            "allowed origin",
            format!("localhost:{port}"),
            vec![("Origin", ALLOWED)],
        ),
    ];
    for (what, host, headers) in &served {
        let answer = connect_claim(&app, host, what, headers).await;
        assert_eq!(
            answer.status,
            200,
            "{what}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.json()["decision"], "DECISION_CLAIMED", "{what}");
    }
    let local = format!("localhost:{port}");
    let (_, web) = framed_claim(&app, &local, "application/grpc-web+proto", "web2").await;
    assert_eq!(web.as_deref(), Some("0"), "gRPC-Web");
    assert_eq!(app.receipt_rows().await, served.len() as i64 + 2);

    // Once a key exists, the key decides, whatever the Host.
    let (_, key) = app.create_key("t1", None).await;
    let bearer = format!("Bearer {key}");
    let keyed = connect_claim(
        &app,
        &rebound,
        "keyed",
        &[("Authorization", bearer.as_str())],
    )
    .await;
    assert_eq!(
        keyed.status,
        200,
        "{}",
        String::from_utf8_lossy(&keyed.body)
    );
}
