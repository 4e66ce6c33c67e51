//! docs/DESIGN.md §2 "Error model": every malformed Claim is INVALID_ARGUMENT naming its field (in the
//! message and in google.rpc.BadRequest), writes nothing, and leaves the server serving.
//! Token-bearing RPCs and ListOrphaned are in `validation_tokens.rs`.

use crate::common::app::{Backend, TestApp, assert_names_field, decision, secs};
use claimd::pb::{ClaimRequest, Decision};
use tonic::Code;

const KIB_64: usize = 64 * 1024;

fn request(namespace: &str, key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: namespace.into(),
        key: key.into(),
        fingerprint: b"sha256-of-the-body".to_vec(),
        ..Default::default()
    }
}

/// Sends each `(field, request)`; each must be rejected naming `field` and write nothing.
async fn assert_rejected(app: &TestApp, cases: Vec<(&str, ClaimRequest)>) {
    for (field, req) in cases {
        let (namespace, key) = (req.namespace.clone(), req.key.clone());
        let status = app.client.clone().claim(req).await.unwrap_err();
        assert_names_field(&status, field);
        assert_eq!(
            app.receipt_rows().await,
            0,
            "{field}: a receipt was written"
        );
        // Get applies the same namespace/key rules, so it refuses the same ids.
        let get = app.get(&namespace, &key).await.unwrap_err().code();
        let bad_id = field == "namespace" || field == "key";
        let expected = if bad_id {
            Code::InvalidArgument
        } else {
            Code::NotFound
        };
        assert_eq!(get, expected, "{field}: Get after the rejected Claim");
    }
}

/// Claims a fresh key normally: the server is still healthy.
async fn assert_still_serves(app: &TestApp) {
    let response = app.claim("after-the-errors", "Ev-ok", b"fp").await;
    assert_eq!(decision(&response), Decision::Claimed);
}

async fn claim_rejects_an_empty_long_or_oddly_spelled_namespace_and_writes_nothing(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let mut cases = vec![
        ("namespace", request("", "Ev1")),
        ("namespace", request(&"n".repeat(129), "Ev1")),
    ];
    for bad in [
        "slack events",
        "a*b",
        "ümlaut",
        "tab\tbed",
        "a#b",
        "a\\b",
        "nul\0",
        "a,b",
    ] {
        cases.push(("namespace", request(bad, "Ev1")));
    }
    assert_rejected(&app, cases).await;
    assert_still_serves(&app).await;
    app.shutdown().await;
}

async fn claim_rejects_an_empty_key_a_key_over_512_bytes_and_a_key_with_nul(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let cases = vec![
        ("key", request("ns", "")),
        ("key", request("ns", &"k".repeat(513))),
        // 257 characters but 513 bytes: the limit is in bytes.
        ("key", request("ns", &format!("{}k", "é".repeat(256)))),
        ("key", request("ns", "evt\0id")),
        ("key", request("ns", "\0")),
    ];
    assert_rejected(&app, cases).await;
    assert_still_serves(&app).await;
    app.shutdown().await;
}

async fn claim_rejects_a_fingerprint_over_64_bytes_and_a_recovery_payload_over_64_kib(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let cases = vec![
        (
            "fingerprint",
            ClaimRequest {
                fingerprint: vec![7; 65],
                ..request("ns", "Ev1")
            },
        ),
        (
            "recovery_payload",
            ClaimRequest {
                recovery_payload: vec![1; KIB_64 + 1],
                ..request("ns", "Ev1")
            },
        ),
    ];
    assert_rejected(&app, cases).await;
    assert_still_serves(&app).await;
    app.shutdown().await;
}

async fn claim_rejects_a_lease_ttl_outside_one_second_to_one_day(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let mut cases = Vec::new();
    for ttl in [
        secs(0, 0),
        secs(0, 999_000_000),
        secs(0, 999_999_999),
        secs(-1, 0),
        secs(-86_400, 0),
        secs(86_400, 1),
        secs(86_401, 0),
        secs(i64::MAX, 0),
        secs(i64::MIN, 0),
        secs(1, -1),            // mixed signs: not a valid Duration
        secs(0, 1_000_000_000), // nanos out of range: not a valid Duration
    ] {
        cases.push((
            "lease_ttl",
            ClaimRequest {
                lease_ttl: ttl,
                ..request("ns", "Ev1")
            },
        ));
    }
    assert_rejected(&app, cases).await;
    assert_still_serves(&app).await;
    app.shutdown().await;
}

async fn claim_accepts_every_value_exactly_at_its_limit(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let namespace = format!("{}.-_:/9Z", "a".repeat(121));
    assert_eq!(namespace.len(), 128);
    let key = format!("{}kk", "é".repeat(255));
    assert_eq!(key.len(), 512);
    let cases = vec![
        ClaimRequest {
            lease_ttl: secs(1, 0),
            ..request(&namespace, "Ev1")
        },
        ClaimRequest {
            lease_ttl: secs(86_400, 0),
            ..request("ns", &key)
        },
        ClaimRequest {
            fingerprint: vec![9; 64],
            ..request("ns", &"k".repeat(512))
        },
        ClaimRequest {
            recovery_payload: vec![3; KIB_64],
            ..request("ns", "Ev-payload")
        },
        ClaimRequest {
            fingerprint: Vec::new(),
            ..request("ns", "Ev-no-fingerprint")
        },
    ];
    for req in cases {
        let expected = req.clone();
        let response = app.client.clone().claim(req).await.unwrap().into_inner();
        assert_eq!(decision(&response), Decision::Claimed);
        let stored = app.get(&expected.namespace, &expected.key).await.unwrap();
        assert_eq!(stored.fingerprint, expected.fingerprint);
        assert_eq!(stored.recovery_payload, expected.recovery_payload);
    }
    assert_eq!(app.receipt_rows().await, 5);
    app.shutdown().await;
}

async fn a_message_over_the_grpc_size_limit_is_resource_exhausted_and_writes_nothing(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let huge = ClaimRequest {
        recovery_payload: vec![0; 5 * 1024 * 1024],
        ..request("ns", "Ev1")
    };
    let status = app.client.clone().claim(huge).await.unwrap_err();
    assert!(
        !matches!(status.code(), Code::Internal | Code::Unknown),
        "an oversized message must not look like a server fault: {status:?}"
    );
    assert_eq!(
        app.get("ns", "Ev1").await.unwrap_err().code(),
        Code::NotFound
    );
    assert_eq!(app.receipt_rows().await, 0);
    assert_still_serves(&app).await;
    app.shutdown().await;
    // docs/DESIGN.md §2 gives RESOURCE_EXHAUSTED for "message too large" (grpc-go and grpc-java do
    // the same); tonic's decoder on its own answers OUT_OF_RANGE.
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
}

conformance_every_door!(
    claim_rejects_an_empty_long_or_oddly_spelled_namespace_and_writes_nothing,
    claim_rejects_an_empty_key_a_key_over_512_bytes_and_a_key_with_nul,
    claim_rejects_a_fingerprint_over_64_bytes_and_a_recovery_payload_over_64_kib,
    claim_rejects_a_lease_ttl_outside_one_second_to_one_day,
    claim_accepts_every_value_exactly_at_its_limit,
    a_message_over_the_grpc_size_limit_is_resource_exhausted_and_writes_nothing,
);
