//! The HTTP door's answer to a tenant over its quota: 429 with `Retry-After` (whole
//! seconds, rounded up) and Connect's error body, `resource_exhausted` with the RetryInfo
//! and QuotaFailure details (their `debug` JSON naming the quota), over real HTTP/1.1.

use super::{SLOW, claims, quota_for, spawn};
use crate::common::app::Backend;
use crate::common::http1::{Answer, answer, head, send};
use std::net::SocketAddr;
use std::time::Duration;

/// A Connect JSON Claim of `key` with `api_key`, on a connection of its own.
async fn claim(addr: SocketAddr, key: &str, api_key: &str) -> Answer {
    let body = format!(r#"{{"namespace":"slack-events","key":"{key}","fingerprint":"ZnA="}}"#);
    let bearer = format!("Bearer {api_key}");
    let head = head(
        "Claim",
        "localhost",
        "application/json",
        body.len(),
        &[("Authorization", &bearer)],
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    send(&mut stream, &head, body.as_bytes()).await;
    answer(&mut stream, Duration::from_secs(30))
        .await
        .expect("an answer")
}

async fn over_its_quota_a_tenant_gets_429_with_retry_after_through_the_http_door(backend: Backend) {
    let (app, keys) = spawn(backend, quota_for("acme", claims(SLOW, 1)), &["acme"]).await;
    let first = claim(app.addr, "Ev1", &keys[0]).await;
    assert_eq!(
        first.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&first.body)
    );
    let refused = claim(app.addr, "Ev2", &keys[0]).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.code(), "resource_exhausted");
    let retry_after = refused
        .headers
        .iter()
        .find(|(name, _)| name == "retry-after")
        .map(|(_, value)| value.parse::<u64>().expect("whole seconds"));
    // A token per thousand seconds: due in at most 1000 s, and never in 0.
    assert!(
        retry_after.is_some_and(|s| (1..=1000).contains(&s)),
        "{retry_after:?}"
    );
    let error = refused.json();
    let details = error["details"].as_array().expect("details");
    let kinds: Vec<&str> = details.iter().filter_map(|d| d["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["google.rpc.RetryInfo", "google.rpc.QuotaFailure"],
        "{error}"
    );
    let violation = &details[1]["debug"]["violations"][0];
    assert_eq!(violation["subject"], "claims_per_second", "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| !m.contains("acme")),
        "{error}"
    );
    app.shutdown().await;
}

async fn over_its_max_receipts_a_tenant_gets_429_through_the_http_door_and_nothing_is_written(
    backend: Backend,
) {
    let quota = claimd::domain::Quota {
        storage: claimd::domain::Storage {
            max_receipts: Some(1),
            max_stored_bytes: None,
        },
        ..claimd::domain::Quota::default()
    };
    let (app, keys) = spawn(backend, quota_for("acme", quota), &["acme"]).await;
    assert_eq!(claim(app.addr, "Ev1", &keys[0]).await.status, 200);
    let refused = claim(app.addr, "Ev2", &keys[0]).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.code(), "resource_exhausted");
    let retry_after = (refused.headers.iter())
        .find(|(name, _)| name == "retry-after")
        .map(|(_, value)| value.as_str());
    assert_eq!(retry_after, Some("60"), "{refused:?}");
    let error = refused.json();
    let violation = &error["details"][1]["debug"]["violations"][0];
    assert_eq!(violation["subject"], "max_receipts", "{error}");
    assert_eq!(app.receipt_rows().await, 1);
    app.shutdown().await;
}

conformance!(
    over_its_quota_a_tenant_gets_429_with_retry_after_through_the_http_door,
    over_its_max_receipts_a_tenant_gets_429_through_the_http_door_and_nothing_is_written,
);
