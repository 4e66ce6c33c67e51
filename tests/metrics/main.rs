//! Prometheus metrics through the real server and a real HTTP scrape of `/metrics`: a
//! scripted sequence of calls moves every counter by exactly what it should, every line of
//! the exposition parses, the orphan gauge sees an expired lease and a due retry, the
//! namespace label is bounded, store failures are counted, waiting Claims are counted while
//! they wait and by how their wait ended, tenant quotas' refusals and parked Claims are
//! counted by tenant (`quotas.rs`), and no other tenant id, key, token or payload appears —
//! on both stores.
//!
//! The recorder is global to the process, so these tests take turns ([`SERIAL`]) and
//! compare scrapes taken before and after. That is also why this is a binary of its own, not
//! a module of `it`: every in-process claimd there records into the same recorder, and the
//! counters would move by whatever the other tests running at the time did.

#[path = "../it/common/mod.rs"]
#[macro_use]
mod common;
mod quotas;
mod scrape;

use claimd::auth::generate_key;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, ClaimResponse, CompleteRequest, GetRequest, RetryRequest};
use claimd::store::keys::NewApiKey;
use common::app::{Backend, TestApp, secs};
use scrape::{Exposition, Moves};
use std::time::Duration;
use tokio::sync::Mutex;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// One test at a time: they share the process's recorder.
static SERIAL: Mutex<()> = Mutex::const_new(());

const TENANT: &str = "tenant-canary-9c41";
const PAYLOAD: &str = "CANARY-payload-e7d2";
const DECISIONS: &str = "claimd_claim_decisions_total";
const CALLS: &str = "claimd_rpc_duration_seconds_count";

/// A client calling with an API key of [`TENANT`] (from then on every call needs a key).
struct Caller {
    client: ClaimServiceClient<Channel>,
    key: String,
}

impl Caller {
    async fn new(app: &TestApp) -> Caller {
        let generated = generate_key();
        let new = NewApiKey {
            id: generated.id.clone(),
            tenant: TENANT.into(),
            secret_hash: generated.secret_hash.clone(),
            label: None,
            namespaces: None,
        };
        let store = app.store().await;
        store.create_key(&new).await.expect("key created");
        let client = app.new_client().await;
        Caller {
            client,
            key: generated.key,
        }
    }

    fn keyed<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        let bearer = format!("Bearer {}", self.key)
            .parse()
            .expect("ASCII metadata");
        request.metadata_mut().insert("authorization", bearer);
        request
    }

    async fn claim(&mut self, key: &str, lease: i64, attempt: u32) -> Result<String, Status> {
        let request = self.keyed(claim("orders", key, lease, attempt));
        let response = self.client.claim(request).await?;
        Ok(response.into_inner().claim_token)
    }
}

fn claim(namespace: &str, key: &str, lease: i64, delivery_attempt: u32) -> ClaimRequest {
    ClaimRequest {
        namespace: namespace.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(lease, 0),
        recovery_payload: PAYLOAD.as_bytes().to_vec(),
        delivery_attempt,
        wait: None,
    }
}

async fn scrape(app: &TestApp) -> (Exposition, String) {
    scrape::metrics(app.metrics_addr.expect("metrics are on in tests")).await
}

