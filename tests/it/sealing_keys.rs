//! Seal keys as an operator handles them, with the real binary where it matters: rotation
//! (a new key in front, `claimd reseal`, the old key removed), PostgreSQL refusing to start
//! without keys unless plaintext is allowed (and `reseal` sealing what it stored), and the
//! embedded default's generated key file.

use crate::common::app::{Backend, TestApp, connect, decision};
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use crate::common::raw::{self, TEST_SEAL_KEY};
use claimd::pb::{self, Decision};
use claimd::seal::{KeyId, KeyRing, Sealer, encode_key, generate_key, stored_key_id};
use std::collections::BTreeMap;
use std::sync::Arc;

const NS: &str = "rotation";

fn sealer(keys: &[[u8; 32]]) -> Arc<Sealer> {
    Arc::new(Sealer::with_keys(
        KeyRing::new(keys).expect("valid keys"),
        false,
    ))
}

/// A claimd over the existing database at `url`, sealing with `keys` (the first seals).
async fn serving(url: &str, keys: &[[u8; 32]]) -> TestApp {
    let seal = sealer(keys);
    TestApp::builder()
        .database_url(url)
        .configure(|c| c.store.seal = seal)
        .spawn()
        .await
}

fn claim_request(key: &str, payload: &[u8]) -> pb::ClaimRequest {
    pb::ClaimRequest {
        namespace: NS.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        recovery_payload: payload.to_vec(),
        ..Default::default()
    }
}

async fn claim_token(app: &TestApp, key: &str, payload: &[u8]) -> String {
    let reply = app.client.clone().claim(claim_request(key, payload)).await;
    let reply = reply.expect("Claim").into_inner();
    assert_eq!(decision(&reply), Decision::Claimed, "{key}");
    reply.claim_token
}

/// Receipts with every sealed field in use; returns what Get says about each.
async fn seed(app: &TestApp) -> BTreeMap<String, pb::Receipt> {
    let mut c = app.client.clone();
    for i in 0..5 {
        let key = format!("Ev-{i}");
        let token = claim_token(app, &key, format!("payload {i}").as_bytes()).await;
        let (namespace, claim_token) = (NS.to_owned(), token.clone());
        let beat = pb::HeartbeatRequest {
            namespace,
            key: key.clone(),
            claim_token,
            checkpoint: Some(format!("checkpoint {i}").into_bytes()),
            ..Default::default()
        };
        c.heartbeat(beat).await.expect("Heartbeat");
        match i {
            0 | 1 => {
                let done = pb::CompleteRequest {
                    namespace: NS.into(),
                    key: key.clone(),
                    claim_token: token,
                    response: format!("response {i}").into_bytes(),
                };
                c.complete(done).await.expect("Complete");
            }
            2 => {
                let dead = pb::QuarantineRequest {
                    namespace: NS.into(),
                    key: key.clone(),
                    claim_token: token,
                    error: format!("error {i}"),
                };
                c.quarantine(dead).await.expect("Quarantine");
            }
            _ => {}
        }
    }
    read_all(app, 5).await
}

async fn read_all(app: &TestApp, n: usize) -> BTreeMap<String, pb::Receipt> {
    let mut all = BTreeMap::new();
    for i in 0..n {
        let key = format!("Ev-{i}");
        let receipt = app.get(NS, &key).await.expect("readable");
        all.insert(key, receipt);
    }
    all
}

/// The key ids of every stored sealed value.
async fn stored_key_ids(url: &str) -> Vec<Option<KeyId>> {
    let rows = raw::rows(url).await;
    let blobs = rows.iter().flat_map(|r| r.blobs.iter().flatten());
    blobs.map(|b| stored_key_id(b)).collect()
}

/// Runs `claimd reseal` on `url` with `keys` in CLAIMD_SEAL_KEYS; returns its log.
fn reseal(url: &str, keys: &str, extra: &[&str]) -> String {
    let output = claimd()
        .args(["reseal", "--database-url", url])
        .args(extra)
        .env("CLAIMD_SEAL_KEYS", keys)
        .output()
        .expect("claimd reseal runs");
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "reseal failed: {log}");
    log
}

async fn rotation_keeps_old_rows_readable_and_reseal_moves_them_to_the_new_key(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    rotation_and_reseal_on(&url).await;
}

