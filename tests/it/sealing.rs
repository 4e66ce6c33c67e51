//! Sealed payloads (docs/DESIGN.md §3.6) through the real server, on both stores: nothing stored in
//! the clear, DATA_LOSS for every stored value that does not verify (moved, tampered, under
//! an unknown key, plaintext), and a tampered orphan quarantined by ListOrphaned without
//! blocking the others, as is one whose last error opens but is not text
//! (`sealing/malformed.rs`). Rotation, `reseal` and key files are in `sealing_keys.rs`.

mod malformed;

use crate::common::app::{Backend, TestApp, decision};
use crate::common::raw::{self, SEALED};
use crate::common::receipt_ops::{
    FP, NS, claim, claim_request, claimed, complete, get, heartbeat, quarantine, secs,
};
use claimd::pb::{self, Decision, ListOrphanedRequest, RetryRequest, State};
use claimd::seal::{Binding, Field, KeyRing, Sealer, generate_key, stored_key_id};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Code, Status};

const PAYLOAD: &[u8] = b"CANARY-recovery-payload-7f3a";
const CHECKPOINT: &[u8] = b"CANARY-checkpoint-91be";
const RESPONSE: &[u8] = b"CANARY-response-c04d";
const RETRY_ERROR: &str = "CANARY-retry-error-55e1";
const DEAD_ERROR: &str = "CANARY-quarantine-error-0a9c";
const CANARIES: [&[u8]; 5] = [
    PAYLOAD,
    CHECKPOINT,
    RESPONSE,
    RETRY_ERROR.as_bytes(),
    DEAD_ERROR.as_bytes(),
];

/// Demands DATA_LOSS with the fixed message, which echoes no payload.
fn assert_data_loss<T: std::fmt::Debug>(result: Result<T, Status>, what: &str) {
    let status = result.expect_err(what);
    assert_eq!(status.code(), Code::DataLoss, "{what}: {status:?}");
    assert_eq!(status.message(), "a sealed field failed authentication");
}

async fn retry_with(app: &TestApp, key: &str, token: &str, error: &str) {
    let request = RetryRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        error: error.into(),
        retry_after: secs(1),
        count_attempt: None,
    };
    app.client.clone().retry(request).await.expect("Retry");
}

async fn try_claim(app: &TestApp, key: &str) -> Result<pb::ClaimResponse, Status> {
    let reply = app.client.clone().claim(claim_request(key, FP)).await;
    reply.map(tonic::Response::into_inner)
}

fn sealer(keys: &[[u8; 32]]) -> Arc<Sealer> {
    Arc::new(Sealer::with_keys(
        KeyRing::new(keys).expect("valid keys"),
        false,
    ))
}

async fn no_payload_checkpoint_response_or_error_is_stored_in_plaintext(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (token, _) = claimed(&app, "Ev-done", PAYLOAD).await;
    heartbeat(&app, "Ev-done", &token, None, Some(CHECKPOINT))
        .await
        .unwrap();
    complete(&app, "Ev-done", &token, RESPONSE).await.unwrap();
    let (token, _) = claimed(&app, "Ev-retry", PAYLOAD).await;
    heartbeat(&app, "Ev-retry", &token, None, Some(CHECKPOINT))
        .await
        .unwrap();
    retry_with(&app, "Ev-retry", &token, RETRY_ERROR).await;
    let (token, _) = claimed(&app, "Ev-dead", PAYLOAD).await;
    quarantine(&app, "Ev-dead", &token, DEAD_ERROR)
        .await
        .unwrap();

    // Through the API every value is there…
    assert_eq!(get(&app, "Ev-done").await.response, RESPONSE);
    let retrying = get(&app, "Ev-retry").await;
    assert_eq!(retrying.checkpoint, CHECKPOINT);
    assert_eq!(retrying.recovery_payload, PAYLOAD);
    assert_eq!(retrying.last_error, RETRY_ERROR);
    assert_eq!(get(&app, "Ev-dead").await.last_error, DEAD_ERROR);

    // …and at rest none is in the clear: every stored value is sealed under the current key.
    let everything = raw::everything(&app.database_url).await;
    assert!(!everything.is_empty());
    for canary in CANARIES {
        let shown = String::from_utf8_lossy(canary);
        assert!(
            !raw::holds(&everything, canary),
            "{shown} is stored in the clear"
        );
    }
    let current = app.seal.ring().expect("tests seal").current();
    let mut sealed = 0;
    for row in raw::rows(&app.database_url).await {
        for (column, stored) in SEALED.iter().zip(&row.blobs) {
            if let Some(stored) = stored {
                assert_eq!(stored_key_id(stored), Some(current), "{}/{column}", row.key);
                sealed += 1;
            }
        }
    }
    // Ev-done: response; Ev-retry: payload, checkpoint, error; Ev-dead: payload, error.
    assert_eq!(sealed, 6);
    app.shutdown().await;
}

