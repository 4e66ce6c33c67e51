//! ListOrphaned (docs/DESIGN.md §2): expired leases and due retries, oldest due first, paginated,
//! filtered, scoped to the caller's tenant, and taken over by a recovery worker's Claim.

use crate::common::app::{Backend, TestApp, decision};
use claimd::domain::{ClaimInput, Policy, ReceiptKey};
use claimd::pb::{
    ClaimRequest, ClaimResponse, CompleteRequest, Decision, HeartbeatRequest, ListOrphanedRequest,
    ListOrphanedResponse, Orphan, OrphanReason, QuarantineRequest, Receipt, RetryRequest, State,
};
use std::time::Duration;

fn secs(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

/// A Claim with a lease of `lease` seconds and a recovery payload; must be CLAIMED.
async fn claim_for(app: &TestApp, ns: &str, key: &str, lease: i64) -> ClaimResponse {
    let request = ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(lease),
        recovery_payload: format!("body of {key}").into_bytes(),
        ..Default::default()
    };
    let response = app.client.clone().claim(request).await.expect("Claim");
    let response = response.into_inner();
    assert_eq!(decision(&response), Decision::Claimed, "{ns}/{key}");
    response
}

fn list_request(ns: &str, page_size: i32) -> ListOrphanedRequest {
    ListOrphanedRequest {
        namespace: ns.into(),
        page_size,
        ..Default::default()
    }
}

async fn list(app: &TestApp, request: ListOrphanedRequest) -> ListOrphanedResponse {
    let response = app.client.clone().list_orphaned(request).await;
    response.expect("ListOrphaned").into_inner()
}

/// Every page, following next_page_token until it is empty.
async fn pages(app: &TestApp, mut request: ListOrphanedRequest) -> Vec<Vec<Orphan>> {
    let mut pages = Vec::new();
    loop {
        let page = list(app, request.clone()).await;
        pages.push(page.orphans);
        if page.next_page_token.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "pagination does not end");
        request.page_token = page.next_page_token;
    }
}

/// Every orphan of every page.
async fn list_all(app: &TestApp, request: ListOrphanedRequest) -> Vec<Orphan> {
    pages(app, request).await.concat()
}

fn receipt(orphan: &Orphan) -> &Receipt {
    orphan
        .receipt
        .as_ref()
        .expect("an orphan carries its receipt")
}

/// The keys in listed order.
fn keys(orphans: &[Orphan]) -> Vec<String> {
    orphans.iter().map(|o| receipt(o).key.clone()).collect()
}

/// The keys, sorted, for comparisons that do not depend on order.
fn sorted_keys(orphans: &[Orphan]) -> Vec<String> {
    let mut keys = keys(orphans);
    keys.sort();
    keys
}

async fn expired_leases_and_due_retries_are_listed_but_live_pending_and_terminal_receipts_are_not(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let mut client = app.client.clone();
    claim_for(&app, "ns", "expired", 10).await;
    claim_for(&app, "ns", "live", 3600).await;
    for (key, retry_after) in [("retry-due", 5), ("retry-later", 3600)] {
        let claim_token = claim_for(&app, "ns", key, 30).await.claim_token;
        let (namespace, key, error) = ("ns".into(), key.into(), "upstream 503".into());
        let retry_after = secs(retry_after);
        let retry = RetryRequest {
            namespace,
            key,
            claim_token,
            error,
            retry_after,
            count_attempt: None,
        };
        client.retry(retry).await.expect("Retry");
    }
    let claim_token = claim_for(&app, "ns", "completed", 10).await.claim_token;
    let (namespace, key) = ("ns".into(), "completed".into());
    let complete = CompleteRequest {
        namespace,
        key,
        claim_token,
        response: b"ok".to_vec(),
    };
    client.complete(complete).await.expect("Complete");
    let claim_token = claim_for(&app, "ns", "quarantined", 10).await.claim_token;
    let (namespace, key, error) = ("ns".into(), "quarantined".into(), "poison".into());
    let quarantine = QuarantineRequest {
        namespace,
        key,
        claim_token,
        error,
    };
    client.quarantine(quarantine).await.expect("Quarantine");
    assert!(
        list(&app, list_request("", 0)).await.orphans.is_empty(),
        "nothing is due yet"
    );

    app.advance(Duration::from_secs(60));
    let orphans = list(&app, list_request("", 0)).await.orphans;
    assert_eq!(sorted_keys(&orphans), ["expired", "retry-due"]);
    for orphan in &orphans {
        let expected = match receipt(orphan).key.as_str() {
            "expired" => (OrphanReason::LeaseExpired, State::Processing),
            _ => (OrphanReason::RetryDue, State::RetryWait),
        };
        let actual = (orphan.reason(), receipt(orphan).state());
        assert_eq!(actual, expected, "{orphan:#?}");
    }
    app.shutdown().await;
}

