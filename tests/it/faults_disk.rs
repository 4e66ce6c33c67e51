//! The fault matrix's disk rows (docs/RELIABILITY.md): the embedded store on a small real
//! filesystem of its own (`mounts`) under concurrent load from the history workload while
//! the disk fills up or turns read-only. claimd must answer what it cannot write
//! UNAVAILABLE (never INTERNAL, no panic), report NOT_SERVING meanwhile, serve again once
//! the disk can be written, and leave a database that passes `PRAGMA integrity_check` and a
//! history the checker accepts. Mounting needs root: these tests fail without it.

mod error_window;
mod mounts;

use crate::common::probe;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use crate::faults::{Db, SECOND, replica};
use crate::history::{Op, Outcome, checker, workload};
use claimd::pb;
use error_window::ErrorWindow;
use mounts::{Ext4, Filler, Tmpfs};
use sqlx::Connection;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

/// `faults::under_load` against one claimd, handing back the history with its verdict.
async fn loaded<F: Future<Output = ()>>(
    addr: SocketAddr,
    settle: Duration,
    fault: F,
    error_at: Option<&OnceLock<ErrorWindow>>,
) -> (checker::Verdict, Vec<Op>) {
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        tokio::spawn(
            async move { workload::run(&workload::Workload::default(), &[addr], stop).await },
        )
    };
    fault.await;
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::SeqCst);
    let mut history = running.await.expect("the workload ran");
    if let Some(window) = error_at.and_then(OnceLock::get) {
        history = window.without_writes_across(history);
    }
    let finals = workload::finals(&history, addr, Duration::from_secs(30)).await;
    let verdict = checker::check(&history, &finals);
    // Shown with --nocapture: the load the row of docs/RELIABILITY.md held.
    println!(
        "history: {} calls, {} answered, {} unknown, {} CLAIMED, {} violations; cut short: {:?}",
        verdict.ops,
        verdict.acknowledged,
        verdict.unknown,
        verdict.claimed,
        verdict.violations.len(),
        unknown_codes(&history)
    );
    assert!(
        verdict.claimed > 20,
        "too little load to judge: {verdict:?}"
    );
    (verdict, history)
}

/// How many calls of `history` ended without a definite answer, by status code.
fn unknown_codes(history: &[Op]) -> BTreeMap<String, usize> {
    let mut codes = BTreeMap::new();
    for op in history {
        if let Outcome::Unknown(code) = op.outcome {
            *codes.entry(format!("{code:?}")).or_default() += 1;
        }
    }
    codes
}

/// Every call the fault cut short ended with one of `codes` (never INTERNAL or UNKNOWN),
/// and some were UNAVAILABLE.
fn cut_short_only_with(history: &[Op], codes: &[&str]) {
    let seen = unknown_codes(history);
    assert!(
        seen.keys().all(|code| codes.contains(&code.as_str())),
        "calls the fault cut short ended otherwise than {codes:?}: {seen:?}"
    );
    assert!(
        seen.contains_key("Unavailable"),
        "the fault cut no call short"
    );
}

/// The line of `log` where claimd said it cannot write, with SQLite's error.
fn said_it_cannot_write(log: &str) -> &str {
    let line = log
        .lines()
        .find(|l| l.contains("the database cannot be written"));
    line.unwrap_or_else(|| panic!("claimd never said it cannot write:\n{log}"))
}

/// Every distinct SQLite error `log` shows (`(code: N) message`).
fn sqlite_errors(log: &str) -> std::collections::BTreeSet<&str> {
    let errors = log.split("error returned from database: ").skip(1);
    errors.filter_map(|rest| rest.lines().next()).collect()
}

/// A Claim of a fresh key in a namespace of its own (an insert on the writer).
async fn claim_fresh(addr: SocketAddr, n: &mut u32) -> Result<(), tonic::Status> {
    *n += 1;
    let mut client = workload::channel(addr, Duration::from_secs(10));
    let request = pb::ClaimRequest {
        namespace: "probe".into(),
        key: format!("fresh-{n}"),
        ..Default::default()
    };
    client.claim(request).await.map(drop)
}

