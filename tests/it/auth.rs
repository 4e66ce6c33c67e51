//! Tenants and API keys through the real server: isolation between tenants, missing,
//! malformed, unknown and revoked keys, namespace-restricted keys, protected mode, and the
//! `claimd keys` commands.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::auth::generate_key;
use claimd::pb::{self, ClaimRequest, CompleteRequest, Decision, GetRequest, ListOrphanedRequest};
use std::time::{Duration, Instant};
use tonic::{Code, Request};

fn with_key<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

fn claim(ns: &str, key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: crate::common::app::secs(1, 0),
        ..Default::default()
    }
}

async fn keyed_app(backend: Backend) -> TestApp {
    TestApp::builder()
        .backend(backend)
        .configure(|c| c.key_cache_ttl = Duration::from_millis(200))
        .spawn()
        .await
}

async fn tenants_never_see_each_others_receipts(backend: Backend) {
    let app = keyed_app(backend).await;
    let (_, acme) = app.create_key("acme", None).await;
    let (_, globex) = app.create_key("globex", None).await;
    let mut client = app.new_client().await;

    let a = client
        .claim(with_key(claim("hooks", "Ev1"), &acme))
        .await
        .unwrap()
        .into_inner();
    let g = client
        .claim(with_key(claim("hooks", "Ev1"), &globex))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (decision(&a), decision(&g)),
        (Decision::Claimed, Decision::Claimed)
    );
    assert_eq!(
        g.receipt.as_ref().unwrap().attempt,
        1,
        "globex got its own receipt"
    );

    // Holding acme's token does not let globex touch acme's receipt: on the shared key it
    // only reaches globex's own row (whose token differs), elsewhere nothing at all.
    let complete = |token: &str, key: &str| CompleteRequest {
        namespace: "hooks".into(),
        key: key.into(),
        claim_token: token.into(),
        response: b"stolen".to_vec(),
    };
    let err = client
        .complete(with_key(complete(&a.claim_token, "Ev1"), &globex))
        .await;
    assert_eq!(err.unwrap_err().code(), Code::Aborted);
    client
        .claim(with_key(claim("hooks", "Only-acme"), &acme))
        .await
        .unwrap();
    let get = |key: &str| GetRequest {
        namespace: "hooks".into(),
        key: key.into(),
    };
    let err = client
        .get(with_key(get("Only-acme"), &globex))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let err = client
        .complete(with_key(complete(&a.claim_token, "Only-acme"), &globex))
        .await;
    assert_eq!(err.unwrap_err().code(), Code::NotFound);

    // Expired leases are orphans of their own tenant only.
    app.advance(Duration::from_secs(5));
    let list = ListOrphanedRequest {
        page_size: 100,
        ..Default::default()
    };
    let orphans = client
        .list_orphaned(with_key(list.clone(), &globex))
        .await
        .unwrap();
    let keys: Vec<String> = orphans
        .into_inner()
        .orphans
        .into_iter()
        .map(|o| o.receipt.unwrap().key)
        .collect();
    assert_eq!(keys, ["Ev1"]);
    let mine = client
        .get(with_key(get("Ev1"), &acme))
        .await
        .unwrap()
        .into_inner();
    assert!(
        mine.receipt.unwrap().response.is_empty(),
        "acme's receipt was never completed"
    );
}

