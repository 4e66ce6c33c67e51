//! The fault matrix's fast rows (docs/RELIABILITY.md): real claimd processes under
//! concurrent load from the history workload (`history::workload`), a fault injected in the
//! middle, and the history checked afterwards (`history::checker`) against a final read of
//! every key. Each test names its fault; the longer runs are in `scripts/reliability.sh`.

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, claimd, free_addr};
use crate::history::{checker, workload};
use nix::sys::signal::Signal;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where a replica keeps its receipts.
#[derive(Clone, Copy)]
pub(crate) enum Db<'a> {
    Postgres(&'a str),
    Sqlite(&'a Path),
}

/// Starts a claimd replica on `addr`, serving `db` with the test seal key.
pub(crate) async fn replica(db: Db<'_>, addr: SocketAddr) -> Claimd {
    Claimd::start(replica_command(db, addr), addr).await
}

/// The command [`replica`] starts, for a test that adds to it (an environment of its own).
pub(crate) fn replica_command(db: Db<'_>, addr: SocketAddr) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args(["serve", "--listen", &addr.to_string(), "--db-timeout", "2s"]);
    match db {
        Db::Postgres(url) => cmd.args(["--database-url", url]),
        Db::Sqlite(dir) => cmd.arg("--data-dir").arg(dir),
    };
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    cmd
}

/// Runs the workload against `addrs` while `fault` runs, then stops the callers once the
/// fault is over and `settle` has passed; returns the history, checked against a final
/// read through `addrs[0]`.
pub(crate) async fn under_load<F: Future<Output = ()>>(
    addrs: &[SocketAddr],
    settle: Duration,
    fault: F,
) -> checker::Verdict {
    under(workload::Workload::default(), addrs, settle, fault).await
}

/// [`under_load`] with callers that behave as `load` says.
pub(crate) async fn under<F: Future<Output = ()>>(
    load: workload::Workload,
    addrs: &[SocketAddr],
    settle: Duration,
    fault: F,
) -> checker::Verdict {
    recorded(load, addrs, settle, fault).await.1
}

/// [`under`], with the history the verdict was reached on.
pub(crate) async fn recorded<F: Future<Output = ()>>(
    load: workload::Workload,
    addrs: &[SocketAddr],
    settle: Duration,
    fault: F,
) -> (Vec<crate::history::Op>, checker::Verdict) {
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let (addrs, stop) = (addrs.to_vec(), stop.clone());
        tokio::spawn(async move { workload::run(&load, &addrs, stop).await })
    };
    fault.await;
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::SeqCst);
    // The callers end when their last call does: within one call's deadline.
    let history = running.await.expect("the workload ran");
    let finals = workload::finals(&history, addrs[0], Duration::from_secs(30)).await;
    let verdict = checker::check(&history, &finals);
    // Shown with --nocapture: the load each row of docs/RELIABILITY.md held.
    println!(
        "history: {} calls, {} answered, {} unknown, {} CLAIMED, {} violations",
        verdict.ops,
        verdict.acknowledged,
        verdict.unknown,
        verdict.claimed,
        verdict.violations.len()
    );
    assert!(
        verdict.claimed > 20,
        "too little load to judge: {verdict:?}"
    );
    (history, verdict)
}

/// Runs `f` on the cluster in a blocking task (it waits for processes) and hands it back.
async fn in_blocking(
    cluster: Option<PrivateCluster>,
    f: impl FnOnce(&mut PrivateCluster) + Send + 'static,
) -> PrivateCluster {
    let mut cluster = cluster.expect("the cluster is here between faults");
    tokio::task::spawn_blocking(move || {
        f(&mut cluster);
        cluster
    })
    .await
    .expect("the fault ran")
}

