//! Sealing format `0x02` and receipt lifetimes (docs/DESIGN.md §3.6) through the real server and
//! the real `claimd reseal`, on both stores: old-format (`0x01`) values still open in rows
//! from before lifetimes and `reseal` (and its dry run) converts them; a value from an
//! earlier life of the same key, or an old-format value in a new row, is DATA_LOSS; and a
//! duplicate Claim, an IN_FLIGHT answer and every read seal nothing.

use crate::common::app::{Backend, TestApp, decision};
use crate::common::process::claimd;
use crate::common::raw::{self, SEALED};
use crate::common::receipt_ops::{
    FP, NS, claim, claim_request, claimed, complete, get, heartbeat, retry,
};
use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use claimd::domain::Policy;
use claimd::pb::{self, Decision};
use claimd::seal::{FORMAT_XCHACHA, KeyId, KeyRing, Sealer, encode_key, generate_key};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

fn sealer(key: [u8; 32]) -> Arc<Sealer> {
    Arc::new(Sealer::with_keys(
        KeyRing::new(&[key]).expect("a key"),
        false,
    ))
}

/// `plaintext` sealed for `column` of `tenant`'s row `key` as claimd sealed before format
/// `0x02`: AES-256-GCM, a random 96-bit nonce, bound to tenant, namespace, key and column.
fn sealed_v1(key: &[u8; 32], tenant: &str, row: &str, column: &str, plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(key.into());
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let aad = format!("claimd/v1\0{tenant}\0{NS}\0{row}\0{column}");
    let payload = Payload {
        msg: plaintext,
        aad: aad.as_bytes(),
    };
    let sealed = cipher.encrypt(&nonce, payload).expect("sealed");
    [&[0x01][..], &KeyId::of(key).0, &nonce, &sealed].concat()
}

/// Makes `row` a row from before lifetimes: no life id, every sealed value in format `0x01`
/// of the plaintext Get returns for it.
async fn make_old(app: &TestApp, key: &[u8; 32], row: &str) {
    let url = &app.database_url;
    let receipt = get(app, row).await;
    let tenant = raw::row(url, NS, row).await.tenant;
    raw::set_life(url, NS, row, None).await;
    let plaintexts = [
        receipt.last_error.as_bytes(),
        &receipt.checkpoint,
        &receipt.response,
        &receipt.recovery_payload,
    ];
    for (column, plain) in SEALED.iter().zip(plaintexts) {
        if raw::read(url, NS, row, column).await.is_some() {
            let old = sealed_v1(key, &tenant, row, column, plain);
            raw::write(url, NS, row, column, Some(&old)).await;
        }
    }
}

/// The format byte of every stored sealed value.
async fn formats(url: &str) -> Vec<u8> {
    let rows = raw::rows(url).await;
    rows.iter()
        .flat_map(|r| r.blobs.iter().flatten().map(|b| b[0]))
        .collect()
}

/// Runs `claimd reseal` with `key`; returns stdout and the log.
fn reseal(url: &str, key: &[u8; 32], extra: &[&str]) -> (String, String) {
    let output = claimd()
        .args(["reseal", "--database-url", url])
        .args(extra)
        .env("CLAIMD_SEAL_KEYS", encode_key(key))
        .output()
        .expect("claimd reseal runs");
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "reseal failed: {log}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), log)
}

