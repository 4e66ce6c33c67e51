//! Nothing secret in the clear (docs/DESIGN.md §3.6): a canary API key, claim tokens and payloads
//! driven through every path — success, each error, ListOrphaned, quarantine, and the
//! operator console's sign-in, pages and refusals — never appear in the server's logs at
//! TRACE level, in any error message or console page, or in plaintext in any database
//! column, on both stores.
//!
//! A binary of its own, not a module of `it`: the capture is a global tracing subscriber at
//! TRACE for every crate, and in the shared binary it would record (and slow down) every
//! other test running in the process, for as long as the process lives.

#[path = "it/common/mod.rs"]
#[macro_use]
mod common;

use claimd::auth::generate_key;
use claimd::pb::{
    ClaimRequest, CompleteRequest, GetRequest, HeartbeatRequest, ListOrphanedRequest,
    QuarantineRequest, RetryRequest,
};
use claimd::store::keys::NewApiKey;
use common::app::{Backend, TestApp, secs};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tonic::Request;

const PAYLOAD: &str = "CANARY-payload-5b1e";
const CHECKPOINT: &str = "CANARY-checkpoint-77c0";
const RESPONSE: &str = "CANARY-response-a9d4";
const ERROR: &str = "CANARY-error-3f12";

/// Every log line of this test binary, at TRACE, for every crate.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let sink = buffer.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .init();
        buffer
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn keyed<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    request
}

fn claim(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "hooks".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        recovery_payload: PAYLOAD.as_bytes().to_vec(),
        delivery_attempt: 2,
        wait: None,
    }
}

/// Drives every path with canaries; returns the secrets handed out and every error text.
async fn drive(app: &TestApp, key: &str) -> (Vec<String>, Vec<String>) {
    let mut client = app.new_client().await;
    let mut errors = Vec::new();
    let mut note = |r: Result<(), tonic::Status>| {
        if let Err(status) = r {
            errors.push(format!("{status:?}"));
        }
    };
    let first = client
        .claim(keyed(claim("ev-1"), key))
        .await
        .unwrap()
        .into_inner();
    let t1 = first.claim_token.clone();
    let hb = HeartbeatRequest {
        namespace: "hooks".into(),
        key: "ev-1".into(),
        claim_token: t1.clone(),
        lease_ttl: secs(30, 0),
        checkpoint: Some(CHECKPOINT.as_bytes().to_vec()),
    };
    client.heartbeat(keyed(hb, key)).await.unwrap();
    let retry = |token: &str, k: &str| RetryRequest {
        namespace: "hooks".into(),
        key: k.into(),
        claim_token: token.into(),
        error: ERROR.into(),
        retry_after: secs(5, 0),
        count_attempt: None,
    };
    client.retry(keyed(retry(&t1, "ev-1"), key)).await.unwrap();
    // Errors: the holder's token after its own Retry, a stranger's token, unknown key.
    let complete = |token: &str, k: &str| CompleteRequest {
        namespace: "hooks".into(),
        key: k.into(),
        claim_token: token.into(),
        response: RESPONSE.as_bytes().to_vec(),
    };
    note(
        client
            .complete(keyed(complete(&t1, "ev-1"), key))
            .await
            .map(drop),
    );
    note(
        client
            .complete(keyed(complete(&t1, "nowhere"), key))
            .await
            .map(drop),
    );
    let second = client
        .claim(keyed(claim("ev-2"), key))
        .await
        .unwrap()
        .into_inner();
    let t2 = second.claim_token.clone();
    note(
        client
            .complete(keyed(complete(&t1, "ev-2"), key))
            .await
            .map(drop),
    );
    client
        .complete(keyed(complete(&t2, "ev-2"), key))
        .await
        .unwrap();
    client.claim(keyed(claim("ev-2"), key)).await.unwrap();
    let third = client
        .claim(keyed(claim("ev-3"), key))
        .await
        .unwrap()
        .into_inner();
    let t3 = third.claim_token.clone();
    let q = QuarantineRequest {
        namespace: "hooks".into(),
        key: "ev-3".into(),
        claim_token: t3.clone(),
        error: ERROR.into(),
    };
    client.quarantine(keyed(q, key)).await.unwrap();
    note(client.retry(keyed(retry(&t3, "ev-3"), key)).await.map(drop));
    // Invalid arguments whose values carry canaries.
    let mut bad = claim(&format!("{PAYLOAD}\0"));
    bad.recovery_payload = PAYLOAD.repeat(5000).into_bytes();
    note(client.claim(keyed(bad, key)).await.map(drop));
    note(
        client
            .claim(keyed(claim(&format!("bad key {PAYLOAD}\0")), key))
            .await
            .map(drop),
    );
    let mut bad_ns = claim("ev-4");
    bad_ns.namespace = format!("{PAYLOAD} not a namespace");
    note(client.claim(keyed(bad_ns, key)).await.map(drop));
    note(
        client
            .complete(keyed(complete(&format!("{t1}x"), "ev-1"), key))
            .await
            .map(drop),
    );
    // Wrong credentials: a forged variant of the real key, and no key.
    let forged = format!("{key}x");
    note(client.claim(keyed(claim("ev-5"), &forged)).await.map(drop));
    note(client.claim(claim("ev-5")).await.map(drop));
    // Orphans: a due retry and an expired lease, listed with their payloads.
    client.claim(keyed(claim("ev-6"), key)).await.unwrap();
    app.advance(Duration::from_secs(60));
    let list = ListOrphanedRequest {
        namespace: "hooks".into(),
        page_size: 10,
        ..Default::default()
    };
    let orphans = client
        .list_orphaned(keyed(list, key))
        .await
        .unwrap()
        .into_inner();
    assert!(
        orphans.orphans.len() >= 2,
        "expected the due retry and the expired lease"
    );
    let get = GetRequest {
        namespace: "hooks".into(),
        key: "ev-1".into(),
    };
    let receipt = client
        .get(keyed(get, key))
        .await
        .unwrap()
        .into_inner()
        .receipt
        .unwrap();
    assert_eq!(
        receipt.checkpoint,
        CHECKPOINT.as_bytes(),
        "the canary really was stored"
    );
    (vec![t1, t2, t3], errors)
}

