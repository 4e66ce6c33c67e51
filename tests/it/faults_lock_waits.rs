//! The fault matrix's lock-wait rows (docs/RELIABILITY.md; issue 26): the history workload
//! with short deadlines told to claimd (200 ms – 2 s on half the callers; 8 s and Claims
//! that `wait` 5 s on the others), 1–2 s leases, holders that work up to 0.6 s before
//! settling and one in five that sends its settling call twice at once, while the test
//! makes claimd's writes wait:
//!
//! - PostgreSQL, four group-commit lanes, `--db-timeout 2s`: two connections of the test's
//!   own take `SELECT … FOR UPDATE` on a few PROCESSING receipts (the newest, and those
//!   whose leases end first) for 1–3 s, again and again, so holder calls and takeovers wait
//!   on them and hold their batch — with the first deliveries that share it — behind the
//!   lock (until it goes, or until `statement_timeout` cancels the batch); a third inserts
//!   half of the next hot set's keys just before it becomes hot and holds the inserts
//!   uncommitted for 0.3–2.5 s, then rolls them back, so first deliveries wait on a
//!   concurrent insert of their own key;
//! - SQLite: a connection of the test's own holds `BEGIN IMMEDIATE` for 0.5–2 s, again and
//!   again, so claimd's single writer waits for the database's write lock;
//! - PostgreSQL through the test's TCP proxy, `--db-timeout 1s`, holders that walk away
//!   40 % of the time (so leases run out under Claims that `wait`): again and again the
//!   test locks the receipts whose leases end first, waits until claimd's statements wait
//!   on them, blackholes the link and releases the locks, so those statements commit while
//!   their answers are held and claimd gives them up after 1.5 s (the setting of the
//!   issue's §4: a waiting Claim's takeover whose answer is lost).
//!
//! Every call cut short at its deadline is followed by Gets of its key from when the
//! deadline and the checker's margin have passed, and the checker judges the history with
//! every invariant, among them "an error that says nothing changed changed nothing" and
//! "a lease ends after the answer that grants it arrives" (docs/DESIGN.md §3.8).

mod locks;

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, claimd, free_addr};
use crate::common::proxy::Proxy;
use crate::faults::{SECOND, under};
use crate::faults_network::{replica_with, through};
use crate::history::checker::Verdict;
use crate::history::workload::Workload;
use locks::{Rows, hold_rows, insert_ahead, lose_answers_after_lock_waits, watch_waits};
use rand::Rng;
use sqlx::Connection;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the test makes claimd wait, on and off.
const FAULT: Duration = Duration::from_secs(10);
/// How long the row that loses answers does so: more rounds of it than of the others.
const LOSING: Duration = Duration::from_secs(15);
/// How long the link stays blackholed after the locks go: longer than `--db-timeout 1s` +
/// 0.5 s, so claimd gives up on the statements that committed meanwhile.
const LOST_FOR: Duration = Duration::from_millis(1_700);
/// claimd's `--db-timeout` on PostgreSQL: shorter than some of the test's row locks, so
/// some batches wait for the lock to go and commit then, and others are cancelled by
/// `statement_timeout` and their jobs run again alone.
const PG_DB_TIMEOUT: &str = "2s";
/// On SQLite (its busy timeout): longer than the test holds the write lock.
const SQLITE_DB_TIMEOUT: &str = "5s";

fn workload() -> Workload {
    Workload {
        hot: 24,
        lease: SECOND,
        lease_max: Some(2 * SECOND),
        call_timeout: 8 * SECOND,
        cancel_within: Some(2 * SECOND),
        cancel_from: Duration::from_millis(200),
        tell_deadline: true,
        read_after_error: true,
        twin_settles: 20,
        work: Some(Duration::from_millis(600)),
        claim_wait: Some(5 * SECOND),
        ..Workload::default()
    }
}

/// A random duration from `low` to `high` milliseconds.
fn ms(low: u64, high: u64) -> Duration {
    Duration::from_millis(rand::rng().random_range(low..=high))
}

