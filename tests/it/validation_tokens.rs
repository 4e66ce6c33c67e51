//! docs/DESIGN.md §2 "Error model" for the RPCs that carry a claim token, and for ListOrphaned: each
//! malformed request is INVALID_ARGUMENT naming its field (in the message and in
//! google.rpc.BadRequest) and leaves the receipt exactly as it was.

use crate::common::app::{Backend, TestApp, assert_names_field, decision, secs};
use claimd::pb::{
    CompleteRequest, Decision, HeartbeatRequest, ListOrphanedRequest, QuarantineRequest,
    RetryRequest, State,
};
use tonic::Status;

const KIB_64: usize = 64 * 1024;
const NS: &str = "slack-events";

/// One call of a token-bearing RPC.
enum Call {
    Complete(CompleteRequest),
    Heartbeat(HeartbeatRequest),
    Retry(RetryRequest),
    Quarantine(QuarantineRequest),
}

impl Call {
    async fn send(self, app: &TestApp) -> Result<(), Status> {
        let mut client = app.client.clone();
        match self {
            Call::Complete(r) => client.complete(r).await.map(drop),
            Call::Heartbeat(r) => client.heartbeat(r).await.map(drop),
            Call::Retry(r) => client.retry(r).await.map(drop),
            Call::Quarantine(r) => client.quarantine(r).await.map(drop),
        }
    }
}

/// Valid requests of every token-bearing RPC for `key` with `token`.
fn complete(key: &str, token: &str) -> CompleteRequest {
    CompleteRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        response: b"ok".to_vec(),
    }
}
fn heartbeat(key: &str, token: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        ..Default::default()
    }
}
fn retry(key: &str, token: &str) -> RetryRequest {
    RetryRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: "503".into(),
        ..Default::default()
    }
}
fn quarantine(key: &str, token: &str) -> QuarantineRequest {
    QuarantineRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: "poison".into(),
    }
}

/// Claims `key` and returns its token.
async fn claimed(app: &TestApp, key: &str) -> String {
    let response = app.claim(NS, key, b"fp").await;
    assert_eq!(decision(&response), Decision::Claimed);
    response.claim_token
}

/// Sends each `(field, call)` against the receipt of `key`: each must be rejected naming
/// `field`, and the whole receipt must be unchanged afterwards.
async fn assert_rejected_unchanged(app: &TestApp, key: &str, cases: Vec<(&str, Call)>) {
    let before = app.get(NS, key).await.unwrap();
    for (field, call) in cases {
        let status = call.send(app).await.unwrap_err();
        assert_names_field(&status, field);
        assert_eq!(
            app.get(NS, key).await.unwrap(),
            before,
            "{field}: the receipt changed"
        );
    }
}

async fn an_empty_or_malformed_claim_token_is_rejected_by_every_rpc_and_changes_nothing(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claimed(&app, "Ev1").await;
    let mut cases = Vec::new();
    for bad in ["", "not-a-token", "00000000-0000-0000-0000", "' OR 1=1 --"] {
        cases.push(("claim_token", Call::Complete(complete("Ev1", bad))));
        cases.push(("claim_token", Call::Heartbeat(heartbeat("Ev1", bad))));
        cases.push(("claim_token", Call::Retry(retry("Ev1", bad))));
        cases.push(("claim_token", Call::Quarantine(quarantine("Ev1", bad))));
    }
    assert_rejected_unchanged(&app, "Ev1", cases).await;
    app.shutdown().await;
}

async fn a_response_checkpoint_or_error_over_64_kib_is_rejected_even_with_the_current_token(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let token = claimed(&app, "Ev1").await;
    let over = vec![b'x'; KIB_64 + 1];
    let over_text = "x".repeat(KIB_64 + 1);
    let cases = vec![
        (
            "response",
            Call::Complete(CompleteRequest {
                response: over.clone(),
                ..complete("Ev1", &token)
            }),
        ),
        (
            "checkpoint",
            Call::Heartbeat(HeartbeatRequest {
                checkpoint: Some(over),
                ..heartbeat("Ev1", &token)
            }),
        ),
        (
            "error",
            Call::Retry(RetryRequest {
                error: over_text.clone(),
                ..retry("Ev1", &token)
            }),
        ),
        (
            "error",
            Call::Quarantine(QuarantineRequest {
                error: over_text,
                ..quarantine("Ev1", &token)
            }),
        ),
    ];
    assert_rejected_unchanged(&app, "Ev1", cases).await;
    app.shutdown().await;
}