/// Every blob and text column of every row, as the database stores it.
async fn raw_columns(app: &TestApp) -> Vec<Vec<u8>> {
    use sqlx::{Connection, Row};
    let sql =
        "SELECT recovery_payload, checkpoint, response, last_error, fingerprint FROM receipts";
    let keys = "SELECT secret_hash, id, tenant_id FROM api_keys";
    let mut columns = Vec::new();
    let mut take = |row_len: usize, get: &dyn Fn(usize) -> Option<Vec<u8>>| {
        columns.extend((0..row_len).filter_map(get));
    };
    if app.database_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
            .await
            .unwrap();
        for row in sqlx::query(sql).fetch_all(&mut conn).await.unwrap() {
            take(5, &|i| row.try_get::<Option<Vec<u8>>, _>(i).unwrap());
        }
        for row in sqlx::query(keys).fetch_all(&mut conn).await.unwrap() {
            take(1, &|i| row.try_get::<Option<Vec<u8>>, _>(i).unwrap());
        }
    } else {
        let mut conn = sqlx::PgConnection::connect(&app.database_url)
            .await
            .unwrap();
        for row in sqlx::query(sql).fetch_all(&mut conn).await.unwrap() {
            take(5, &|i| row.try_get::<Option<Vec<u8>>, _>(i).unwrap());
        }
        for row in sqlx::query(keys).fetch_all(&mut conn).await.unwrap() {
            take(1, &|i| row.try_get::<Option<Vec<u8>>, _>(i).unwrap());
        }
    }
    columns
}

/// One console request over a fresh connection: the answer's status, head and body.
async fn console(app: &TestApp, method: &str, path: &str, cookie: &str, form: &str) -> String {
    let addr = app.console_addr.expect("the console is on");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Cookie: claimd_console={cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n",
        form.len()
    );
    common::http1::send(&mut stream, &head, form.as_bytes()).await;
    let answer = common::http1::answer(&mut stream, Duration::from_secs(10))
        .await
        .unwrap();
    let head: Vec<String> = answer
        .headers
        .iter()
        .map(|(n, v)| format!("{n}: {v}"))
        .collect();
    format!(
        "{} {}\n{}",
        answer.status,
        head.join("\n"),
        String::from_utf8_lossy(&answer.body)
    )
}

