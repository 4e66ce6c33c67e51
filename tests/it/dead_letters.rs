//! List, the dead-letter admin view: the caller's receipts filtered by state and namespace,
//! paged in (namespace, key) order, scoped to the tenant and to a key's namespaces, with
//! bad arguments refused before anything is read. Redrive is in `dead_letters_redrive.rs`.

use crate::common::app::{Backend, TestApp, assert_names_field, secs};
use crate::common::dead_letters::{claimed, dead_letter, ids, list, list_request, pages};
use crate::common::raw;
use claimd::auth::generate_key;
use claimd::domain::{Action, ClaimInput, Policy, ReceiptKey};
use claimd::pb::{CompleteRequest, ListRequest, RedriveRequest, RetryRequest, State};
use claimd::store::keys::NewApiKey;
use std::time::Duration;
use tonic::{Code, Request};

const QUARANTINED: i32 = State::Quarantined as i32;

async fn dead_letters_come_in_namespace_and_key_order_across_pages(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    for (ns, key) in [
        ("b", "k2"),
        ("a", "k9"),
        ("a", "k1"),
        ("c", "k0"),
        ("a", "k10"),
        ("b", "k1"),
        ("a/x", "k0"),
    ] {
        dead_letter(&app, ns, key).await;
    }
    // Receipts in the other states, in the same namespaces.
    claimed(&app, "a", "live").await;
    let claim_token = claimed(&app, "b", "waiting").await;
    let (namespace, key, error) = ("b".into(), "waiting".into(), "503".into());
    let retry_after = secs(60, 0);
    let retry = RetryRequest {
        namespace,
        key,
        claim_token,
        error,
        retry_after,
        count_attempt: None,
    };
    app.client.clone().retry(retry).await.expect("Retry");
    let claim_token = claimed(&app, "c", "done").await;
    let (namespace, key, response) = ("c".into(), "done".into(), b"ok".to_vec());
    let complete = CompleteRequest {
        namespace,
        key,
        claim_token,
        response,
    };
    app.client
        .clone()
        .complete(complete)
        .await
        .expect("Complete");

    let paged = pages(&app, list_request("", &[State::Quarantined], 3)).await;
    assert_eq!(paged.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1]);
    let all = paged.concat();
    let expected = [
        ("a", "k1"),
        ("a", "k10"),
        ("a", "k9"),
        ("a/x", "k0"),
        ("b", "k1"),
        ("b", "k2"),
        ("c", "k0"),
    ];
    assert_eq!(ids(&all), expected, "bytewise (namespace, key) order");
    for r in &all {
        assert_eq!(r.state(), State::Quarantined, "{r:?}");
        assert_eq!(r.last_error, "poison");
        assert_eq!(
            r.recovery_payload,
            format!("body of {}", r.key).into_bytes()
        );
    }

    let two = list_request("", &[State::RetryWait, State::Quarantined], 0);
    let two = pages(&app, two).await.concat();
    assert_eq!(two.len(), 8);
    assert!(ids(&two).contains(&("b", "waiting")));
    let every = pages(&app, list_request("", &[], 4)).await.concat();
    assert_eq!(every.len(), 10, "no states: every state");
    let keys = ids(&every);
    assert!(keys.is_sorted(), "{keys:?}");
    app.shutdown().await;
}

async fn a_namespace_filter_lists_only_that_namespace(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    for (ns, key) in [
        ("a", "k1"),
        ("ab", "k0"),
        ("a", "k2"),
        ("b", "k0"),
        ("a", "k0"),
    ] {
        dead_letter(&app, ns, key).await;
    }
    claimed(&app, "a", "live").await;
    let only_a = pages(&app, list_request("a", &[State::Quarantined], 1)).await;
    assert_eq!(only_a.len(), 3, "one receipt per page");
    let only_a = only_a.concat();
    assert_eq!(ids(&only_a), [("a", "k0"), ("a", "k1"), ("a", "k2")]);
    let all_of_a = pages(&app, list_request("a", &[], 0)).await.concat();
    assert_eq!(all_of_a.len(), 4);
    let none = list(&app, list_request("nothing-here", &[], 0)).await;
    assert!(none.receipts.is_empty() && none.next_page_token.is_empty());
    app.shutdown().await;
}