async fn the_error_of_a_budget_quarantine_is_sealed_too(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies.default.max_attempts = 1)
        .spawn()
        .await;
    claimed(&app, "Ev-spent", PAYLOAD).await;
    app.advance(Duration::from_secs(60));
    let answer = claim(&app, claim_request("Ev-spent", FP)).await;
    assert_eq!(decision(&answer), Decision::Quarantined);
    assert_eq!(answer.receipt.unwrap().last_error, "exceeded max attempts");
    let stored = raw::read(&app.database_url, NS, "Ev-spent", "last_error").await;
    let stored = stored.expect("an error is stored");
    assert!(!raw::holds(&stored, b"exceeded"));
    let life = raw::life(&app.database_url, NS, "Ev-spent").await;
    let at = Binding {
        tenant: &raw::row(&app.database_url, NS, "Ev-spent").await.tenant,
        namespace: NS,
        key: "Ev-spent",
        life: life.as_deref().unwrap_or_default(),
    };
    let opened = app.seal.open(at, Field::LastError, &stored);
    assert_eq!(opened.as_deref(), Ok(&b"exceeded max attempts"[..]));
    app.shutdown().await;
}

async fn a_ciphertext_moved_to_another_row_or_field_is_data_loss(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let url = app.database_url.clone();
    claimed(&app, "Ev-a", PAYLOAD).await;
    claimed(&app, "Ev-b", b"another payload").await;
    let a_payload = raw::read(&url, NS, "Ev-a", "recovery_payload").await;

    raw::write(&url, NS, "Ev-b", "recovery_payload", a_payload.as_deref()).await;
    assert_data_loss(app.get(NS, "Ev-b").await, "Get of the row it was copied to");
    assert_data_loss(
        try_claim(&app, "Ev-b").await,
        "a duplicate Claim of that row",
    );
    assert_eq!(get(&app, "Ev-a").await.recovery_payload, PAYLOAD);

    raw::write(&url, NS, "Ev-a", "checkpoint", a_payload.as_deref()).await;
    assert_data_loss(
        app.get(NS, "Ev-a").await,
        "Get after a copy to another field",
    );
    app.shutdown().await;
}

async fn a_flipped_bit_is_data_loss_and_nothing_is_written(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let url = app.database_url.clone();
    let (token, _) = claimed(&app, "Ev-done", PAYLOAD).await;
    complete(&app, "Ev-done", &token, RESPONSE).await.unwrap();
    raw::flip_bit(&url, NS, "Ev-done", "response").await;
    assert_data_loss(app.get(NS, "Ev-done").await, "Get of a tampered response");
    assert_data_loss(
        try_claim(&app, "Ev-done").await,
        "a replay of a tampered response",
    );

    let (token, _) = claimed(&app, "Ev-busy", PAYLOAD).await;
    heartbeat(&app, "Ev-busy", &token, None, Some(CHECKPOINT))
        .await
        .unwrap();
    raw::flip_bit(&url, NS, "Ev-busy", "checkpoint").await;
    let before = raw::row(&url, NS, "Ev-busy").await;
    let beat = heartbeat(&app, "Ev-busy", &token, Some(60), None).await;
    assert_data_loss(beat, "a Heartbeat on a tampered row");
    let done = complete(&app, "Ev-busy", &token, RESPONSE).await;
    assert_data_loss(done, "a Complete on a tampered row");
    let after = raw::row(&url, NS, "Ev-busy").await;
    assert_eq!((after.state, after.blobs), (before.state, before.blobs));

    // A plaintext value where a sealed one belongs fails the same way.
    let (token, _) = claimed(&app, "Ev-plain", PAYLOAD).await;
    complete(&app, "Ev-plain", &token, RESPONSE).await.unwrap();
    raw::write(
        &url,
        NS,
        "Ev-plain",
        "response",
        Some(b"\x00forged response"),
    )
    .await;
    assert_data_loss(app.get(NS, "Ev-plain").await, "Get of a plaintext response");
    app.shutdown().await;
}