async fn old_format_values_open_and_reseal_converts_them(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let key = generate_key();
    let app = TestApp::builder()
        .database_url(url.clone())
        .configure(|c| c.store.seal = sealer(key))
        .spawn()
        .await;
    let (busy, _) = claimed(&app, "Ev-old-busy", b"old payload").await;
    heartbeat(&app, "Ev-old-busy", &busy, None, Some(b"old checkpoint"))
        .await
        .unwrap();
    let (token, _) = claimed(&app, "Ev-old-done", b"payload").await;
    complete(&app, "Ev-old-done", &token, b"old response")
        .await
        .unwrap();
    claimed(&app, "Ev-new", b"new payload").await;
    let before = [
        get(&app, "Ev-old-busy").await,
        get(&app, "Ev-old-done").await,
    ];
    make_old(&app, &key, "Ev-old-busy").await;
    make_old(&app, &key, "Ev-old-done").await;
    assert_eq!(formats(&url).await, [FORMAT_XCHACHA, 1, 1, 1]);

    // Old-format values open through Get.
    let opened = [
        get(&app, "Ev-old-busy").await,
        get(&app, "Ev-old-done").await,
    ];
    assert_eq!(opened, before);

    // The dry run counts them and writes nothing.
    let raw_before = raw::rows(&url).await;
    let (out, _) = reseal(&url, &key, &["--dry-run", "--batch-size", "2"]);
    let expected = "scanned=3 rows_to_reseal=2 unreadable=0 old_format=3 old_key=0 plaintext=0";
    assert!(out.contains(expected), "{out}");
    let raw_after = raw::rows(&url).await;
    let blobs = |rows: &[raw::RawRow]| rows.iter().map(|r| r.blobs.clone()).collect::<Vec<_>>();
    assert_eq!(blobs(&raw_after), blobs(&raw_before), "the dry run wrote");

    // A holder action seals only what it changes: the old payload stays as stored.
    let old_payload = raw::read(&url, NS, "Ev-old-busy", "recovery_payload").await;
    heartbeat(&app, "Ev-old-busy", &busy, None, Some(b"cp 2"))
        .await
        .unwrap();
    let payload = raw::read(&url, NS, "Ev-old-busy", "recovery_payload").await;
    assert_eq!(payload, old_payload);
    let checkpoint = raw::read(&url, NS, "Ev-old-busy", "checkpoint")
        .await
        .unwrap();
    assert_eq!(checkpoint[0], FORMAT_XCHACHA);

    // reseal converts every old value; the rows keep their (empty) life.
    let (_, log) = reseal(&url, &key, &["--batch-size", "2"]);
    assert!(
        log.contains("scanned=3 rewritten=2 unreadable=0 old_format=2"),
        "{log}"
    );
    assert_eq!(formats(&url).await, [FORMAT_XCHACHA; 4]);
    assert_eq!(raw::life(&url, NS, "Ev-old-busy").await, None);
    assert_eq!(get(&app, "Ev-old-busy").await.checkpoint, b"cp 2");
    assert_eq!(
        get(&app, "Ev-old-busy").await.recovery_payload,
        b"old payload"
    );
    assert_eq!(get(&app, "Ev-old-done").await.response, b"old response");
    let (out, _) = reseal(&url, &key, &["--dry-run"]);
    assert!(
        out.contains("scanned=3 rows_to_reseal=0 unreadable=0 old_format=0"),
        "{out}"
    );
    app.shutdown().await;
}

async fn a_value_from_an_earlier_life_is_data_loss(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let key = generate_key();
    let app = TestApp::builder()
        .database_url(url.clone())
        .configure(|c| {
            c.store.seal = sealer(key);
            c.janitor.interval = Duration::ZERO;
            let short = Policy {
                retention: chrono::TimeDelta::days(1),
                response_retention: chrono::TimeDelta::days(1),
                ..Policy::default()
            };
            c.policies.namespaces.insert(NS.into(), short);
        })
        .spawn()
        .await;
    // The first life: claimed with a payload, a checkpoint, completed, pruned.
    let (token, _) = claimed(&app, "Ev-1", b"first payload").await;
    heartbeat(&app, "Ev-1", &token, None, Some(b"first checkpoint"))
        .await
        .unwrap();
    let read = |column| raw::read(&url, NS, "Ev-1", column);
    let (old_payload, old_checkpoint) = (read("recovery_payload").await, read("checkpoint").await);
    complete(&app, "Ev-1", &token, b"first response")
        .await
        .unwrap();
    let old_response = read("response").await;
    let old_life = raw::life(&url, NS, "Ev-1")
        .await
        .expect("a new row has a life");
    app.advance(Duration::from_secs(3 * 86_400));
    for _ in 0..2 {
        app.janitor.run_once().await.expect("janitor pass");
    }
    assert_eq!(
        app.get(NS, "Ev-1").await.unwrap_err().code(),
        Code::NotFound
    );

    // The second life of the same key.
    let (_, receipt) = claimed(&app, "Ev-1", b"first payload").await;
    let new_life = raw::life(&url, NS, "Ev-1").await.expect("a life");
    assert_ne!(new_life, old_life);
    let new_payload = read("recovery_payload").await;
    for (column, old) in [
        ("recovery_payload", &old_payload),
        ("checkpoint", &old_checkpoint),
        ("response", &old_response),
    ] {
        raw::write(&url, NS, "Ev-1", column, old.as_deref()).await;
        let status = app.get(NS, "Ev-1").await.expect_err(column);
        assert_eq!(status.code(), Code::DataLoss, "{column}: {status:?}");
        let again = app.client.clone().claim(claim_request("Ev-1", FP)).await;
        assert_eq!(again.expect_err(column).code(), Code::DataLoss, "{column}");
        // Under the old life the same value opens: only the life tells them apart.
        raw::set_life(&url, NS, "Ev-1", Some(&old_life)).await;
        raw::write(&url, NS, "Ev-1", "recovery_payload", old_payload.as_deref()).await;
        assert!(
            app.get(NS, "Ev-1").await.is_ok(),
            "{column} under its own life"
        );
        raw::set_life(&url, NS, "Ev-1", Some(&new_life)).await;
        raw::write(&url, NS, "Ev-1", column, None).await;
        raw::write(&url, NS, "Ev-1", "recovery_payload", new_payload.as_deref()).await;
    }
    assert_eq!(
        get(&app, "Ev-1").await.recovery_payload,
        receipt.recovery_payload
    );

    // An old-format value of the right row and field, in a row that has a life.
    let tenant = raw::row(&url, NS, "Ev-1").await.tenant;
    let v1 = sealed_v1(&key, &tenant, "Ev-1", "recovery_payload", b"first payload");
    raw::write(&url, NS, "Ev-1", "recovery_payload", Some(&v1)).await;
    let status = app.get(NS, "Ev-1").await.expect_err("0x01 in a new row");
    assert_eq!(status.code(), Code::DataLoss, "{status:?}");
    raw::set_life(&url, NS, "Ev-1", None).await;
    assert_eq!(get(&app, "Ev-1").await.recovery_payload, b"first payload");
    app.shutdown().await;
}