async fn orphans_come_oldest_due_first_across_pages_without_duplicates_or_gaps(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    // Claimed in key order with falling leases: due order is the reverse of key order.
    for i in 0..7 {
        claim_for(&app, "ns", &format!("k{i}"), 16 - i).await;
    }
    app.advance(Duration::from_secs(60));
    let pages = pages(&app, list_request("ns", 3)).await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1]);
    let all = pages.concat();
    assert_eq!(keys(&all), ["k6", "k5", "k4", "k3", "k2", "k1", "k0"]);
    let due = all.iter().map(|o| receipt(o).lease_expires_at.unwrap());
    let due: Vec<_> = due.map(|t| (t.seconds, t.nanos)).collect();
    assert!(due.is_sorted(), "oldest due first: {due:?}");
    app.shutdown().await;
}

async fn a_namespace_filter_lists_only_that_namespace_and_an_empty_one_lists_all(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claim_for(&app, "a", "a1", 10).await;
    claim_for(&app, "a", "a2", 10).await;
    claim_for(&app, "b", "b1", 10).await;
    claim_for(&app, "ab", "ab1", 10).await;
    app.advance(Duration::from_secs(60));
    let only_a = list_all(&app, list_request("a", 1)).await;
    assert_eq!(sorted_keys(&only_a), ["a1", "a2"]);
    assert!(only_a.iter().all(|o| receipt(o).namespace == "a"));
    let all = list_all(&app, list_request("", 0)).await;
    assert_eq!(sorted_keys(&all), ["a1", "a2", "ab1", "b1"]);
    app.shutdown().await;
}

async fn overdue_by_lists_only_receipts_due_at_least_that_long_ago(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    claim_for(&app, "ns", "old", 10).await;
    app.advance(Duration::from_secs(100));
    claim_for(&app, "ns", "recent", 10).await;
    app.advance(Duration::from_secs(20));
    // "old" has been due for 110 s, "recent" for 10 s.
    for (overdue_by, expected) in [
        (None, vec!["old", "recent"]),
        (secs(5), vec!["old", "recent"]),
        (secs(60), vec!["old"]),
        (secs(200), vec![]),
    ] {
        let request = ListOrphanedRequest {
            overdue_by,
            ..list_request("ns", 0)
        };
        let orphans = list(&app, request).await.orphans;
        assert_eq!(keys(&orphans), expected, "overdue_by {overdue_by:?}");
    }
    app.shutdown().await;
}

async fn another_tenants_receipts_are_never_listed_read_or_claimed(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let store = app.store().await;
    for key in ["same-key", "theirs-only"] {
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "shared".into(),
                key: key.into(),
            },
            fingerprint: b"their fingerprint".to_vec(),
            lease_ttl: chrono::TimeDelta::seconds(10),
            recovery_payload: Some(b"their secret body".to_vec()),
            new_token: uuid::Uuid::new_v4(),
        };
        let seeded = store
            .claim("other-tenant", &input, &Policy::default())
            .await;
        seeded.expect("seed the other tenant");
    }
    app.advance(Duration::from_secs(60));
    assert!(list_all(&app, list_request("", 1)).await.is_empty());
    assert!(list_all(&app, list_request("shared", 1)).await.is_empty());
    let get = app.get("shared", "same-key").await;
    assert_eq!(get.expect_err("not theirs").code(), tonic::Code::NotFound);

    // Another fingerprint: a leak would answer CONFLICT, an expired lease a takeover.
    let mine = claim_for(&app, "shared", "same-key", 10).await;
    let mine = mine.receipt.unwrap();
    assert_eq!(mine.attempt, 1);
    assert_eq!(mine.recovery_payload, b"body of same-key");
    app.advance(Duration::from_secs(60));
    let orphans = list_all(&app, list_request("", 1)).await;
    assert_eq!(keys(&orphans), ["same-key"]);
    assert_eq!(receipt(&orphans[0]).fingerprint, b"fp", "the caller's row");

    // The other tenant's row was not touched.
    let id = ReceiptKey {
        namespace: "shared".into(),
        key: "same-key".into(),
    };
    let theirs = store.get("other-tenant", &id).await.expect("get");
    let theirs = theirs.expect("their row is still there");
    assert_eq!(theirs.attempt, 1);
    assert_eq!(theirs.fingerprint, b"their fingerprint");
    app.shutdown().await;
}