async fn a_row_sealed_under_an_unknown_key_is_data_loss(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let first = sealer(&[generate_key()]);
    let app = TestApp::builder()
        .database_url(url.clone())
        .configure(|c| c.store.seal = first)
        .spawn()
        .await;
    claimed(&app, "Ev-old", PAYLOAD).await;
    app.shutdown().await;

    let app = TestApp::builder()
        .database_url(url)
        .configure(|c| c.store.seal = sealer(&[generate_key()]))
        .spawn()
        .await;
    assert_data_loss(app.get(NS, "Ev-old").await, "Get under another key");
    assert_data_loss(try_claim(&app, "Ev-old").await, "Claim under another key");
    // The server itself is fine: new receipts work.
    claimed(&app, "Ev-new", PAYLOAD).await;
    assert_eq!(get(&app, "Ev-new").await.recovery_payload, PAYLOAD);
    app.shutdown().await;
}

async fn orphan_keys(app: &TestApp, page_size: i32) -> Vec<Vec<String>> {
    let mut request = ListOrphanedRequest {
        namespace: NS.into(),
        page_size,
        ..Default::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = app.client.clone().list_orphaned(request.clone()).await;
        let page = page.expect("ListOrphaned").into_inner();
        let keys = page
            .orphans
            .iter()
            .map(|o| o.receipt.as_ref().unwrap().key.clone());
        pages.push(keys.collect());
        if page.next_page_token.is_empty() {
            return pages;
        }
        request.page_token = page.next_page_token;
    }
}

async fn a_tampered_orphan_is_quarantined_and_the_others_are_still_listed(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let url = app.database_url.clone();
    for (key, lease) in [("Ev-1", 1), ("Ev-2", 2), ("Ev-3", 3)] {
        let request = pb::ClaimRequest {
            lease_ttl: secs(lease),
            recovery_payload: format!("payload of {key}").into_bytes(),
            ..claim_request(key, FP)
        };
        assert_eq!(decision(&claim(&app, request).await), Decision::Claimed);
    }
    let (token, _) = claimed(&app, "Ev-4", PAYLOAD).await;
    retry_with(&app, "Ev-4", &token, RETRY_ERROR).await;
    raw::flip_bit(&url, NS, "Ev-1", "recovery_payload").await;
    raw::flip_bit(&url, NS, "Ev-4", "last_error").await;
    app.advance(Duration::from_secs(60));

    // The first page still holds two orphans; the tampered ones are neither listed nor
    // in the way.
    assert_eq!(orphan_keys(&app, 2).await, vec![vec!["Ev-2", "Ev-3"]]);
    assert_eq!(raw::row(&url, NS, "Ev-1").await.state, "quarantined");
    assert_eq!(raw::row(&url, NS, "Ev-4").await.state, "quarantined");
    assert_eq!(orphan_keys(&app, 10).await, vec![vec!["Ev-2", "Ev-3"]]);

    // Ev-1's payload still does not verify: DATA_LOSS, never plaintext. Ev-4 only lost its
    // error text, which the quarantine replaced with its own, sealed.
    assert_data_loss(app.get(NS, "Ev-1").await, "Get of the quarantined orphan");
    let r = get(&app, "Ev-4").await;
    assert_eq!(
        (r.state(), r.last_error.as_str()),
        (State::Quarantined, claimd::store::UNREADABLE)
    );
    assert_eq!(r.recovery_payload, PAYLOAD);
    let stored = raw::read(&url, NS, "Ev-4", "last_error").await.unwrap();
    assert_eq!(
        stored_key_id(&stored),
        app.seal.ring().map(KeyRing::current)
    );

    // A recovery worker takes the others over and gets their payloads back.
    let taken = claim(&app, claim_request("Ev-2", FP)).await;
    assert_eq!(decision(&taken), Decision::Claimed);
    assert_eq!(taken.receipt.unwrap().recovery_payload, b"payload of Ev-2");
    app.shutdown().await;
}

conformance!(
    no_payload_checkpoint_response_or_error_is_stored_in_plaintext,
    the_error_of_a_budget_quarantine_is_sealed_too,
    a_ciphertext_moved_to_another_row_or_field_is_data_loss,
    a_flipped_bit_is_data_loss_and_nothing_is_written,
    a_row_sealed_under_an_unknown_key_is_data_loss,
    a_tampered_orphan_is_quarantined_and_the_others_are_still_listed,
);