async fn calls_without_a_valid_key_are_refused_once_keys_exist(backend: Backend) {
    let app = keyed_app(backend).await;
    // Before any key exists, loopback callers act as tenant `default`.
    assert_eq!(
        decision(&app.claim("hooks", "before", b"fp").await),
        Decision::Claimed
    );
    let (id, key) = app.create_key("acme", None).await;
    let mut client = app.new_client().await;
    let code = |r: Result<tonic::Response<pb::ClaimResponse>, tonic::Status>| r.unwrap_err().code();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = client.claim(claim("hooks", "anonymous")).await;
        if r.is_err() {
            assert_eq!(code(r), Code::Unauthenticated);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "anonymous calls still accepted after a key exists"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let malformed = [
        "Bearer nonsense",
        "Basic dXNlcjpwYXNz",
        "Bearer claimd_0123456789abcdef_",
    ];
    for header in malformed {
        let mut request = Request::new(claim("hooks", "x"));
        request
            .metadata_mut()
            .insert("authorization", header.parse().unwrap());
        assert_eq!(
            code(client.claim(request).await),
            Code::Unauthenticated,
            "{header}"
        );
    }
    let unknown = generate_key().key;
    assert_eq!(
        code(client.claim(with_key(claim("hooks", "x"), &unknown)).await),
        Code::Unauthenticated
    );
    let forged = format!("{}x", &key[..key.len() - 1]);
    assert_eq!(
        code(client.claim(with_key(claim("hooks", "x"), &forged)).await),
        Code::Unauthenticated
    );

    assert_eq!(
        decision(
            &client
                .claim(with_key(claim("hooks", "x"), &key))
                .await
                .unwrap()
                .into_inner()
        ),
        Decision::Claimed
    );
    assert!(app.store().await.revoke_key(&id).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match client.claim(with_key(claim("hooks", "y"), &key)).await {
            Err(status) => {
                assert_eq!(status.code(), Code::PermissionDenied);
                break;
            }
            Ok(_) => assert!(Instant::now() < deadline, "a revoked key kept working"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let anonymous_get = client
        .get(GetRequest {
            namespace: "hooks".into(),
            key: "before".into(),
        })
        .await;
    assert_eq!(
        anonymous_get.unwrap_err().code(),
        Code::Unauthenticated,
        "revoked keys still count: no anonymous mode"
    );
}

async fn a_key_limited_to_namespaces_is_denied_elsewhere(backend: Backend) {
    let app = keyed_app(backend).await;
    let (_, key) = app.create_key("acme", Some(&["stripe", "slack"])).await;
    let mut client = app.new_client().await;
    client
        .claim(with_key(claim("stripe", "evt"), &key))
        .await
        .unwrap();
    let denied = client
        .claim(with_key(claim("github", "evt"), &key))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    assert!(denied.message().contains("github"));
    let all = ListOrphanedRequest {
        page_size: 10,
        ..Default::default()
    };
    let denied = client.list_orphaned(with_key(all, &key)).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied);
    let slack = ListOrphanedRequest {
        namespace: "slack".into(),
        page_size: 10,
        ..Default::default()
    };
    client.list_orphaned(with_key(slack, &key)).await.unwrap();
    assert_eq!(
        app.receipt_rows().await,
        1,
        "the denied claim wrote nothing"
    );
}

conformance_every_door!(
    tenants_never_see_each_others_receipts,
    calls_without_a_valid_key_are_refused_once_keys_exist,
    a_key_limited_to_namespaces_is_denied_elsewhere,
);

#[tokio::test]
async fn without_keys_claimd_refuses_a_non_loopback_address_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_addr().port();
    let mut refused = Claimd::spawn({
        let mut cmd = claimd();
        cmd.args(["--listen", &format!("0.0.0.0:{port}")])
            .current_dir(dir.path());
        cmd
    });
    let status = refused
        .wait_for_exit(Duration::from_secs(30))
        .await
        .expect("exits");
    assert!(!status.success());
    assert!(
        refused.log().contains("without API keys"),
        "{}",
        refused.log()
    );

    let mut allowed = claimd();
    allowed
        .args([
            "--listen",
            &format!("0.0.0.0:{port}"),
            "--allow-unauthenticated",
        ])
        .current_dir(dir.path());
    let loopback = format!("127.0.0.1:{port}").parse().unwrap();
    let server = Claimd::start(allowed, loopback).await;
    let mut client = crate::common::app::connect(loopback).await;
    client.claim(claim("hooks", "open")).await.unwrap();
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn keys_create_prints_the_key_once_and_list_never_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = claimd()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let key = run(&[
        "keys",
        "create",
        "--tenant",
        "acme",
        "--namespaces",
        "a,b",
        "--label",
        "billing",
    ]);
    let key = key.trim();
    let (id, secret) = claimd::auth::parse_key(key).expect("a well-formed key");
    let listed = run(&["keys", "list"]);
    assert!(
        listed.contains(id)
            && listed.contains("acme")
            && listed.contains("a,b")
            && listed.contains("billing")
    );
    assert!(!listed.contains(secret), "keys list shows the secret");
    run(&["keys", "revoke", id]);
    let listed = run(&["keys", "list"]);
    let row = listed.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(!row.ends_with("\t-"), "revocation time missing: {row}");
    let bad = claimd()
        .args(["keys", "create", "--tenant", "no spaces"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--tenant"));
}