/// The console driven with the canary key: a wrong sign-in, a sign-in, the overview, the
/// list and a receipt's page, a form without its token. Returns the session id and its
/// CSRF token (secrets too) and every page it got.
async fn drive_console(app: &TestApp, key: &str) -> (Vec<String>, Vec<String>) {
    let near_miss = format!("key={key}x");
    let mut pages = vec![console(app, "POST", "/login", "", &near_miss).await];
    let form = serde_urlencoded::to_string([("key", key)]).unwrap();
    let signed_in = console(app, "POST", "/login", "", &form).await;
    let cookie = signed_in
        .split("claimd_console=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let overview = console(app, "GET", "/", &cookie, "").await;
    let at = overview.find("name=\"csrf\" value=\"").expect("a form") + 19;
    let csrf = overview[at..].split('"').next().unwrap().to_owned();
    pages.push(overview);
    for path in [
        "/receipts?namespace=hooks",
        "/receipt?namespace=hooks&key=ev-1",
    ] {
        pages.push(console(app, "GET", path, &cookie, "").await);
    }
    let unsigned = "namespace=hooks&key=ev-1";
    pages.push(console(app, "POST", "/receipt/redrive", &cookie, unsigned).await);
    (vec![cookie, csrf], pages)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

async fn nothing_secret_reaches_logs_errors_or_raw_rows(backend: Backend) {
    let logs = captured_logs();
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.console_listen = Some(([127, 0, 0, 1], 0).into()))
        .spawn()
        .await;
    let generated = generate_key();
    let new = NewApiKey {
        id: generated.id.clone(),
        tenant: "acme".into(),
        secret_hash: generated.secret_hash.clone(),
        label: None,
        namespaces: None,
    };
    app.store().await.create_key(&new).await.unwrap();
    let (tokens, mut errors) = drive(&app, &generated.key).await;
    assert!(errors.len() >= 8, "every error path ran: {errors:?}");
    let (session, pages) = drive_console(&app, &generated.key).await;
    assert!(
        pages.iter().any(|p| p.contains("ev-1")),
        "the console showed the receipt"
    );

    let (_, secret) = claimd::auth::parse_key(&generated.key).unwrap();
    let mut secrets: Vec<&str> = vec![&generated.key, secret, PAYLOAD, CHECKPOINT, RESPONSE, ERROR];
    secrets.extend(tokens.iter().map(String::as_str));
    // The console's pages may show neither the key nor (without --console-show-payloads) a
    // payload, checkpoint or response; the last error is shown to its tenant by design, and
    // the session's CSRF token is in its own pages' forms by design.
    for page in &pages {
        for s in secrets.iter().filter(|s| **s != ERROR) {
            assert!(!page.contains(s), "{s} appears on a console page:\n{page}");
        }
    }
    errors.extend(
        pages
            .iter()
            .filter(|p| !p.starts_with("200") && !p.starts_with("303"))
            .cloned(),
    );
    let logged = logs.lock().unwrap().clone();
    assert!(
        contains(&logged, "hooks"),
        "the log capture works (namespaces are logged)"
    );
    // The console's session id and CSRF token are secrets of the logs too.
    for s in &session {
        assert!(
            !contains(&logged, s),
            "a console session secret appears in the TRACE logs"
        );
    }
    for s in &secrets {
        assert!(!contains(&logged, s), "{s} appears in the TRACE logs");
        for e in &errors {
            assert!(!e.contains(s), "{s} appears in an error: {e}");
        }
    }
    for column in raw_columns(&app).await {
        for s in [&generated.key, secret, PAYLOAD, CHECKPOINT, RESPONSE, ERROR] {
            assert!(!contains(&column, s), "{s} is stored in plaintext");
        }
    }
}

conformance_every_door!(nothing_secret_reaches_logs_errors_or_raw_rows);
