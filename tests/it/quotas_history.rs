//! Quota refusals in the history (issue 43; docs/RELIABILITY.md, docs/DESIGN.md §3.8): the
//! history workload against a claimd binary whose policy file gives the workload's tenant
//! (`default`: the calls carry no key) low Claims and writes rates, so that a good share of
//! Claims and of holder calls (Complete, Heartbeat, Retry, Quarantine) are refused
//! RESOURCE_EXHAUSTED while the others are served. Every refused call is followed by a Get
//! of its key, and holders send a refused call again (`Workload::quota_refusals`); the
//! checker counts a refusal as a call that did nothing and looks for its effect ("a refusal
//! changes nothing", `history/checker/refusals.rs`) besides every other invariant. On both
//! stores, and on PostgreSQL under faults of the matrix: the slow database link of
//! `faults_network` (rates), and the slow, dropped and blackholed link one after the other
//! (storage: the checked batch's transaction cut short at each of its round trips).

use crate::common::process::free_addr;
use crate::faults::{Db, SECOND, recorded, replica_command};
use crate::history::{Call, Op, Outcome, checker, workload};
use claimd::pb::State;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::Code;

/// The quotas of the workload's tenant: low enough that a good share of its Claims and of
/// its writes are refused, high enough that many are served.
const QUOTAS: &str = "[tenants.default]\nclaims_per_second = 25\nburst = 3\n\
                      writes_per_second = 15\n";

/// The storage quotas of the workload's tenant: a few dozen receipts (the hot set moves
/// to new keys every 2 s, so Claims of new keys are refused once they are there, while
/// duplicates are answered) and a little over a kilobyte of stored values (so Completes,
/// whose responses are stored, are refused once the first ones filled it).
const STORAGE: &str = "[tenants.default]\nmax_receipts = 48\nmax_stored_bytes = 1800\n";

/// The policy file with [`QUOTAS`], in `dir`.
fn policy_file(dir: &Path) -> PathBuf {
    policy_file_of(dir, QUOTAS)
}

/// The policy file `quotas`, in `dir`.
fn policy_file_of(dir: &Path, quotas: &str) -> PathBuf {
    let path = dir.join("claimd.toml");
    std::fs::write(&path, quotas).expect("write the policy file");
    path
}

/// Callers whose refused calls are read after and sent again, holders that work up to
/// 0.3 s before they act (so a refused Heartbeat's lease would end visibly later than the
/// grant's), heartbeat and quarantine more often than usual, and one in ten of which sends a
/// Retry and a second Retry or a Quarantine at once.
fn refused_load() -> workload::Workload {
    workload::Workload {
        quota_refusals: true,
        work: Some(Duration::from_millis(300)),
        beats: 30,
        twin_settles: 10,
        quarantines: 10,
        ..workload::Workload::default()
    }
}

/// Per call: (refused RESOURCE_EXHAUSTED, answered).
fn counts(history: &[Op]) -> BTreeMap<String, (usize, usize)> {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for op in history.iter().filter(|o| o.call != Call::Get) {
        let entry = counts.entry(format!("{:?}", op.call)).or_default();
        match op.outcome {
            Outcome::Refused(Code::ResourceExhausted) => entry.0 += 1,
            Outcome::Ok { .. } => entry.1 += 1,
            _ => {}
        }
    }
    counts
}

/// The history was valid, and every kind of call was both refused by the quota and served.
fn refused_and_served(history: &[Op], verdict: &checker::Verdict) {
    let counts = counts(history);
    // Shown with --nocapture: the rows of docs/RELIABILITY.md.
    println!("refused RESOURCE_EXHAUSTED / answered, per call: {counts:?}");
    verdict.assert_valid();
    for call in ["Claim", "Complete", "Heartbeat", "Retry", "Quarantine"] {
        let (refused, answered) = counts.get(call).copied().unwrap_or_default();
        assert!(
            refused > 0 && answered > 0,
            "{call}: {refused} refused by the quota, {answered} answered; want both: {counts:?}"
        );
    }
}

