//! JSON logs through the real binary (`--log-format json`): every line is a JSON object,
//! every ClaimService call leaves one `rpc finished` line whose span carries the method,
//! namespace, decision and latency, redeliveries of an event in flight warn at most once a
//! minute per namespace, and no token or payload is logged — on both stores, and through
//! both Connect encodings.

use crate::common::app::{Backend, connect, secs};
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::pb::{ClaimRequest, GetRequest};
use serde_json::Value;

const PAYLOAD: &str = "CANARY-payload-log-4b7e";

fn claim(key: &str, delivery_attempt: u32) -> ClaimRequest {
    ClaimRequest {
        namespace: "logs-ns".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        recovery_payload: PAYLOAD.as_bytes().to_vec(),
        delivery_attempt,
        wait: None,
    }
}

/// A line's own fields and its span's fields, in one object.
fn merged(line: &Value) -> serde_json::Map<String, Value> {
    let mut all = serde_json::Map::new();
    for part in ["span", "fields"] {
        if let Some(Value::Object(fields)) = line.get(part) {
            all.extend(fields.clone());
        }
    }
    all
}

async fn json_lines_carry_one_rpc_record_per_call(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string(), "--database-url", &url])
        .args(["--log-format", "json"])
        .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY)
        .env("RUST_LOG", "info,claimd::rpc=debug");
    let server = Claimd::start(cmd, addr).await;
    let (client_addr, _translator) = backend.door.in_front_of(addr).await;
    let mut client = connect(client_addr).await;
    let first = client.claim(claim("evt-log-1", 0)).await.expect("claimed");
    let token = first.into_inner().claim_token;
    // Two redeliveries of the event in flight: one warning, the second held back.
    client
        .claim(claim("evt-log-1", 1))
        .await
        .expect("in flight");
    client
        .claim(claim("evt-log-1", 2))
        .await
        .expect("in flight");
    let missing = GetRequest {
        namespace: "logs-ns".into(),
        key: "evt-log-nowhere".into(),
    };
    client.get(missing).await.expect_err("not found");
    let mut server = server;
    server.signal(nix::sys::signal::Signal::SIGTERM);
    let status = server.wait_for_exit(crate::common::process::PATIENCE).await;
    let log = server.log();
    let status = status.unwrap_or_else(|| panic!("claimd kept running after SIGTERM:\n{log}"));
    assert!(status.success(), "claimd exit {status}:\n{log}");

    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let finished: Vec<_> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "rpc finished")
        .map(merged)
        .collect();
    assert_eq!(finished.len(), 4, "one line per call:\n{log}");
    let field = |i: usize, name: &str| finished[i].get(name).cloned().unwrap_or(Value::Null);
    let decisions: Vec<Value> = (0..finished.len()).map(|i| field(i, "decision")).collect();
    let expected: [Value; 4] = [
        "CLAIMED".into(),
        "IN_FLIGHT".into(),
        "IN_FLIGHT".into(),
        Value::Null,
    ];
    assert_eq!(decisions, expected, "{log}");
    for i in 0..finished.len() {
        assert_eq!(field(i, "namespace"), "logs-ns", "{log}");
        let latency = field(i, "latency_ms").as_f64();
        assert!(latency.is_some_and(|ms| ms >= 0.0), "{log}");
    }
    assert_eq!(
        (field(0, "method"), field(0, "code")),
        ("Claim".into(), "OK".into())
    );
    assert_eq!(
        (field(3, "method"), field(3, "code")),
        ("Get".into(), "NOT_FOUND".into())
    );

    let warnings: Vec<_> = lines
        .iter()
        .filter(|l| l["level"] == "WARN")
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("too late")
        })
        .map(merged)
        .collect();
    assert_eq!(warnings.len(), 1, "rate-limited to one a minute:\n{log}");
    assert_eq!(
        warnings[0].get("namespace"),
        Some(&"logs-ns".into()),
        "{log}"
    );
    assert_eq!(
        warnings[0].get("delivery_attempt"),
        Some(&1.into()),
        "{log}"
    );
    for secret in [token.as_str(), PAYLOAD, crate::common::raw::TEST_SEAL_KEY] {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
}

conformance_every_door!(json_lines_carry_one_rpc_record_per_call);
