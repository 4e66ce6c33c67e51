//! A batch that waits on row locks, through the real server on PostgreSQL (docs/DESIGN.md
//! §4.2.1; the regressions of the group commit's review). One batch carries inserts and
//! updates together: the inserts take their clock and their deadline check only after
//! every lock of the batch, and after any other batch's insert of the same key, so a new
//! receipt is never written after its caller was told DEADLINE_EXCEEDED, and a new lease
//! runs from when its row is written. A job whose batch failed knows its own write by the
//! write's id, not by a state another write can also make.
//!
//! How batches are made here: one group-commit lane is kept busy by a Complete waiting on
//! a lock the test holds (`Blocker`), so the calls sent meanwhile queue and go together as
//! the next batch, which then waits on a second lock.

use crate::common::app::{TestApp, decision};
use crate::common::blocker::Blocker;
use crate::common::receipt_ops::{
    FP, NS, claim_request, claimed, complete, exists, heartbeat, quarantine, retry,
};
use claimd::pb::{ClaimRequest, Decision, State};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tonic::{Code, Request};

/// A claimd on a fresh PostgreSQL database with `lanes` group-commit lanes and a short
/// `--db-timeout` (in seconds), with two receipts claimed: `busy` (to keep a lane busy) and `held` (the
/// row the next batch waits on); their tokens.
async fn app_with_two_holders(
    lanes: usize,
    db_timeout_secs: u64,
    max_attempts: u32,
) -> (Arc<TestApp>, String, String) {
    let app = TestApp::builder()
        .configure(move |c| {
            c.store.batch.lanes = Some(lanes);
            c.store.acquire_timeout = Duration::from_secs(db_timeout_secs);
            c.policies.default.max_attempts = max_attempts;
        })
        .spawn()
        .await;
    let (busy, _) = claimed(&app, "busy", b"").await;
    let (held, _) = claimed(&app, "held", b"").await;
    (Arc::new(app), busy, held)
}

/// A Complete of `busy` that waits on `lock` (held by the test), keeping a lane busy.
async fn lane_kept_busy(
    app: &Arc<TestApp>,
    busy: String,
) -> (Blocker, tokio::task::JoinHandle<()>) {
    let mut lock = Blocker::hold(&app.database_url, "busy").await;
    let app2 = app.clone();
    let done = tokio::spawn(async move {
        complete(&app2, "busy", &busy, b"r")
            .await
            .expect("the busy Complete");
    });
    lock.wait_for_waiter().await;
    (lock, done)
}

/// A Claim of `key` with a deadline of `timeout` and a lease of `lease_secs`, on a task.
fn claim_with(
    app: &Arc<TestApp>,
    key: &str,
    timeout: Option<Duration>,
    lease_secs: i64,
) -> tokio::task::JoinHandle<Result<claimd::pb::ClaimResponse, tonic::Status>> {
    let mut request = Request::new(ClaimRequest {
        lease_ttl: crate::common::receipt_ops::secs(lease_secs),
        ..claim_request(key, FP)
    });
    if let Some(t) = timeout {
        request.set_timeout(t);
    }
    let mut client = app.client.clone();
    tokio::spawn(async move { client.claim(request).await.map(|r| r.into_inner()) })
}

/// Reproduction 1(a): a Claim of a new key shares a batch with a Heartbeat of a locked row;
/// its deadline passes while the batch waits for the lock, and it is answered
/// DEADLINE_EXCEEDED. Once the lock is gone, the new key must still have no receipt (it
/// was written at the release before: PROCESSING, attempt 1, a lease nobody held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_new_receipt_is_not_written_after_its_claim_was_answered_deadline_exceeded() {
    let (app, busy, held) = app_with_two_holders(1, 5, 5).await;
    let (first, busy_done) = lane_kept_busy(&app, busy).await;
    let mut second = Blocker::hold(&app.database_url, "held").await;
    let app2 = app.clone();
    let beat = tokio::spawn(async move { heartbeat(&app2, "held", &held, Some(60), None).await });
    let late = claim_with(&app, "new", Some(Duration::from_millis(1500)), 30);
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    busy_done.await.unwrap();
    second.wait_for_waiter().await;

    let status = late
        .await
        .unwrap()
        .expect_err("the Claim cannot be answered in time");
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    second.release().await;
    beat.await.unwrap().expect("the Heartbeat that waited");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !exists(&app, "new").await,
        "a Claim answered DEADLINE_EXCEEDED wrote its receipt"
    );
    let again = claim_with(&app, "new", None, 30).await.unwrap().unwrap();
    assert_eq!(
        decision(&again),
        Decision::Claimed,
        "the retry holds the work"
    );
}