/// A key for `tenant`, optionally limited to `namespaces`.
async fn key_for(app: &TestApp, tenant: &str, namespaces: Option<&[&str]>) -> String {
    let generated = generate_key();
    let new = NewApiKey {
        id: generated.id.clone(),
        tenant: tenant.to_owned(),
        secret_hash: generated.secret_hash,
        label: None,
        namespaces: namespaces.map(|n| n.iter().map(|s| s.to_string()).collect()),
    };
    app.store()
        .await
        .create_key(&new)
        .await
        .expect("create key");
    generated.key
}

fn with_key<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("ASCII");
    request.metadata_mut().insert("authorization", value);
    request
}

async fn another_tenants_dead_letters_are_never_listed_or_redriven(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.key_cache_ttl = Duration::from_millis(200))
        .spawn()
        .await;
    // The other tenant's dead letters, seeded through the store.
    let store = app.store().await;
    for key in ["shared-key", "theirs-only"] {
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "a".into(),
                key: key.into(),
            },
            fingerprint: b"their fp".to_vec(),
            lease_ttl: chrono::TimeDelta::seconds(30),
            recovery_payload: None,
            new_token: uuid::Uuid::new_v4(),
        };
        let policy = Policy::default();
        store.claim("globex", &input, &policy).await.expect("seed");
        let poison = Action::Quarantine {
            error: "theirs".into(),
        };
        store
            .act("globex", &input.id, input.new_token, &poison, &policy)
            .await
            .expect("seed quarantine");
    }
    // The caller (protected mode: tenant "default") has its own.
    dead_letter(&app, "a", "shared-key").await;
    dead_letter(&app, "b", "mine").await;
    let mine = pages(&app, list_request("", &[State::Quarantined], 1)).await;
    assert_eq!(ids(&mine.concat()), [("a", "shared-key"), ("b", "mine")]);
    assert_eq!(mine.concat()[0].fingerprint, b"fp", "the caller's row");
    let theirs = RedriveRequest {
        namespace: "a".into(),
        key: "theirs-only".into(),
    };
    let status = app.client.clone().redrive(theirs).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    let shared = RedriveRequest {
        namespace: "a".into(),
        key: "shared-key".into(),
    };
    app.client
        .clone()
        .redrive(shared.clone())
        .await
        .expect("Redrive");
    let id = ReceiptKey {
        namespace: "a".into(),
        key: "shared-key".into(),
    };
    let untouched = store.get("globex", &id).await.expect("get").expect("row");
    assert_eq!(untouched.state, claimd::domain::State::Quarantined);

    // Keys: globex sees only its own; a key limited to namespace "b" must name it.
    let globex = key_for(&app, "globex", None).await;
    let limited = key_for(&app, "default", Some(&["b"])).await;
    let mut client = app.new_client().await;
    let request = |ns: &str| list_request(ns, &[State::Quarantined], 10);
    let page = client.list(with_key(request(""), &globex)).await;
    let page = page.expect("List").into_inner().receipts;
    assert_eq!(ids(&page), [("a", "shared-key"), ("a", "theirs-only")]);
    for ns in ["", "a"] {
        let denied = client.list(with_key(request(ns), &limited)).await;
        assert_eq!(denied.unwrap_err().code(), Code::PermissionDenied, "{ns:?}");
    }
    let denied = client.redrive(with_key(shared, &limited)).await;
    assert_eq!(denied.unwrap_err().code(), Code::PermissionDenied);
    let page = client.list(with_key(request("b"), &limited)).await;
    assert_eq!(
        ids(&page.expect("List").into_inner().receipts),
        [("b", "mine")]
    );
    app.shutdown().await;
}

