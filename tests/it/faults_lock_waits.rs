//! The fault matrix's lock-wait rows (docs/RELIABILITY.md; issue 26): the history workload
//! with short deadlines (200 ms – 2 s on half the callers, 8 s told to claimd on the
//! others), 1–2 s leases and holders that sometimes send a settling call twice at once,
//! while the test makes claimd's writes wait:
//!
//! - PostgreSQL, four group-commit lanes: two connections of the test's own take
//!   `SELECT … FOR UPDATE` on a few PROCESSING receipts (the newest, and those whose leases
//!   end first) for 1–3 s, again and again, so holder calls and takeovers wait on them and
//!   hold their batch — with the new receipts that share it — behind the lock; a third inserts the next hot set's keys
//!   just before it becomes hot and holds the inserts uncommitted for 0.3–2.5 s, then
//!   rolls them back, so first deliveries wait on a concurrent insert of their own key;
//! - SQLite: a connection of the test's own holds `BEGIN IMMEDIATE` for 0.5–2 s, again and
//!   again, so claimd's single writer waits for the database's write lock;
//! - PostgreSQL through the test's TCP proxy, with `--db-timeout 1s` and holders that walk
//!   away 40 % of the time (so leases run out under Claims that `wait`): again and again
//!   the test locks the receipts whose leases end first, waits until claimd's statements
//!   wait on them, blackholes the link and releases the locks, so those statements commit
//!   while their answers are held and claimd gives them up after 1.5 s (the issue's
//!   reproduction of §4: a waiting Claim's takeover whose answer is lost).
//!
//! Every call cut short at its deadline is followed by a Get once the deadline and the
//! checker's margin have passed, and the checker judges the history with every invariant,
//! among them "an error that says nothing changed changed nothing" and "a lease ends after
//! the answer that grants it arrives" (docs/DESIGN.md §3.8).

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, claimd, free_addr};
use crate::common::proxy::Proxy;
use crate::faults::{SECOND, under};
use crate::faults_network::{replica_with, through};
use crate::history::checker::Verdict;
use crate::history::workload::{self, NS, Workload};
use rand::Rng;
use sqlx::Connection;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the test makes claimd wait, on and off.
const FAULT: Duration = Duration::from_secs(10);
/// How long the link stays blackholed after the locks go: longer than `--db-timeout 1s` +
/// 0.5 s, so claimd gives up on the statements that committed meanwhile.
const LOST_FOR: Duration = Duration::from_millis(1_700);
/// claimd's `--db-timeout` here: longer than any lock the test holds, so the waiting
/// statements commit when the lock goes (the defects' setting) rather than time out.
const DB_TIMEOUT: &str = "5s";

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
        twin_settles: true,
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

/// Which PROCESSING receipts [`hold_rows`] locks.
#[derive(Clone, Copy)]
enum Rows {
    /// The newest: their holders' Completes and Heartbeats come next.
    Newest,
    /// Those whose lease ends first: the takeovers (of waiting Claims too) come next.
    Due,
}

/// Until `end`: locks up to three PROCESSING receipts for `hold` (a random number of
/// milliseconds in the range), then lets them go for a moment.
async fn hold_rows(url: &str, end: Instant, rows: Rows, hold: (u64, u64)) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let lock = match rows {
        Rows::Newest => {
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY updated_at DESC LIMIT 3 FOR UPDATE SKIP LOCKED"
        }
        Rows::Due => {
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY lease_expires_at LIMIT 3 FOR UPDATE SKIP LOCKED"
        }
    };
    while Instant::now() < end {
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(lock)
            .bind(NS)
            .execute(&mut *tx)
            .await
            .expect("lock rows");
        tokio::time::sleep(ms(hold.0, hold.1)).await;
        tx.rollback().await.expect("rollback");
        tokio::time::sleep(ms(100, 400)).await;
    }
}

/// Until `end`: just before each hot set becomes hot, inserts half its keys uncommitted,
/// holds them 0.3–2.5 s into the epoch and rolls them back. Keys go in in order, as claimd
/// inserts them, so the two never wait for each other in a cycle.
async fn insert_ahead(url: &str, began: Instant, load: &Workload, end: Instant) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    for epoch in 1.. {
        let boundary = began + load.epoch * epoch;
        if boundary > end {
            break;
        }
        tokio::time::sleep_until((boundary - Duration::from_millis(300)).into()).await;
        let mut keys: Vec<String> = (0..load.hot / 2)
            .map(|pick| workload::key(u128::from(epoch), pick))
            .collect();
        keys.sort();
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(
            "INSERT INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint, \
                                   created_at, updated_at) \
             SELECT 'default', $1, k, 'processing', 1, '\\x00'::bytea, now(), now() \
             FROM unnest($2::text[]) AS k ORDER BY k ON CONFLICT DO NOTHING",
        )
        .bind(NS)
        .bind(&keys)
        .execute(&mut *tx)
        .await
        .expect("insert ahead");
        tokio::time::sleep_until((boundary + ms(300, 2_500)).into()).await;
        tx.rollback().await.expect("rollback");
    }
}

/// Until `end`: counts the samples (every 50 ms) in which one of claimd's statements waited
/// on a lock in this test's database.
async fn watch_waits(url: &str, end: Instant, waits: &AtomicUsize) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    while Instant::now() < end {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&mut conn)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            waits.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_writes_waiting_on_row_locks_and_concurrent_inserts_change_nothing_after_their_deadline_and_grant_leases_that_outlast_their_answers()
 {
    let url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let flags = ["--db-timeout", DB_TIMEOUT, "--group-commit-lanes", "4"];
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
        DB_TIMEOUT,
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

/// Until `end`, again and again: locks the receipts whose leases end first, waits (up to
/// 2 s) until one of claimd's statements waits on them, blackholes the link between claimd
/// and the database, releases the locks — the waiting statements commit, their answers
/// held — and restores the link once claimd has given them up. Returns how often a
/// statement was caught so.
async fn lose_answers_after_lock_waits(url: &str, proxy: &Proxy, end: Instant) -> usize {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let mut watch = sqlx::PgConnection::connect(url).await.expect("connect");
    let mut caught = 0;
    while Instant::now() < end {
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY lease_expires_at LIMIT 4 FOR UPDATE SKIP LOCKED",
        )
        .bind(NS)
        .execute(&mut *tx)
        .await
        .expect("lock rows");
        let waiting_until = Instant::now() + 2 * SECOND;
        let mut waiting = false;
        while !waiting && Instant::now() < waiting_until {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .fetch_one(&mut watch)
            .await
            .expect("pg_stat_activity");
            waiting = n > 0;
        }
        if waiting {
            caught += 1;
            proxy.blackhole();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tx.rollback().await.expect("rollback");
        if waiting {
            tokio::time::sleep(LOST_FOR).await;
            proxy.normal();
        }
        tokio::time::sleep(ms(300, 800)).await;
    }
    caught
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
        ..workload()
    };
    let end = Instant::now() + FAULT;
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