/// The rotation test on the database at `url` (empty; also run on Citus, `citus::surfaces`).
pub(crate) async fn rotation_and_reseal_on(url: &str) {
    let url = url.to_owned();
    let (old, new) = (generate_key(), generate_key());
    let app = serving(&url, &[old]).await;
    let seeded = seed(&app).await;
    app.shutdown().await;

    // A new key in front: old rows still read, new writes use the new key.
    let app = serving(&url, &[new, old]).await;
    assert_eq!(read_all(&app, 5).await, seeded);
    claim_token(&app, "Ev-new", b"sealed under the new key").await;
    let stored = raw::read(&url, NS, "Ev-new", "recovery_payload")
        .await
        .unwrap();
    assert_eq!(stored_key_id(&stored), Some(KeyId::of(&new)));
    assert!(stored_key_ids(&url).await.contains(&Some(KeyId::of(&old))));

    // reseal, two rows per batch, while the server runs.
    let keys = format!("{},{}", encode_key(&new), encode_key(&old));
    let log = reseal(&url, &keys, &["--batch-size", "2"]);
    assert!(log.contains("scanned=6 rewritten=5 unreadable=0"), "{log}");
    let ids = stored_key_ids(&url).await;
    assert!(ids.iter().all(|id| *id == Some(KeyId::of(&new))), "{ids:?}");
    // Two responses (Complete drops the rest), payload, checkpoint and error of the
    // quarantined one, payload and checkpoint of two in flight, and Ev-new's payload.
    assert_eq!(ids.len(), 2 + 3 + 2 * 2 + 1);
    // Running it again has nothing left to do.
    let log = reseal(&url, &keys, &["--batch-size", "4"]);
    assert!(log.contains("scanned=6 rewritten=0 unreadable=0"), "{log}");
    assert_eq!(read_all(&app, 5).await, seeded);
    app.shutdown().await;

    // The old key can go.
    let app = serving(&url, &[new]).await;
    assert_eq!(read_all(&app, 5).await, seeded);
    app.shutdown().await;
}

async fn reseal_leaves_rows_it_cannot_open_as_they_are_and_exits_non_zero(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let lost = generate_key();
    let app = serving(&url, &[lost]).await;
    claim_token(&app, "Ev-lost", b"sealed under a key that is gone").await;
    app.shutdown().await;
    let before = raw::rows(&url).await;

    let output = claimd()
        .args(["reseal", "--database-url", &url])
        .env("CLAIMD_SEAL_KEYS", TEST_SEAL_KEY)
        .output()
        .expect("claimd reseal runs");
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{log}");
    assert!(
        log.contains("unreadable=1") && log.contains("Ev-lost"),
        "{log}"
    );
    assert!(!log.contains("sealed under a key that is gone"), "{log}");
    let after = raw::rows(&url).await;
    assert_eq!(
        after[0].blobs, before[0].blobs,
        "reseal changed a row it could not open"
    );
}

async fn a_dry_run_that_counts_unreadable_rows_exits_non_zero_too(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let lost = generate_key();
    let app = serving(&url, &[lost]).await;
    claim_token(&app, "Ev-lost", b"sealed under a key that is gone").await;
    app.shutdown().await;
    let before = raw::rows(&url).await;

    let output = claimd()
        .args(["reseal", "--dry-run", "--database-url", &url])
        .env("CLAIMD_SEAL_KEYS", TEST_SEAL_KEY)
        .output()
        .expect("claimd reseal --dry-run runs");
    let (stdout, log) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    // A pre-flight check in a script: the counts are printed, and the exit status fails it.
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{log}");
    assert!(stdout.contains("unreadable=1"), "{stdout}");
    assert!(log.contains("did not open"), "{log}");
    assert_eq!(raw::rows(&url).await[0].blobs, before[0].blobs);
}

/// The keys of every orphan ListOrphaned lists for the namespace, an hour from now.
async fn orphans(app: &TestApp) -> Vec<String> {
    app.advance(std::time::Duration::from_secs(3600));
    let request = pb::ListOrphanedRequest {
        namespace: NS.into(),
        page_size: 1,
        ..Default::default()
    };
    let (mut keys, mut request) = (Vec::new(), request);
    loop {
        let page = app.client.clone().list_orphaned(request.clone()).await;
        let page = page.expect("ListOrphaned").into_inner();
        keys.extend(page.orphans.into_iter().map(|o| o.receipt.unwrap().key));
        if page.next_page_token.is_empty() {
            return keys;
        }
        request.page_token = page.next_page_token;
    }
}

async fn an_orphan_under_a_removed_key_is_skipped_and_listed_again_once_the_key_is_back(
    backend: Backend,
) {
    let (url, _dir) = backend.fresh_database().await;
    let (old, new) = (generate_key(), generate_key());
    let app = serving(&url, &[old]).await;
    claim_token(&app, "Ev-1-old", b"sealed under the old key").await;
    app.shutdown().await;

    // The old key removed too early: the orphan is not listed, and not quarantined either.
    let app = serving(&url, &[new]).await;
    claim_token(&app, "Ev-2-new", b"sealed under the new key").await;
    assert_eq!(orphans(&app).await, ["Ev-2-new"]);
    assert_eq!(orphans(&app).await, ["Ev-2-new"], "skipped again, not lost");
    assert_eq!(raw::row(&url, NS, "Ev-1-old").await.state, "processing");
    app.shutdown().await;

    // The key back in the ring: the orphan is listed with its payload.
    let app = serving(&url, &[new, old]).await;
    assert_eq!(orphans(&app).await, ["Ev-1-old", "Ev-2-new"]);
    let taken = app
        .client
        .clone()
        .claim(claim_request("Ev-1-old", b""))
        .await;
    let taken = taken.expect("Claim of the orphan").into_inner();
    assert_eq!(decision(&taken), Decision::Claimed);
    let receipt = taken.receipt.expect("a receipt");
    assert_eq!(receipt.recovery_payload, b"sealed under the old key");
    app.shutdown().await;
}

