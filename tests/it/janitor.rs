//! The janitor through the real server, on both stores: retention and response_retention
//! per namespace, bounded statements, unfinished receipts never pruned, tombstones that
//! still answer COMPLETED, a pruned key that is new again, the background task and
//! reloaded policies. Time moves with `app.advance`, never by sleeping.

use crate::common::app::{Backend, TestApp, decision, secs};
use chrono::TimeDelta;
use claimd::domain::{Policies, Policy};
use claimd::janitor::{Pass, PassReport};
use claimd::pb::{self, Decision, State};
use std::time::{Duration, Instant};
use tonic::Code;

/// A namespace with short retentions: responses kept 1 day, receipts 2 days.
const SHORT: &str = "slack-events";
/// A namespace on the default policy (30 days for both).
const LONG: &str = "stripe-webhooks";
const DAY: Duration = Duration::from_secs(86_400);
const FP: &[u8] = b"sha256-of-body";

fn policies() -> Policies {
    let mut policies = Policies::default();
    let short = Policy {
        retention: TimeDelta::days(2),
        response_retention: TimeDelta::days(1),
        ..Policy::default()
    };
    policies.namespaces.insert(SHORT.into(), short);
    policies
}

/// A claimd with [`policies`], the background janitor off and `batch` rows per statement.
async fn spawn(backend: Backend, batch: u32) -> TestApp {
    TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.policies = policies();
            c.janitor.interval = Duration::ZERO;
            c.janitor.batch = batch;
        })
        .spawn()
        .await
}

/// One janitor pass, which must get the lock.
async fn pass(app: &TestApp) -> PassReport {
    match app.janitor.run_once().await.expect("janitor pass") {
        Pass::Ran(report) => report,
        Pass::Skipped => panic!("the only janitor was refused the lock"),
    }
}

async fn claim(app: &TestApp, ns: &str, key: &str) -> String {
    let reply = app.claim(ns, key, FP).await;
    assert_eq!(decision(&reply), Decision::Claimed, "{ns}/{key}: {reply:?}");
    reply.claim_token
}

async fn completed(app: &TestApp, ns: &str, key: &str, response: &[u8]) {
    let claim_token = claim(app, ns, key).await;
    let request = pb::CompleteRequest {
        namespace: ns.into(),
        key: key.into(),
        claim_token,
        response: response.to_vec(),
    };
    app.client
        .clone()
        .complete(request)
        .await
        .expect("Complete");
}

async fn quarantined(app: &TestApp, ns: &str, key: &str) {
    let claim_token = claim(app, ns, key).await;
    let request = pb::QuarantineRequest {
        namespace: ns.into(),
        key: key.into(),
        claim_token,
        error: "poison event".into(),
    };
    app.client
        .clone()
        .quarantine(request)
        .await
        .expect("Quarantine");
}

async fn retry_wait(app: &TestApp, ns: &str, key: &str) {
    let claim_token = claim(app, ns, key).await;
    let request = pb::RetryRequest {
        namespace: ns.into(),
        key: key.into(),
        claim_token,
        error: "upstream 503".into(),
        retry_after: secs(60, 0),
        count_attempt: None,
    };
    app.client.clone().retry(request).await.expect("Retry");
}

async fn state(app: &TestApp, ns: &str, key: &str) -> Result<State, Code> {
    match app.get(ns, key).await {
        Ok(r) => Ok(r.state()),
        Err(status) => Err(status.code()),
    }
}

async fn retention_and_response_retention_follow_each_namespace_policy(backend: Backend) {
    let app = spawn(backend, 500).await;
    completed(&app, SHORT, "done", b"short reply").await;
    quarantined(&app, SHORT, "dead").await;
    completed(&app, LONG, "done", b"long reply").await;
    quarantined(&app, LONG, "dead").await;
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (0, 0), "{report:?}");

    app.advance(DAY + Duration::from_secs(1));
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (0, 1), "{report:?}");
    let tombstone = app.get(SHORT, "done").await.expect("a tombstone stays");
    assert_eq!(tombstone.state(), State::Completed);
    assert!(tombstone.response.is_empty(), "the response was kept");
    let kept = app.get(LONG, "done").await.expect("the default keeps it");
    assert_eq!(kept.response, b"long reply");

    app.advance(DAY);
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (2, 0), "{report:?}");
    for key in ["done", "dead"] {
        assert_eq!(state(&app, SHORT, key).await, Err(Code::NotFound), "{key}");
    }
    assert_eq!(state(&app, LONG, "done").await, Ok(State::Completed));
    assert_eq!(state(&app, LONG, "dead").await, Ok(State::Quarantined));

    app.advance(28 * DAY);
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (2, 0), "{report:?}");
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

async fn no_statement_prunes_more_than_the_batch(backend: Backend) {
    let app = spawn(backend, 2).await;
    for i in 0..5 {
        completed(&app, SHORT, &format!("evt-{i}"), b"reply").await;
    }
    app.advance(DAY + Duration::from_secs(1));
    let report = pass(&app).await;
    assert_eq!(report.stripped, 5, "{report:?}");
    assert_eq!(report.largest_statement, 2, "{report:?}");
    // Deleting found nothing; stripping took 2 + 2 + 1.
    assert_eq!(report.statements, 4, "{report:?}");

    app.advance(DAY);
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (5, 0), "{report:?}");
    assert_eq!(report.largest_statement, 2, "{report:?}");
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

