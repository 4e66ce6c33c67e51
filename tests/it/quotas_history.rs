//! Quota refusals in the history (issue 43; docs/RELIABILITY.md, docs/DESIGN.md §3.8): the
//! history workload against a claimd binary whose policy file gives the workload's tenant
//! (`default`: the calls carry no key) low Claims and writes rates, so that a good share of
//! Claims and of holder calls (Complete, Heartbeat, Retry, Quarantine) are refused
//! RESOURCE_EXHAUSTED while the others are served. Every refused call is followed by a Get
//! of its key, and holders send a refused call again (`Workload::quota_refusals`); the
//! checker counts a refusal as a call that did nothing and looks for its effect ("a refusal
//! changes nothing", `history/checker/refusals.rs`) besides every other invariant. On both
//! stores, and on PostgreSQL under one fault of the matrix: the slow database link of
//! `faults_network`.

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

/// The policy file with [`QUOTAS`], in `dir`.
fn policy_file(dir: &Path) -> PathBuf {
    let path = dir.join("claimd.toml");
    std::fs::write(&path, QUOTAS).expect("write the policy file");
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