async fn a_heartbeat_lease_ttl_or_retry_after_outside_one_second_to_one_day_changes_nothing(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let token = claimed(&app, "Ev1").await;
    let mut cases = Vec::new();
    let out_of_range = [
        secs(0, 0),
        secs(0, 999_000_000),
        secs(-1, 0),
        secs(86_400, 1),
        secs(86_401, 0),
        secs(i64::MAX, 0),
    ];
    for d in out_of_range {
        cases.push((
            "lease_ttl",
            Call::Heartbeat(HeartbeatRequest {
                lease_ttl: d,
                ..heartbeat("Ev1", &token)
            }),
        ));
        cases.push((
            "retry_after",
            Call::Retry(RetryRequest {
                retry_after: d,
                ..retry("Ev1", &token)
            }),
        ));
    }
    assert_rejected_unchanged(&app, "Ev1", cases).await;
    app.shutdown().await;
}

async fn token_bearing_rpcs_accept_every_value_exactly_at_its_limit(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let full = vec![b'x'; KIB_64];
    let token = claimed(&app, "Ev1").await;
    for (ttl, checkpoint) in [
        (secs(1, 0), full.clone()),
        (secs(86_400, 0), b"staged".to_vec()),
    ] {
        let req = HeartbeatRequest {
            lease_ttl: ttl,
            checkpoint: Some(checkpoint),
            ..heartbeat("Ev1", &token)
        };
        Call::Heartbeat(req).send(&app).await.unwrap();
    }
    let done = CompleteRequest {
        response: full.clone(),
        ..complete("Ev1", &token)
    };
    Call::Complete(done).send(&app).await.unwrap();
    assert_eq!(app.get(NS, "Ev1").await.unwrap().response, full);

    for (key, after) in [("Ev2", secs(1, 0)), ("Ev3", secs(86_400, 0))] {
        let token = claimed(&app, key).await;
        let error = "x".repeat(KIB_64);
        Call::Retry(RetryRequest {
            retry_after: after,
            error,
            ..retry(key, &token)
        })
        .send(&app)
        .await
        .unwrap();
        assert_eq!(app.get(NS, key).await.unwrap().state(), State::RetryWait);
    }
    let token = claimed(&app, "Ev4").await;
    let req = QuarantineRequest {
        error: "x".repeat(KIB_64),
        ..quarantine("Ev4", &token)
    };
    Call::Quarantine(req).send(&app).await.unwrap();
    assert_eq!(app.get(NS, "Ev4").await.unwrap().last_error.len(), KIB_64);
    app.shutdown().await;
}

async fn list_orphaned_rejects_a_bad_page_token_page_size_namespace_or_overdue_by(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claimed(&app, "Ev1").await;
    let list = |f: fn(&mut ListOrphanedRequest)| {
        let mut req = ListOrphanedRequest::default();
        f(&mut req);
        req
    };
    let cases = [
        ("page_token", list(|r| r.page_token = "not-a-token".into())),
        ("page_token", list(|r| r.page_token = "!!!".into())),
        ("page_token", list(|r| r.page_token = "aGVsbG8".into())), // base64 of "hello"
        ("page_size", list(|r| r.page_size = -1)),
        ("page_size", list(|r| r.page_size = i32::MIN)),
        ("namespace", list(|r| r.namespace = "has space".into())),
        ("namespace", list(|r| r.namespace = "n".repeat(129))),
        ("overdue_by", list(|r| r.overdue_by = secs(86_400, 1))),
        ("overdue_by", list(|r| r.overdue_by = secs(-1, 0))),
    ];
    let before = app.get(NS, "Ev1").await.unwrap();
    for (field, req) in cases {
        let status = app.client.clone().list_orphaned(req).await.unwrap_err();
        assert_names_field(&status, field);
    }
    assert_eq!(app.get(NS, "Ev1").await.unwrap(), before);
    // The edges are accepted: 24 h overdue, 1000 per page, the longest namespace.
    let edge = ListOrphanedRequest {
        namespace: "n".repeat(128),
        page_size: 1000,
        overdue_by: secs(86_400, 0),
        ..Default::default()
    };
    app.client.clone().list_orphaned(edge).await.unwrap();
    app.shutdown().await;
}

conformance_every_door!(
    an_empty_or_malformed_claim_token_is_rejected_by_every_rpc_and_changes_nothing,
    a_response_checkpoint_or_error_over_64_kib_is_rejected_even_with_the_current_token,
    a_heartbeat_lease_ttl_or_retry_after_outside_one_second_to_one_day_changes_nothing,
    token_bearing_rpcs_accept_every_value_exactly_at_its_limit,
    list_orphaned_rejects_a_bad_page_token_page_size_namespace_or_overdue_by,
);