async fn processing_and_retry_wait_are_never_pruned_however_old(backend: Backend) {
    let app = spawn(backend, 500).await;
    claim(&app, SHORT, "working").await;
    retry_wait(&app, SHORT, "waiting").await;
    completed(&app, SHORT, "done", b"reply").await;
    app.advance(400 * DAY);
    let report = pass(&app).await;
    assert_eq!((report.deleted, report.stripped), (1, 0), "{report:?}");
    assert_eq!(state(&app, SHORT, "working").await, Ok(State::Processing));
    assert_eq!(state(&app, SHORT, "waiting").await, Ok(State::RetryWait));
    assert_eq!(app.receipt_rows().await, 2);
    app.shutdown().await;
}

async fn a_tombstone_answers_completed_without_the_response(backend: Backend) {
    let app = spawn(backend, 500).await;
    completed(&app, SHORT, "Ev1", b"200 ok").await;
    completed(&app, SHORT, "Ev2-empty", b"").await;
    let before = app.get(SHORT, "Ev1").await.expect("completed");
    app.advance(DAY + Duration::from_secs(1));
    assert_eq!(pass(&app).await.stripped, 1);
    let empty = app.get(SHORT, "Ev2-empty").await.expect("completed");
    assert_eq!(
        (empty.response.len(), empty.response_pruned_at),
        (0, None),
        "an empty response that Complete stored is not a tombstone"
    );

    let replay = app.claim(SHORT, "Ev1", FP).await;
    assert_eq!(decision(&replay), Decision::Completed, "{replay:?}");
    assert!(replay.claim_token.is_empty());
    let receipt = replay.receipt.expect("a receipt");
    assert!(receipt.response.is_empty());
    let got = app.get(SHORT, "Ev1").await.expect("the tombstone");
    assert_eq!(got, receipt);
    assert_eq!(
        before.response_pruned_at, None,
        "a kept response is not marked"
    );
    let pruned_at = got
        .response_pruned_at
        .expect("a tombstone says when it lost its response");
    let completed_at = before.completed_at.expect("completed").seconds;
    assert!(
        pruned_at.seconds >= completed_at + DAY.as_secs() as i64,
        "{pruned_at:?}"
    );
    let expected = pb::Receipt {
        response: Vec::new(),
        response_pruned_at: Some(pruned_at),
        ..before
    };
    assert_eq!(got, expected, "only the response changed, and it says so");
    let other = app.claim(SHORT, "Ev1", b"another body").await;
    assert_eq!(
        decision(&other),
        Decision::Conflict,
        "the fingerprint is kept"
    );
    app.shutdown().await;
}

async fn after_retention_the_key_is_gone_and_a_claim_starts_over(backend: Backend) {
    let app = spawn(backend, 500).await;
    completed(&app, LONG, "Ev1", b"200 ok").await;
    app.advance(30 * DAY + Duration::from_secs(1));
    assert_eq!(pass(&app).await.deleted, 1);
    assert_eq!(state(&app, LONG, "Ev1").await, Err(Code::NotFound));
    let again = app.claim(LONG, "Ev1", b"a new body").await;
    assert_eq!(decision(&again), Decision::Claimed, "{again:?}");
    let receipt = again.receipt.expect("a receipt");
    assert_eq!((receipt.attempt, receipt.state()), (1, State::Processing));
    app.shutdown().await;
}

async fn a_replaced_policy_sets_the_next_passes_cutoffs(backend: Backend) {
    let app = spawn(backend, 500).await;
    completed(&app, LONG, "Ev1", b"200 ok").await;
    app.advance(Duration::from_secs(3601));
    assert_eq!(pass(&app).await.deleted, 0);
    let mut next = policies();
    next.default.retention = TimeDelta::hours(1);
    next.default.response_retention = TimeDelta::hours(1);
    app.policies.replace(next);
    assert_eq!(pass(&app).await.deleted, 1);
    app.shutdown().await;
}

async fn the_background_janitor_prunes_on_its_interval(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.policies = policies();
            c.janitor.interval = Duration::from_millis(50);
        })
        .spawn()
        .await;
    completed(&app, SHORT, "Ev1", b"200 ok").await;
    app.advance(3 * DAY);
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(&app, SHORT, "Ev1").await != Err(Code::NotFound) {
        assert!(Instant::now() < deadline, "not pruned within 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.shutdown().await;
}

conformance!(
    retention_and_response_retention_follow_each_namespace_policy,
    no_statement_prunes_more_than_the_batch,
    processing_and_retry_wait_are_never_pruned_however_old,
    a_tombstone_answers_completed_without_the_response,
    after_retention_the_key_is_gone_and_a_claim_starts_over,
    a_replaced_policy_sets_the_next_passes_cutoffs,
    the_background_janitor_prunes_on_its_interval,
);