async fn a_malformed_page_token_or_a_negative_page_size_is_invalid_argument(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let base64_of_json_object = "e30";
    for token in ["not a token!", "%%%", base64_of_json_object] {
        let request = ListOrphanedRequest {
            page_token: token.into(),
            ..list_request("", 0)
        };
        let status = app.client.clone().list_orphaned(request).await;
        let status = status.expect_err("a malformed page token is refused");
        let code = status.code();
        assert_eq!(code, tonic::Code::InvalidArgument, "{token:?}: {status:?}");
        assert!(status.message().contains("page_token"), "{status:?}");
    }
    let status = app.client.clone().list_orphaned(list_request("", -1)).await;
    let status = status.expect_err("a negative page size is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("page_size"), "{status:?}");
    app.shutdown().await;
}

async fn a_recovery_worker_takes_a_listed_orphan_over_and_gets_its_payload_and_checkpoint(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let held = claim_for(&app, "ns", "Ev-dead-holder", 10).await;
    let heartbeat = HeartbeatRequest {
        namespace: "ns".into(),
        key: "Ev-dead-holder".into(),
        claim_token: held.claim_token,
        lease_ttl: secs(10),
        checkpoint: Some(b"reply staged".to_vec()),
    };
    let mut client = app.client.clone();
    client.heartbeat(heartbeat).await.expect("Heartbeat");
    claim_for(&app, "ns", "Ev-still-orphaned", 10).await;
    app.advance(Duration::from_secs(30));
    let listed = list_all(&app, list_request("ns", 0)).await;
    assert_eq!(
        sorted_keys(&listed),
        ["Ev-dead-holder", "Ev-still-orphaned"]
    );

    // The worker knows only the listed receipt: it sends no payload of its own.
    let mut worker = app.new_client().await;
    let listed = listed.iter().find(|o| receipt(o).key == "Ev-dead-holder");
    let listed = receipt(listed.unwrap()).clone();
    let takeover = ClaimRequest {
        namespace: listed.namespace,
        key: listed.key,
        fingerprint: listed.fingerprint,
        lease_ttl: secs(60),
        ..Default::default()
    };
    let taken = worker.claim(takeover).await.expect("takeover").into_inner();
    assert_eq!(decision(&taken), Decision::Claimed);
    assert!(!taken.claim_token.is_empty());
    let receipt = taken.receipt.unwrap();
    assert_eq!(receipt.attempt, 2);
    assert_eq!(receipt.recovery_payload, b"body of Ev-dead-holder");
    assert_eq!(receipt.checkpoint, b"reply staged");

    let after = list_all(&app, list_request("ns", 0)).await;
    assert_eq!(keys(&after), ["Ev-still-orphaned"]);
    app.shutdown().await;
}

conformance_every_door!(
    expired_leases_and_due_retries_are_listed_but_live_pending_and_terminal_receipts_are_not,
    orphans_come_oldest_due_first_across_pages_without_duplicates_or_gaps,
    a_namespace_filter_lists_only_that_namespace_and_an_empty_one_lists_all,
    overdue_by_lists_only_receipts_due_at_least_that_long_ago,
    another_tenants_receipts_are_never_listed_read_or_claimed,
    a_malformed_page_token_or_a_negative_page_size_is_invalid_argument,
    a_recovery_worker_takes_a_listed_orphan_over_and_gets_its_payload_and_checkpoint,
);