/// Prints what the checker found, rule by rule and the first lines (`--nocapture`).
fn show(verdict: &Verdict) {
    println!("cut short: {:?}", verdict.cut_short);
    println!("violations by rule: {:?}", verdict.rules());
    for line in verdict.violations.iter().take(12) {
        println!("  {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_writes_waiting_on_row_locks_and_concurrent_inserts_change_nothing_after_their_deadline_and_grant_leases_that_outlast_their_answers()
 {
    let url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let flags = ["--db-timeout", PG_DB_TIMEOUT, "--group-commit-lanes", "4"];
    let _server = replica_with(&url, addr, &flags).await;
    let load = workload();
    let waits = Arc::new(AtomicUsize::new(0));
    let began = Instant::now();
    let end = began + FAULT;
    let verdict = under(load.clone(), &[addr], SECOND, async {
        tokio::join!(
            hold_rows(&url, end, Rows::Newest, (1_000, 3_000)),
            hold_rows(&url, end, Rows::Due, (1_000, 3_000)),
            insert_ahead(&url, began, &load, end),
            watch_waits(&url, end, &waits),
        );
    })
    .await;
    show(&verdict);
    let waited = waits.load(Ordering::Relaxed);
    println!("samples with claimd waiting on a lock: {waited}");
    assert!(waited > 0, "claimd never waited on the test's locks");
    assert!(verdict.unknown > 0, "no call was cut short: {verdict:?}");
    verdict.assert_valid();
}

/// A claimd on `addr` serving the SQLite database in `dir`.
async fn sqlite_replica(dir: &std::path::Path, addr: std::net::SocketAddr) -> Claimd {
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--db-timeout",
        SQLITE_DB_TIMEOUT,
    ]);
    cmd.arg("--data-dir").arg(dir);
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    Claimd::start(cmd, addr).await
}

/// Until `end`: holds the database's write lock for 0.5–2 s, then lets it go for a moment;
/// returns how often it held it.
async fn hold_write_lock(url: &str, end: Instant) -> usize {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let mut held = 0;
    while Instant::now() < end {
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .expect("the write lock");
        held += 1;
        tokio::time::sleep(ms(500, 2_000)).await;
        sqlx::query("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("rollback");
        tokio::time::sleep(ms(200, 500)).await;
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_writes_waiting_on_the_write_lock_change_nothing_after_their_deadline_and_grant_leases_that_outlast_their_answers()
 {
    let dir = tempfile::tempdir().expect("a data directory");
    let addr = free_addr();
    let _server = sqlite_replica(dir.path(), addr).await;
    let url = format!("sqlite://{}/claimd.db", dir.path().display());
    let end = Instant::now() + FAULT;
    let mut held = 0;
    let verdict = under(workload(), &[addr], SECOND, async {
        held = hold_write_lock(&url, end).await;
    })
    .await;
    show(&verdict);
    println!("the write lock was held {held} times");
    assert!(held > 0);
    assert!(verdict.unknown > 0, "no call was cut short: {verdict:?}");
    verdict.assert_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_writes_whose_answers_are_lost_after_a_lock_wait_change_nothing_unexplained_and_grant_leases_that_outlast_their_answers()
 {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    // The test's own connections go straight to the database, claimd's through the proxy.
    let direct = cluster.create_database().await;
    let addr = free_addr();
    let flags = ["--db-timeout", "1s", "--group-commit-lanes", "4"];
    let _server = replica_with(&through(&proxy, &direct), addr, &flags).await;
    let load = Workload {
        walk_away: 40,
        work: None,
        ..workload()
    };
    let end = Instant::now() + LOSING;
    let mut caught = 0;
    let verdict = under(load, &[addr], 2 * SECOND, async {
        caught = lose_answers_after_lock_waits(&direct, &proxy, end).await;
    })
    .await;
    show(&verdict);
    println!("statements caught waiting when the link went: {caught} times");
    assert!(caught > 0, "no statement waited on the test's locks");
    assert!(
        verdict.unavailable > 0,
        "no write was given up on: {verdict:?}"
    );
    verdict.assert_valid();
}
