//! The HTTP door over every transport a Connect client may pick, with real `curl`: JSON
//! calls over TLS in HTTP/1.1 and in HTTP/2 (ALPN offers both), over cleartext HTTP/2
//! (prior knowledge), with the API key over TLS; and a body over the request limit answered
//! `resource_exhausted` whether or not the client waits for `100 Continue`, nothing written.

use crate::common::app::{Backend, TestApp};
use crate::common::certs::Pki;
use claimd::config::Config;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;

/// What `curl` got: the HTTP status, the protocol version it spoke and the body.
#[derive(Debug)]
struct Got {
    status: u16,
    version: String,
    body: String,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Runs real `curl` with `args` and a JSON `Content-Type`, POSTing to `url`.
async fn curl(url: String, args: Vec<String>) -> Got {
    let mut command = Command::new("curl");
    command
        .args(["-sS", "-X", "POST", "-H", "Content-Type: application/json"])
        .args(["-w", "\n%{http_code} %{http_version}"])
        .args(&args)
        .arg(&url);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("curl ran")
        .expect("curl is installed (Debian package curl)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "curl {url}: {stderr}\n{stdout}");
    let (body, last) = stdout.rsplit_once('\n').expect("the -w line");
    let (status, version) = last.split_once(' ').expect("status and version");
    Got {
        status: status.parse().expect("an HTTP status"),
        version: version.to_owned(),
        body: body.to_owned(),
    }
}

fn claim_body(key: &str) -> String {
    format!(r#"{{"namespace":"door","key":"{key}","fingerprint":"ZnA=","lease_ttl":"30s"}}"#)
}

fn claim_url(scheme: &str, addr: SocketAddr) -> String {
    let host = if scheme == "https" {
        format!("localhost:{}", addr.port())
    } else {
        addr.to_string()
    };
    format!("{scheme}://{host}/claimd.v1.ClaimService/Claim")
}

async fn connect_calls_work_over_tls_in_http1_and_http2_with_the_api_key(backend: Backend) {
    let pki = Pki::new();
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c: &mut Config| pki.serve_tls(c, false))
        .spawn()
        .await;
    let (_, key) = app.create_key("acme", None).await;
    let ca = pki.ca.display().to_string();
    let bearer = format!("Authorization: Bearer {key}");
    for (version, flag) in [("1.1", "--http1.1"), ("2", "--http2")] {
        let key = format!("tls-{version}");
        let args = |with_key: bool| {
            let mut args = vec!["--cacert".into(), ca.clone(), flag.into()];
            if with_key {
                args.extend(["-H".into(), bearer.clone()]);
            }
            args.extend(["-d".into(), claim_body(&key)]);
            args
        };
        let refused = curl(claim_url("https", app.addr), args(false)).await;
        assert_eq!(refused.status, 401, "{version}: {refused:?}");
        assert_eq!(refused.json()["code"], "unauthenticated");
        let got = curl(claim_url("https", app.addr), args(true)).await;
        assert_eq!(
            (got.status, got.version.as_str()),
            (200, version),
            "{got:?}"
        );
        assert_eq!(got.json()["decision"], "DECISION_CLAIMED", "{got:?}");
    }
    assert_eq!(app.receipt_rows().await, 2);
}

async fn connect_calls_work_over_cleartext_http2(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let args = vec![
        "--http2-prior-knowledge".into(),
        "-d".into(),
        claim_body("h2c"),
    ];
    let got = curl(claim_url("http", app.addr), args).await;
    assert_eq!((got.status, got.version.as_str()), (200, "2"), "{got:?}");
    assert_eq!(got.json()["decision"], "DECISION_CLAIMED", "{got:?}");
}

async fn a_body_over_the_limit_is_resource_exhausted_with_or_without_100_continue(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let dir = tempfile::tempdir().expect("a directory");
    let big = dir.path().join("big.json");
    // A JSON string of a megabyte: four times the request limit.
    let body = format!(r#"{{"namespace":"door","key":"{}"}}"#, "k".repeat(1 << 20));
    std::fs::write(&big, body).expect("the body written");
    for expect in ["Expect: 100-continue", "Expect:"] {
        for flag in ["--http1.1", "--http2-prior-knowledge"] {
            let args = vec![
                flag.into(),
                "-H".into(),
                expect.into(),
                "--data-binary".into(),
                format!("@{}", big.display()),
            ];
            let got = curl(claim_url("http", app.addr), args).await;
            assert_eq!(got.status, 429, "{expect} {flag}: {got:?}");
            assert_eq!(got.json()["code"], "resource_exhausted", "{expect} {flag}");
        }
    }
    assert_eq!(app.receipt_rows().await, 0, "nothing was written");
}

conformance!(
    connect_calls_work_over_tls_in_http1_and_http2_with_the_api_key,
    connect_calls_work_over_cleartext_http2,
    a_body_over_the_limit_is_resource_exhausted_with_or_without_100_continue,
);