/// Claims fresh keys until one fails, and returns its status: waits for the fault to bite
/// (30 s at most), it does not time it.
async fn first_failed_write(addr: SocketAddr) -> tonic::Status {
    let (deadline, mut n) = (Instant::now() + Duration::from_secs(30), 0);
    loop {
        if let Err(status) = claim_fresh(addr, &mut n).await {
            return status;
        }
        assert!(Instant::now() < deadline, "every write still succeeds");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Claims fresh keys until one succeeds (30 s at most): claimd serves again by itself.
async fn writes_again(addr: SocketAddr) {
    let (deadline, mut n) = (Instant::now() + Duration::from_secs(30), 1000);
    loop {
        match claim_fresh(addr, &mut n).await {
            Ok(()) => return,
            Err(s) => assert!(Instant::now() < deadline, "claimd never wrote again: {s:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Get of the key written before the disk filled: reads are still served.
async fn read_while_full(addr: SocketAddr) {
    let mut client = workload::channel(addr, Duration::from_secs(10));
    let get = pb::GetRequest {
        namespace: "probe".into(),
        key: "fresh-501".into(),
    };
    client.get(get).await.expect("a Get while the disk is full");
}

/// Health Check of `""` and the ClaimService until both report `want` (15 s at most).
async fn health_becomes(addr: SocketAddr, want: ServingStatus) {
    // A claimd that serves accepts a loopback connection.
    let channel = probe::plaintext_channel(addr).await.expect("a channel");
    probe::wait_for(&channel, "", want).await;
    probe::wait_for(&channel, claimd::server::SERVICE_NAME, want).await;
}

/// What `PRAGMA integrity_check` says of the database (claimd stopped).
async fn integrity(db: &Path) -> String {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(db);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap_or_else(|e| panic!("{} does not open: {e}", db.display()));
    sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .expect("integrity_check answers")
}

/// The status a failed write of `server` answered: UNAVAILABLE, saying why.
fn unavailable_naming_the_disk(status: &tonic::Status, server: &Claimd) {
    let said = status.code() == Code::Unavailable
        && status
            .message()
            .contains("disk is full, read-only or failing");
    assert!(said, "{status:?}; claimd's log:\n{}", server.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_full_disk_answers_unavailable_and_recovers_when_space_is_back() {
    let fs = Tmpfs::mount("32m");
    let dir = fs.path().join("data");
    let addr = free_addr();
    // Declared after the mount: dropped (killed) before it is unmounted.
    let server = replica(Db::Sqlite(&dir), addr).await;
    let (verdict, history) = loaded(
        addr,
        2 * SECOND,
        async {
            tokio::time::sleep(2 * SECOND).await;
            claim_fresh(addr, &mut 500)
                .await
                .expect("a write before the disk fills");
            let at = fs.path().join("filler");
            let filler = tokio::task::spawn_blocking(move || Filler::fill(&at))
                .await
                .expect("the filler ran");
            println!("filler: {} bytes", filler.bytes);
            unavailable_naming_the_disk(&first_failed_write(addr).await, &server);
            health_becomes(addr, ServingStatus::NotServing).await;
            read_while_full(addr).await;
            tokio::time::sleep(SECOND).await;
            drop(filler);
            health_becomes(addr, ServingStatus::Serving).await;
            writes_again(addr).await;
            tokio::time::sleep(SECOND).await;
        },
        None,
    )
    .await;
    verdict.assert_valid();
    cut_short_only_with(&history, &["Unavailable"]);
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(said_it_cannot_write(&log).contains("(code: 13) database or disk is full"));
    assert!(server.terminate().await.success());
    assert_eq!(integrity(&dir.join("claimd.db")).await, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_filesystem_the_kernel_makes_read_only_answers_unavailable_and_loses_nothing() {
    let fs = Ext4::mount(64);
    let dir = fs.path().join("data");
    let addr = free_addr();
    // Declared after the mount: dropped (killed) before it is unmounted.
    let mut kept = Some(replica(Db::Sqlite(&dir), addr).await);
    let error_at = OnceLock::new();
    let (verdict, history) = loaded(
        addr,
        2 * SECOND,
        async {
            tokio::time::sleep(2 * SECOND).await;
            // Linux remounts nothing read-only while files on it are open for writing, and
            // claimd's are: only the kernel itself takes it read-only, on an error.
            let refused = fs.remount_read_only().expect_err("a remount under claimd");
            assert!(refused.contains("busy"), "{refused}");
            let before = Instant::now();
            fs.fail();
            let _ = error_at.set(ErrorWindow::new(before));
            let first = kept.as_ref().expect("the first claimd");
            unavailable_naming_the_disk(&first_failed_write(addr).await, first);
            health_becomes(addr, ServingStatus::NotServing).await;
            tokio::time::sleep(SECOND).await;
            // Writable again only once unmounted, so claimd (which holds it) is restarted.
            let failed = kept.take().expect("the first claimd");
            let log = failed.log();
            assert!(!log.contains("panicked"), "{log}");
            said_it_cannot_write(&log);
            println!("SQLite errors logged: {:?}", sqlite_errors(&log));
            println!("the first claimd: {}", failed.terminate().await);
            fs.repair();
            kept = Some(replica(Db::Sqlite(&dir), addr).await);
            health_becomes(addr, ServingStatus::Serving).await;
            writes_again(addr).await;
            tokio::time::sleep(SECOND).await;
        },
        Some(&error_at),
    )
    .await;
    verdict.assert_valid();
    // The restart also cuts calls short: a stream the stopping claimd's connection closes
    // ends CANCELLED on the client (one its GOAWAY closes is UNAVAILABLE in the history,
    // `claimd_client::never_taken`).
    cut_short_only_with(&history, &["Unavailable", "Cancelled"]);
    let server = kept.take().expect("the second claimd");
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
    assert!(server.terminate().await.success());
    assert_eq!(integrity(&dir.join("claimd.db")).await, "ok");
}

/// `claimd serve` on `dir` without waiting for it to serve.
fn spawn_on(dir: &Path, addr: SocketAddr) -> Claimd {
    let mut cmd = claimd();
    cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"]);
    cmd.arg(dir);
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    Claimd::spawn(cmd)
}

/// Starts claimd on `dir` and requires it to exit non-zero, naming `dir` as read-only.
async fn refuses_to_start(dir: &Path) {
    let mut refused = spawn_on(dir, free_addr());
    let status = refused.wait_for_exit(PATIENCE).await;
    let log = refused.log();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    let named = format!(
        "the data directory {} is on a read-only filesystem",
        dir.display()
    );
    assert!(log.contains(&named), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_claimd_refuses_to_start_on_a_read_only_data_directory_naming_it() {
    let fs = Tmpfs::mount("16m");
    let dir = fs.path().join("data");
    let addr = free_addr();
    // A database of an earlier run, as a volume mounted read-only would hold.
    let first = replica(Db::Sqlite(&dir), addr).await;
    claim_fresh(addr, &mut 0).await.expect("a Claim before");
    assert!(first.terminate().await.success());
    fs.remount("ro").expect("nothing holds the tmpfs open");
    refuses_to_start(&dir).await;
    refuses_to_start(&fs.path().join("never-made")).await;
    fs.remount("rw").expect("the tmpfs is writable again");
    assert_eq!(integrity(&dir.join("claimd.db")).await, "ok");
    let again = replica(Db::Sqlite(&dir), addr).await;
    let mut client = workload::channel(addr, Duration::from_secs(10));
    let get = pb::GetRequest {
        namespace: "probe".into(),
        key: "fresh-1".into(),
    };
    client.get(get).await.expect("the earlier receipt is there");
    drop(again);
}