/// Scrapes until the orphan gauge shows `lease_expired` and `retry_due` (it is refreshed
/// every 50 ms here), failing after 10 s.
async fn wait_for_orphans(app: &TestApp, lease_expired: f64, retry_due: f64) -> Exposition {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (now, _) = scrape(app).await;
        let seen = (
            now.value("claimd_orphans", &[("reason", "LEASE_EXPIRED")]),
            now.value("claimd_orphans", &[("reason", "RETRY_DUE")]),
        );
        if seen == (lease_expired, retry_due) {
            return now;
        }
        assert!(tokio::time::Instant::now() < deadline, "orphans {seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The script: three claims (one lease runs out, one retry is scheduled), two redeliveries
/// (in flight, then completed), a completion, an invalid claim, a Get of nothing and a call
/// without a key. Returns the token handed out first.
async fn script(app: &TestApp, caller: &mut Caller) -> String {
    let token = caller.claim("evt-canary-1", 30, 0).await.expect("claimed");
    caller
        .claim("evt-canary-1", 30, 1)
        .await
        .expect("in flight");
    caller
        .claim("evt-canary-2", 1, 0)
        .await
        .expect("claimed, lease of 1 s");
    let due = caller.claim("evt-canary-3", 30, 0).await.expect("claimed");
    let retry = RetryRequest {
        namespace: "orders".into(),
        key: "evt-canary-3".into(),
        claim_token: due,
        error: "busy".into(),
        retry_after: secs(1, 0),
        count_attempt: None,
    };
    caller
        .client
        .retry(caller.keyed(retry))
        .await
        .expect("retry");
    let complete = CompleteRequest {
        namespace: "orders".into(),
        key: "evt-canary-1".into(),
        claim_token: token.clone(),
        response: Vec::new(),
    };
    caller
        .client
        .complete(caller.keyed(complete))
        .await
        .expect("completed");
    caller
        .claim("evt-canary-1", 30, 2)
        .await
        .expect("completed");
    let invalid = caller.claim("", 30, 0).await.unwrap_err();
    assert_eq!(invalid.code(), Code::InvalidArgument);
    let nothing = GetRequest {
        namespace: "orders".into(),
        key: "evt-nowhere".into(),
    };
    let nothing = caller.client.get(caller.keyed(nothing)).await.unwrap_err();
    assert_eq!(nothing.code(), Code::NotFound);
    let mut anonymous = app.client.clone();
    let refused = anonymous
        .claim(claim("orders", "evt-canary-4", 30, 0))
        .await;
    assert_eq!(refused.unwrap_err().code(), Code::Unauthenticated);
    app.advance(Duration::from_secs(5));
    token
}

async fn scripted_calls_move_the_metrics_exactly(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.metrics_interval = Duration::from_millis(50))
        .spawn()
        .await;
    let mut caller = Caller::new(&app).await;
    let (before, _) = scrape(&app).await;
    let token = script(&app, &mut caller).await;
    let after = wait_for_orphans(&app, 1.0, 1.0).await;
    let (_, text) = scrape(&app).await;
    let moves = Moves { before, after };

    let decided = |d: &str| moves.of(DECISIONS, &[("namespace", "orders"), ("decision", d)]);
    assert_eq!(decided("CLAIMED"), 3.0);
    assert_eq!(decided("IN_FLIGHT"), 1.0);
    assert_eq!(decided("COMPLETED"), 1.0);
    for other in ["RETRY_SCHEDULED", "QUARANTINED", "CONFLICT"] {
        assert_eq!(decided(other), 0.0, "{other}");
    }
    let hints = moves.of("claimd_redelivery_hints_total", &[("namespace", "orders")]);
    assert_eq!(hints, 2.0);
    let calls = |method: &str, code: &str| moves.of(CALLS, &[("method", method), ("code", code)]);
    assert_eq!(calls("Claim", "OK"), 5.0);
    assert_eq!(calls("Claim", "INVALID_ARGUMENT"), 1.0);
    assert_eq!(
        calls("Claim", "UNAUTHENTICATED"),
        1.0,
        "refused by the auth layer"
    );
    assert_eq!(calls("Retry", "OK"), 1.0);
    assert_eq!(calls("Complete", "OK"), 1.0);
    assert_eq!(calls("Get", "NOT_FOUND"), 1.0);
    let inf = [("method", "Claim"), ("code", "OK"), ("le", "+Inf")];
    let bucket = moves.of("claimd_rpc_duration_seconds_bucket", &inf);
    assert_eq!(bucket, 5.0, "the +Inf bucket counts every call");
    let errors = moves.after.all("claimd_store_errors_total");
    for kind in claimd::telemetry::STORE_ERROR_KINDS {
        assert_eq!(
            moves.of("claimd_store_errors_total", &[("kind", kind)]),
            0.0
        );
        assert!(
            errors.iter().any(|s| s.labels["kind"] == kind),
            "{kind} at 0"
        );
    }
    let pool = moves.after.all("claimd_db_pool_connections");
    assert_eq!(pool.len(), 2, "in_use and idle: {pool:?}");
    assert!(pool.iter().map(|s| s.value).sum::<f64>() >= 1.0, "{pool:?}");

    let types = &moves.after.types;
    assert_eq!(types[DECISIONS], "counter");
    assert_eq!(types["claimd_rpc_duration_seconds"], "histogram");
    assert_eq!(types["claimd_orphans"], "gauge");
    let key = caller.key.as_str();
    for secret in [TENANT, key, &token, PAYLOAD, "evt-canary", "evt-nowhere"] {
        assert!(!text.contains(secret), "{secret} appears in the exposition");
    }
    let elsewhere = scrape::get(app.metrics_addr.expect("on"), "/other").await;
    assert_eq!(elsewhere.status, 404);
    app.shutdown().await;
}

async fn the_namespace_label_is_bounded(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.metrics_namespace_limit = 2;
            let named = claimd::domain::Policy::default();
            c.policies.namespaces.insert("stripe".into(), named);
        })
        .spawn()
        .await;
    let (before, _) = scrape(&app).await;
    let namespaces = ["bounded-a", "bounded-b", "bounded-c", "bounded-d", "stripe"];
    for ns in namespaces.into_iter().chain(["bounded-a"]) {
        let _: ClaimResponse = app.claim(ns, &format!("evt-{ns}"), b"fp").await;
    }
    let (after, _) = scrape(&app).await;
    let moves = Moves { before, after };
    let decided = |ns: &str, d: &str| moves.of(DECISIONS, &[("namespace", ns), ("decision", d)]);
    assert_eq!(decided("bounded-a", "CLAIMED"), 1.0);
    assert_eq!(decided("bounded-a", "IN_FLIGHT"), 1.0);
    assert_eq!(decided("bounded-b", "CLAIMED"), 1.0);
    assert_eq!(
        decided("other", "CLAIMED"),
        2.0,
        "c and d are past the limit"
    );
    assert_eq!(
        decided("stripe", "CLAIMED"),
        1.0,
        "named in the policies: no limit"
    );
    for past in ["bounded-c", "bounded-d"] {
        let samples = &moves.after.samples;
        let labelled = samples.iter().any(|s| s.labels.values().any(|v| v == past));
        assert!(!labelled, "{past} became a label");
    }
    app.shutdown().await;
}