pub(crate) const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_history_without_faults_passes_the_checker() {
    let url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let _server = replica(Db::Postgres(&url), addr).await;
    let verdict = under_load(&[addr], 3 * SECOND, async {}).await;
    verdict.assert_valid();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_kill_9_of_one_of_two_replicas_loses_nothing_acknowledged() {
    let url = crate::common::pg::fresh_database().await;
    let (a, b) = (free_addr(), free_addr());
    let first = replica(Db::Postgres(&url), a).await;
    let _second = replica(Db::Postgres(&url), b).await;
    let verdict = under_load(&[b, a], 2 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        first.kill_9();
        tokio::time::sleep(SECOND).await;
        // The same address again: its callers reconnect to the new process.
        let again = replica(Db::Postgres(&url), a).await;
        tokio::time::sleep(2 * SECOND).await;
        drop(again);
    })
    .await;
    verdict.assert_valid();
    assert!(
        verdict.unknown > 0,
        "the kill cut no call short: {verdict:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_kill_9_and_immediate_shutdown_of_the_database_lose_nothing_acknowledged() {
    let cluster = tokio::task::spawn_blocking(PrivateCluster::start)
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    let (a, b) = (free_addr(), free_addr());
    let _first = replica(Db::Postgres(&url), a).await;
    let _second = replica(Db::Postgres(&url), b).await;
    // The cluster goes in and out of blocking tasks, and must outlive the final read.
    let mut kept = Some(cluster);
    let verdict = under_load(&[a, b], 3 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        kept = Some(in_blocking(kept.take(), PrivateCluster::kill_9_and_restart).await);
        tokio::time::sleep(2 * SECOND).await;
        kept = Some(
            in_blocking(kept.take(), |c| {
                c.stop_with(Signal::SIGQUIT);
                c.restart();
            })
            .await,
        );
    })
    .await;
    verdict.assert_valid();
    assert!(
        verdict.unknown > 0,
        "the outages cut no call short: {verdict:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_kill_9_during_batches_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("a data directory");
    let addr = free_addr();
    let first = replica(Db::Sqlite(dir.path()), addr).await;
    // The restarted process serves the final read.
    let mut kept = None;
    let verdict = under_load(&[addr], 2 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        first.kill_9();
        // The embedded store's lock is released with the process: the same directory again.
        kept = Some(replica(Db::Sqlite(dir.path()), addr).await);
        tokio::time::sleep(SECOND).await;
    })
    .await;
    verdict.assert_valid();
}

/// Half the callers give every call a deadline of 0.5–30 ms: calls are cancelled while
/// queued for a batch, while their statement runs, and on the way back.
fn cancelling() -> workload::Workload {
    workload::Workload {
        cancel_within: Some(Duration::from_millis(30)),
        ..workload::Workload::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_callers_cancelling_mid_call_lose_nothing_acknowledged() {
    let url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let _server = replica(Db::Postgres(&url), addr).await;
    let verdict = under(cancelling(), &[addr], 4 * SECOND, async {}).await;
    verdict.assert_valid();
    assert!(verdict.unknown > 0, "no call was cut short: {verdict:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_callers_cancelling_mid_call_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("a data directory");
    let addr = free_addr();
    let _server = replica(Db::Sqlite(dir.path()), addr).await;
    let verdict = under(cancelling(), &[addr], 4 * SECOND, async {}).await;
    verdict.assert_valid();
    assert!(verdict.unknown > 0, "no call was cut short: {verdict:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_lock_waits_past_the_db_timeout_lose_nothing_acknowledged() {
    let url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let _server = replica(Db::Postgres(&url), addr).await;
    // Callers wait long enough to hear claimd's own answer to a write that timed out.
    let load = workload::Workload {
        call_timeout: 12 * SECOND,
        ..workload::Workload::default()
    };
    let verdict = under(load, &[addr], 2 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        // Writes wait behind this lock (reads do not). It is held for more than twice
        // `--db-timeout` (2 s): a batch's statement is cancelled by statement_timeout after
        // 2 s, its jobs read their rows (unwritten) and run again alone, those wait again
        // and are cancelled too, and claimd answers UNAVAILABLE.
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .expect("a connection of the test's own");
        for statement in ["BEGIN", "LOCK TABLE receipts IN EXCLUSIVE MODE"] {
            sqlx::query(statement)
                .execute(&mut conn)
                .await
                .expect("the table lock");
        }
        tokio::time::sleep(5 * SECOND).await;
        sqlx::query("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("the lock released");
    })
    .await;
    verdict.assert_valid();
    assert!(
        verdict.unavailable > 0,
        "no write was answered UNAVAILABLE after waiting past the timeout: {verdict:?}"
    );
}