/// Reproduction 1(b): two batches insert the same key. Batch A on one replica (Claim `k`
/// without a deadline, and a Heartbeat of a locked row) waits on the lock and then fails
/// at `--db-timeout`; meanwhile B's Claim of `k` with a short deadline, on a second
/// replica, meets A's insert of `k`. B is answered DEADLINE_EXCEEDED and must write
/// nothing, so A's Claim, run again, is CLAIMED (it was IN_FLIGHT on B's orphaned lease:
/// B's insert had waited on A's and committed once A rolled back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_claim_meeting_another_batchs_insert_of_its_key_writes_nothing_after_its_deadline()
 {
    let (app, busy, held) = app_with_two_holders(1, 2, 5).await;
    let other = Arc::new(
        TestApp::builder()
            .database_url(app.database_url.clone())
            .spawn()
            .await,
    );
    let (first, busy_done) = lane_kept_busy(&app, busy).await;
    let mut second = Blocker::hold(&app.database_url, "held").await;
    let app2 = app.clone();
    let beat = tokio::spawn(async move { heartbeat(&app2, "held", &held, Some(60), None).await });
    let a = claim_with(&app, "k", None, 30);
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    busy_done.await.unwrap();
    // A's batch now waits on `held`, with its insert of `k` to make.
    second.wait_for_waiter().await;
    let b = claim_with(&other, "k", Some(Duration::from_millis(800)), 30);
    let status = b.await.unwrap().expect_err("B cannot be answered in time");
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    // A's statement fails at --db-timeout while `held` is still locked; its jobs run
    // again alone.
    let a = tokio::time::timeout(Duration::from_secs(20), a)
        .await
        .expect("A is answered")
        .unwrap()
        .expect("A's Claim succeeds");
    assert_eq!(
        decision(&a),
        Decision::Claimed,
        "A was answered on B's lease: {a:?}"
    );
    second.release().await;
    // The Heartbeat's batches failed at --db-timeout; its answer is not the point here.
    let _ = beat.await.unwrap();
    complete(&app, "k", &a.claim_token, b"done")
        .await
        .expect("A's token holds the lease");
}

/// Reproduction 2: a Claim with a 1 s lease shares a batch with a Heartbeat stuck on a lock
/// for 2.5 s. The lease it is answered with must end after the answer arrives (it began at
/// the statement's start and had ended 1.5 s before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_new_lease_runs_from_when_its_row_is_written_not_from_the_batchs_start() {
    let (app, busy, held) = app_with_two_holders(1, 10, 5).await;
    let (first, busy_done) = lane_kept_busy(&app, busy).await;
    let mut second = Blocker::hold(&app.database_url, "held").await;
    let app2 = app.clone();
    let beat = tokio::spawn(async move { heartbeat(&app2, "held", &held, Some(60), None).await });
    let claim = claim_with(&app, "short", None, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    busy_done.await.unwrap();
    second.wait_for_waiter().await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    second.release().await;
    let answer = claim.await.unwrap().expect("the Claim succeeds");
    let arrived = SystemTime::now();
    beat.await.unwrap().expect("the Heartbeat that waited");
    assert_eq!(decision(&answer), Decision::Claimed);
    let lease = answer
        .receipt
        .as_ref()
        .and_then(|r| r.lease_expires_at)
        .expect("a CLAIMED answer has a lease");
    let lease = SystemTime::UNIX_EPOCH + Duration::new(lease.seconds as u64, lease.nanos as u32);
    assert!(
        lease > arrived,
        "the lease ended {:?} before the answer arrived",
        arrived.duration_since(lease).unwrap_or_default()
    );
    let next = claim_with(&app, "short", None, 30).await.unwrap().unwrap();
    assert_eq!(
        decision(&next),
        Decision::InFlight,
        "the next delivery found the first lease already over"
    );
}

/// Reproduction 3 (`max_attempts = 1`): a Quarantine's batch waits on a lock, having locked
/// its own row first, and fails at `--db-timeout` without committing; meanwhile the same
/// holder's counted Retry, waiting on that row, lands and makes the row QUARANTINED with
/// the same token. Run again, the Quarantine must not take that row for its own write: in
/// any serial order one of the two is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_failed_batchs_job_does_not_take_another_writes_row_for_its_own() {
    let (app, busy, held) = app_with_two_holders(2, 2, 1).await;
    let (token, _) = claimed(&app, "q", b"").await;
    let (first, busy_done) = lane_kept_busy(&app, busy).await;
    let second = Blocker::hold(&app.database_url, "held").await;
    let (app2, t2) = (app.clone(), token.clone());
    let quarantined =
        tokio::spawn(async move { quarantine(&app2, "q", &t2, "poison message").await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    let app2 = app.clone();
    let beat = tokio::spawn(async move { heartbeat(&app2, "held", &held, Some(60), None).await });
    // Both go as one batch on the second lane (opened once the first is seen stuck),
    // which locks `q` and then waits on `held`.
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    busy_done.await.unwrap();
    // The Retry waits on `q`, locked by the Quarantine's batch, until that batch fails.
    let (app2, t2) = (app.clone(), token.clone());
    let retried = tokio::spawn(async move { retry(&app2, "q", &t2, None, Some(true)).await });
    let retried = tokio::time::timeout(Duration::from_secs(20), retried)
        .await
        .expect("the Retry is answered")
        .unwrap();
    let quarantined = tokio::time::timeout(Duration::from_secs(20), quarantined)
        .await
        .expect("the Quarantine is answered")
        .unwrap();
    second.release().await;
    let _ = beat.await.unwrap();
    let codes = [&retried, &quarantined].map(|r| r.as_ref().err().map(tonic::Status::code));
    assert_eq!(
        codes.iter().filter(|c| c.is_none()).count(),
        1,
        "one of Retry and Quarantine by the same token must be refused: {retried:?} / {quarantined:?}"
    );
    assert!(
        codes.contains(&Some(Code::FailedPrecondition)),
        "{retried:?} / {quarantined:?}"
    );
    let row = app.get(NS, "q").await.expect("q exists");
    assert_eq!(row.state(), State::Quarantined);
}