async fn store_failures_are_counted_by_kind(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let app = TestApp::builder().backend(backend).spawn().await;
    let request = claim("sealed-ns", "evt-tampered", 30, 0);
    app.client.clone().claim(request).await.expect("claimed");
    let url = &app.database_url;
    common::raw::flip_bit(url, "sealed-ns", "evt-tampered", "recovery_payload").await;
    let (before, _) = scrape(&app).await;
    let status = app.get("sealed-ns", "evt-tampered").await.unwrap_err();
    assert_eq!(status.code(), Code::DataLoss);
    let (after, _) = scrape(&app).await;
    let moves = Moves { before, after };
    assert_eq!(
        moves.of("claimd_store_errors_total", &[("kind", "sealed")]),
        1.0
    );
    assert_eq!(
        moves.of(CALLS, &[("method", "Get"), ("code", "DATA_LOSS")]),
        1.0
    );
    app.shutdown().await;
}

async fn metrics_off_binds_nothing(backend: Backend) {
    // Its calls still reach the process's recorder, which the others compare.
    let _turn = SERIAL.lock().await;
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.metrics_listen = None)
        .spawn()
        .await;
    assert_eq!(app.metrics_addr, None);
    app.claim("off", "evt-1", b"fp").await;
    app.shutdown().await;
}

/// Scrapes until `claimd_claim_waiting` reads `n`, failing after 10 s.
async fn wait_for_waiting(app: &TestApp, n: f64) -> Exposition {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (seen, _) = scrape(app).await;
        if seen.value("claimd_claim_waiting", &[]) == n {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "claimd_claim_waiting never read {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A Claim of `key` that waits up to `wait_secs`.
fn waiting(key: &str, wait_secs: i64) -> ClaimRequest {
    ClaimRequest {
        wait: secs(wait_secs, 0),
        ..claim("orders", key, 30, 0)
    }
}

async fn waiting_claims_are_counted_while_they_wait_and_by_how_they_ended(backend: Backend) {
    let _turn = SERIAL.lock().await;
    let app = TestApp::builder().backend(backend).spawn().await;
    let (before, _) = scrape(&app).await;
    let holder = app
        .client
        .clone()
        .claim(claim("orders", "evt-w", 30, 0))
        .await;
    let token = holder.expect("claimed").into_inner().claim_token;
    // One waiter the holder's Complete answers, one whose caller gives up.
    let mut settled_client = app.new_client().await;
    let settled = tokio::spawn(async move { settled_client.claim(waiting("evt-w", 30)).await });
    let mut cancelled_client = app.new_client().await;
    let cancelled = tokio::spawn(async move { cancelled_client.claim(waiting("evt-w", 30)).await });
    wait_for_waiting(&app, 2.0).await;
    cancelled.abort();
    wait_for_waiting(&app, 1.0).await;
    let done = CompleteRequest {
        namespace: "orders".into(),
        key: "evt-w".into(),
        claim_token: token.clone(),
        response: b"r".to_vec(),
    };
    app.client.clone().complete(done).await.expect("completed");
    let answer = settled.await.unwrap().expect("answered").into_inner();
    assert_eq!(answer.decision(), claimd::pb::Decision::Completed);
    // And one that need not wait is not counted at all.
    let again = app.client.clone().claim(waiting("evt-w", 30)).await;
    assert_eq!(
        again.unwrap().into_inner().decision(),
        claimd::pb::Decision::Completed
    );
    let after = wait_for_waiting(&app, 0.0).await;
    let moves = Moves { before, after };
    let ended = |how: &str| moves.of("claimd_claim_waits_total", &[("ended", how)]);
    assert_eq!(ended("settled"), 1.0);
    assert_eq!(ended("abandoned"), 1.0, "the cancelled caller");
    for how in ["claimed", "timed_out", "drained", "full"] {
        assert_eq!(ended(how), 0.0, "{how}");
    }
    let woken = moves.of("claimd_claim_wakeups_total", &[("cause", "settled")]);
    assert!(woken >= 1.0, "the Complete woke the waiter: {woken}");
    assert_eq!(moves.after.types["claimd_claim_waiting"], "gauge");
    app.shutdown().await;
}

conformance_every_door!(
    scripted_calls_move_the_metrics_exactly,
    the_namespace_label_is_bounded,
    store_failures_are_counted_by_kind,
    metrics_off_binds_nothing,
    waiting_claims_are_counted_while_they_wait_and_by_how_they_ended,
);