/// The rule can fail on this very history: with every Complete that sent one stored
/// response relabelled refused RESOURCE_EXHAUSTED, the checker finds that response stored.
async fn a_forged_refusal_is_caught(history: &[Op], addr: SocketAddr) {
    let finals = workload::finals(history, addr, Duration::from_secs(30)).await;
    let stored = finals
        .values()
        .find(|f| f.state == State::Completed && !f.response.is_empty())
        .map(|f| f.response.clone())
        .expect("a receipt completed with a response");
    let mut forged = history.to_vec();
    for op in forged.iter_mut() {
        if op.call == Call::Complete && op.sent_response == stored {
            op.outcome = Outcome::Refused(Code::ResourceExhausted);
        }
    }
    let found = checker::check(&forged, &finals).violations;
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("a refusal changes nothing")),
        "a Complete relabelled refused went unnoticed: {found:?}"
    );
}

/// The history was valid, and Claims and Completes were both refused by the storage quotas
/// and served.
fn storage_refused_and_served(history: &[Op], verdict: &checker::Verdict) {
    let counts = counts(history);
    println!("refused RESOURCE_EXHAUSTED / answered, per call: {counts:?}");
    verdict.assert_valid();
    for call in ["Claim", "Complete"] {
        let (refused, answered) = counts.get(call).copied().unwrap_or_default();
        assert!(
            refused > 0 && answered > 0,
            "{call}: {refused} refused by a storage quota, {answered} answered: {counts:?}"
        );
    }
}