async fn bad_arguments_are_invalid_argument_and_change_nothing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    dead_letter(&app, "ns", "Ev1").await;
    let before = app.get("ns", "Ev1").await.expect("Get");
    let rows = app.receipt_rows().await;
    let list_orphaned_token = "eyJkIjoxODAwMDAwMDAwMDAwMDAwLCJuIjoibnMiLCJrIjoiayJ9";
    let unknown_field = "eyJuIjoibnMiLCJrIjoiayIsIngiOjF9";
    let list = |f: &dyn Fn(&mut ListRequest)| {
        let mut request = list_request("", &[State::Quarantined], 0);
        f(&mut request);
        request
    };
    let cases = [
        (
            "page_token",
            list(&|r| r.page_token = "not a token!".into()),
        ),
        ("page_token", list(&|r| r.page_token = "e30".into())),
        (
            "page_token",
            list(&|r| r.page_token = list_orphaned_token.into()),
        ),
        ("page_token", list(&|r| r.page_token = unknown_field.into())),
        ("states", list(&|r| r.states = vec![0])),
        ("states", list(&|r| r.states = vec![QUARANTINED, 99])),
        ("states", list(&|r| r.states = vec![-1])),
        ("page_size", list(&|r| r.page_size = -1)),
        ("namespace", list(&|r| r.namespace = "has space".into())),
    ];
    for (field, request) in cases {
        let status = app.client.clone().list(request).await.unwrap_err();
        assert_names_field(&status, field);
    }
    for (field, namespace, key) in [("namespace", "", "Ev1"), ("namespace", "n s", "Ev1")]
        .into_iter()
        .chain([("key", "ns", ""), ("key", "ns", "a\0b")])
    {
        let request = RedriveRequest {
            namespace: namespace.into(),
            key: key.into(),
        };
        let status = app.client.clone().redrive(request).await.unwrap_err();
        assert_names_field(&status, field);
    }
    assert_eq!(app.get("ns", "Ev1").await.expect("Get"), before);
    assert_eq!(app.receipt_rows().await, rows);
    // The edges are accepted: 1000 per page, more is cut to 1000, the longest namespace.
    for (ns, page_size) in [("", 1000), ("", i32::MAX), (&*"n".repeat(128), 1)] {
        let request = list_request(ns, &[State::Quarantined], page_size);
        app.client
            .clone()
            .list(request)
            .await
            .expect("List at the edge");
    }
    app.shutdown().await;
}

async fn a_dead_letter_whose_sealed_data_does_not_open_is_data_loss(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    dead_letter(&app, "ns", "Ev-good").await;
    dead_letter(&app, "ns", "Ev-tampered").await;
    raw::flip_bit(&app.database_url, "ns", "Ev-tampered", "last_error").await;
    let stored = raw::row(&app.database_url, "ns", "Ev-tampered").await;
    let status = app.client.clone().list(list_request("ns", &[], 0)).await;
    assert_eq!(status.unwrap_err().code(), Code::DataLoss);
    let request = |key: &str| RedriveRequest {
        namespace: "ns".into(),
        key: key.into(),
    };
    let status = app.client.clone().redrive(request("Ev-tampered")).await;
    assert_eq!(status.unwrap_err().code(), Code::DataLoss);
    let after = raw::row(&app.database_url, "ns", "Ev-tampered").await;
    assert_eq!(
        (after.state, after.blobs),
        (stored.state, stored.blobs),
        "nothing written"
    );
    app.client
        .clone()
        .redrive(request("Ev-good"))
        .await
        .expect("Redrive");
    app.shutdown().await;
}

conformance_every_door!(
    dead_letters_come_in_namespace_and_key_order_across_pages,
    a_namespace_filter_lists_only_that_namespace,
    another_tenants_dead_letters_are_never_listed_or_redriven,
    bad_arguments_are_invalid_argument_and_change_nothing,
    a_dead_letter_whose_sealed_data_does_not_open_is_data_loss,
);