/// Get, List and ListOrphaned of the namespace.
async fn reads(app: &TestApp) {
    let mut c = app.client.clone();
    let list = pb::ListRequest {
        namespace: NS.into(),
        ..Default::default()
    };
    c.list(list).await.expect("List");
    let orphans = pb::ListOrphanedRequest {
        namespace: NS.into(),
        ..Default::default()
    };
    c.list_orphaned(orphans).await.expect("ListOrphaned");
    get(app, "Ev-1").await;
}

async fn a_duplicate_claim_and_every_read_seal_nothing(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let (url, seal) = (app.database_url.clone(), app.seal.clone());
    let (token, _) = claimed(&app, "Ev-1", b"payload").await;
    assert_eq!(seal.seal_count(), 1, "the payload of a new row");
    let payload = raw::read(&url, NS, "Ev-1", "recovery_payload").await;

    let duplicate = claim(&app, claim_request("Ev-1", FP)).await;
    assert_eq!(decision(&duplicate), Decision::InFlight);
    let conflict = claim(&app, claim_request("Ev-1", b"another fingerprint")).await;
    assert_eq!(decision(&conflict), Decision::Conflict);
    reads(&app).await;
    heartbeat(&app, "Ev-1", &token, Some(60), None)
        .await
        .unwrap();
    assert_eq!(
        seal.seal_count(),
        1,
        "a duplicate, a conflict, reads or a lease"
    );

    heartbeat(&app, "Ev-1", &token, None, Some(b"checkpoint"))
        .await
        .unwrap();
    assert_eq!(seal.seal_count(), 2, "a checkpoint, and only it");
    app.advance(Duration::from_secs(120));
    reads(&app).await;
    let taken = claim(&app, claim_request("Ev-1", FP)).await;
    assert_eq!(decision(&taken), Decision::Claimed);
    assert_eq!(
        seal.seal_count(),
        2,
        "orphan reads, or a takeover of a row with a payload"
    );
    assert_eq!(
        raw::read(&url, NS, "Ev-1", "recovery_payload").await,
        payload
    );

    retry(&app, "Ev-1", &taken.claim_token, Some(1), None)
        .await
        .unwrap();
    assert_eq!(seal.seal_count(), 3, "the error text, and only it");
    app.advance(Duration::from_secs(5));
    let taken = claim(&app, claim_request("Ev-1", FP)).await;
    complete(&app, "Ev-1", &taken.claim_token, b"response")
        .await
        .unwrap();
    assert_eq!(seal.seal_count(), 4, "the response, and only it");
    let replay = claim(&app, claim_request("Ev-1", FP)).await;
    assert_eq!(decision(&replay), Decision::Completed);
    reads(&app).await;
    let bare = claim(&app, claim_request("Ev-2", FP)).await;
    assert_eq!(decision(&bare), Decision::Claimed);
    assert_eq!(
        seal.seal_count(),
        4,
        "a replay, reads, or a claim without a payload"
    );
    app.shutdown().await;
}

conformance!(
    old_format_values_open_and_reseal_converts_them,
    a_value_from_an_earlier_life_is_data_loss,
    a_duplicate_claim_and_every_read_seal_nothing,
);