/// The refusing workload for `seconds` against one claimd on `db` whose storage quotas
/// ([`STORAGE`]) fill up while it runs: the checked writes' path (the tenant's turn, its
/// figures read, the writes that fit) under the checker.
async fn run_storage_on(db: Db<'_>, seconds: u32) {
    let config = tempfile::tempdir().expect("a directory for the policy file");
    let addr = free_addr();
    let mut cmd = replica_command(db, addr);
    cmd.arg("--config")
        .arg(policy_file_of(config.path(), STORAGE));
    let _server = crate::common::process::Claimd::start(cmd, addr).await;
    let (history, verdict) = recorded(refused_load(), &[addr], seconds * SECOND, async {}).await;
    storage_refused_and_served(&history, &verdict);
    a_forged_refusal_is_caught(&history, addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_storage_quota_refusals_in_a_history_change_nothing() {
    let dir = tempfile::tempdir().expect("a data directory");
    run_storage_on(Db::Sqlite(dir.path()), 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_storage_quota_refusals_in_a_history_change_nothing() {
    let url = crate::common::pg::fresh_database().await;
    run_storage_on(Db::Postgres(&url), 6).await;
}

/// Runs the refusing workload for `seconds` against one claimd on `db` with the quotas.
async fn run_on(db: Db<'_>, seconds: u32) {
    let config = tempfile::tempdir().expect("a directory for the policy file");
    let addr = free_addr();
    let mut cmd = replica_command(db, addr);
    cmd.arg("--config").arg(policy_file(config.path()));
    let _server = crate::common::process::Claimd::start(cmd, addr).await;
    let (history, verdict) = recorded(refused_load(), &[addr], seconds * SECOND, async {}).await;
    refused_and_served(&history, &verdict);
    a_forged_refusal_is_caught(&history, addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_quota_refusals_in_a_history_change_nothing() {
    let dir = tempfile::tempdir().expect("a data directory");
    run_on(Db::Sqlite(dir.path()), 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_quota_refusals_in_a_history_change_nothing() {
    let url = crate::common::pg::fresh_database().await;
    run_on(Db::Postgres(&url), 6).await;
}

/// The slow link of `faults_network`: every chunk between claimd and PostgreSQL delayed by
/// 50 ms for 2 s, while the quotas refuse calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_quota_refusals_over_a_slow_database_link_change_nothing() {
    let config = tempfile::tempdir().expect("a directory for the policy file");
    let file = policy_file(config.path());
    let flags = ["--db-timeout", "2s", "--config", &file.to_string_lossy()];
    let (_cluster, proxy, addr, _server) = crate::faults_network::behind_proxy(&flags).await;
    let (history, verdict) = recorded(refused_load(), &[addr], 3 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        proxy.delay(Duration::from_millis(50));
        tokio::time::sleep(2 * SECOND).await;
        proxy.normal();
    })
    .await;
    refused_and_served(&history, &verdict);
    a_forged_refusal_is_caught(&history, addr).await;
}

/// The storage quotas' checked batches (the tenant's turn and figures, the writes, the
/// commit: three round trips in one transaction) under the network faults of
/// `faults_network`, one after the other: every chunk delayed by 50 ms for 1 s, every
/// connection dropped, then the link blackholed for 1.5 s past a `--db-timeout` of 1 s (a
/// transaction given up on mid-way). The history is valid, refusals changed nothing, and
/// afterwards the store holds no more than the limits allow, `tenant_usage` equals a count
/// of what it holds, and no transaction of claimd's is left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_storage_quota_refusals_over_a_slow_dropped_and_blackholed_link_change_nothing() {
    use crate::common::pg::PrivateCluster;
    use crate::common::proxy::Proxy;
    use sqlx::Connection;
    let config = tempfile::tempdir().expect("a directory for the policy file");
    let file = policy_file_of(config.path(), STORAGE);
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let direct = cluster.create_database().await;
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let url = crate::faults_network::through(&proxy, &direct);
    let addr = free_addr();
    let flags = ["--db-timeout", "1s", "--config", &file.to_string_lossy()];
    let _server = crate::faults_network::replica_with(&url, addr, &flags).await;
    let (history, verdict) = recorded(refused_load(), &[addr], 7 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        proxy.delay(Duration::from_millis(50));
        tokio::time::sleep(SECOND).await;
        proxy.delay(Duration::from_millis(400));
        tokio::time::sleep(3 * SECOND / 2).await;
        proxy.normal();
        proxy.drop_connections();
        tokio::time::sleep(SECOND).await;
        proxy.blackhole();
        tokio::time::sleep(3 * SECOND / 2).await;
        proxy.normal();
    })
    .await;
    storage_refused_and_served(&history, &verdict);
    assert!(
        verdict.unknown > 0,
        "the faults cut no call short: {verdict:?}"
    );
    let mut conn = sqlx::PgConnection::connect(&direct)
        .await
        .expect("connect to the test's database");
    let counted: (i64, i64) = sqlx::query_as(
        "SELECT count(*)::int8, COALESCE(sum(COALESCE(octet_length(last_error), 0)
            + COALESCE(octet_length(checkpoint), 0) + COALESCE(octet_length(response), 0)
            + COALESCE(octet_length(recovery_payload), 0)), 0)::int8 FROM receipts",
    )
    .fetch_one(&mut conn)
    .await
    .expect("count the receipts");
    let kept: (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(sum(receipts), 0)::int8, COALESCE(sum(stored_bytes), 0)::int8
            FROM tenant_usage",
    )
    .fetch_one(&mut conn)
    .await
    .expect("read tenant_usage");
    println!("receipts and stored bytes: counted {counted:?}, kept {kept:?}");
    // A checked batch given up on mid-way leaves no transaction open behind it (one would
    // hold the tenant's turn, and carry the writes of whoever used its connection next).
    tokio::time::sleep(SECOND).await;
    let open: Vec<(String, String)> = sqlx::query_as(
        "SELECT state, left(query, 60) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND state LIKE 'idle in transaction%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("read pg_stat_activity");
    assert!(open.is_empty(), "transactions left open: {open:?}");
    assert!(
        counted.0 <= 48 && counted.1 <= 1800,
        "past a limit: {counted:?}"
    );
    assert_eq!(
        kept, counted,
        "tenant_usage against a count of the receipts"
    );
    a_forged_refusal_is_caught(&history, addr).await;
}