conformance!(
    rotation_keeps_old_rows_readable_and_reseal_moves_them_to_the_new_key,
    reseal_leaves_rows_it_cannot_open_as_they_are_and_exits_non_zero,
    a_dry_run_that_counts_unreadable_rows_exits_non_zero_too,
    an_orphan_under_a_removed_key_is_skipped_and_listed_again_once_the_key_is_back,
);

fn serve(addr: std::net::SocketAddr, url: &str) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--database-url",
        url,
    ]);
    cmd
}

async fn get_payload(addr: std::net::SocketAddr, key: &str) -> Vec<u8> {
    let request = pb::GetRequest {
        namespace: NS.into(),
        key: key.into(),
    };
    let reply = connect(addr).await.get(request).await.expect("Get");
    reply.into_inner().receipt.unwrap().recovery_payload
}

async fn claim_at(addr: std::net::SocketAddr, key: &str, payload: &[u8]) {
    let reply = connect(addr).await.claim(claim_request(key, payload)).await;
    assert_eq!(
        reply.expect("Claim").into_inner().decision(),
        Decision::Claimed
    );
}

#[tokio::test]
async fn postgres_without_seal_keys_refuses_to_start_unless_plaintext_is_allowed() {
    let url = crate::common::pg::fresh_database().await;
    let mut refused = Claimd::spawn(serve(free_addr(), &url));
    let status = refused.wait_for_exit(PATIENCE).await;
    let status = status.unwrap_or_else(|| panic!("claimd kept running:\n{}", refused.log()));
    let log = refused.log();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("CLAIMD_SEAL_KEYS") && log.contains("--allow-plaintext-payloads"),
        "{log}"
    );

    let addr = free_addr();
    let mut cmd = serve(addr, &url);
    cmd.arg("--allow-plaintext-payloads");
    let server = Claimd::start(cmd, addr).await;
    claim_at(addr, "Ev-plain", b"stored as it is").await;
    assert!(server.terminate().await.success());
    let stored = raw::read(&url, NS, "Ev-plain", "recovery_payload").await;
    assert_eq!(stored.as_deref(), Some(&b"\x00stored as it is"[..]));

    // Moving to sealed storage: reseal with a key, accepting the plaintext rows once.
    reseal(&url, TEST_SEAL_KEY, &["--allow-plaintext-payloads"]);
    let stored = raw::read(&url, NS, "Ev-plain", "recovery_payload")
        .await
        .unwrap();
    assert!(!raw::holds(&stored, b"stored as it is"));
    let ring = KeyRing::parse_list(TEST_SEAL_KEY).unwrap();
    assert_eq!(stored_key_id(&stored), Some(ring.current()));
    let addr = free_addr();
    let mut cmd = serve(addr, &url);
    cmd.env("CLAIMD_SEAL_KEYS", TEST_SEAL_KEY);
    let server = Claimd::start(cmd, addr).await;
    assert_eq!(get_payload(addr, "Ev-plain").await, b"stored as it is");
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn the_embedded_default_generates_a_private_key_file_on_first_start_and_reuses_it() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    let start = || {
        let addr = free_addr();
        let mut cmd = claimd();
        cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(&data);
        (cmd, addr)
    };
    let (cmd, addr) = start();
    let server = Claimd::start(cmd, addr).await;
    claim_at(addr, "Ev-1", b"embedded payload").await;
    assert!(server.terminate().await.success());

    let key_file = data.join("seal.key");
    let text = std::fs::read_to_string(&key_file).expect("a key file was generated");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }
    let url = format!("sqlite://{}", data.join("claimd.db").display());
    let stored = raw::read(&url, NS, "Ev-1", "recovery_payload")
        .await
        .unwrap();
    let ring = KeyRing::parse_file(&text).expect("a valid key file");
    assert_eq!(stored_key_id(&stored), Some(ring.current()));

    let (cmd, addr) = start();
    let server = Claimd::start(cmd, addr).await;
    assert_eq!(get_payload(addr, "Ev-1").await, b"embedded payload");
    assert!(server.terminate().await.success());
    assert_eq!(
        std::fs::read_to_string(&key_file).unwrap(),
        text,
        "the key file changed"
    );
}
