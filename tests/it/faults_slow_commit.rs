//! The fault matrix's slow-commit row (docs/RELIABILITY.md, issue 46): commits held 0.5–2 s
//! by a synchronous standby that is named but absent (its replication link blackholed) and
//! then attached again — the state right after a Patroni failover with
//! `synchronous_mode_strict`, before the new leader has its standby — again and again under
//! the concurrent workload, whose leases run from 1 to 2.5 s and whose holders heartbeat.
//! Every write commits late, after its statement read the database's clock: the checker
//! holds each CLAIMED answer and each accepted Heartbeat to arrive with at least a quarter
//! of the lease it asked for left (`history::checker::leases`).

use crate::common::process::free_addr;
use crate::faults::{SECOND, recorded};
use crate::faults_failover::{STANDBY, pair, sync_state};
use crate::faults_network::replica_with;
use crate::history::workload::Workload;
use crate::history::{Call, Op};
use rand::Rng;
use std::time::Duration;

/// How many times the commits are held.
const ROUNDS: usize = 8;

/// Calls of `call` answered OK that took longer than `at_least`: the fault reached them.
fn slow(history: &[Op], call: Call, at_least: Duration) -> usize {
    history
        .iter()
        .filter(|op| op.call == call && op.acknowledged())
        .filter(|op| op.end.duration_since(op.start) >= at_least)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_commits_held_by_an_absent_synchronous_standby_never_answer_a_lease_nearly_over() {
    let settings: &'static [&'static str] = &["synchronous_standby_names=claimd_standby"];
    let (primary, _standby, replication) = pair(settings).await;
    let url = primary.create_database().await;
    let addr = free_addr();
    let _server = replica_with(&url, addr, &["--db-timeout", "5s"]).await;
    assert_eq!(
        sync_state(&primary).await.as_deref(),
        Some("sync"),
        "{STANDBY} streams synchronously before the fault"
    );
    let load = Workload {
        lease: SECOND,
        lease_max: Some(Duration::from_millis(2500)),
        call_timeout: Duration::from_secs(6),
        work: Some(Duration::from_millis(300)),
        beats: 50,
        ..Workload::default()
    };
    let (history, verdict) = recorded(load, &[addr], 2 * SECOND, async {
        for _ in 0..ROUNDS {
            tokio::time::sleep(Duration::from_millis(600)).await;
            let held = Duration::from_millis(rand::rng().random_range(500..=2000));
            replication.blackhole();
            tokio::time::sleep(held).await;
            replication.normal();
        }
    })
    .await;
    // The fault reached both calls the invariant is about: some answered after a held commit.
    let half = Duration::from_millis(500);
    let (claims, beats) = (
        slow(&history, Call::Claim, half),
        slow(&history, Call::Heartbeat, half),
    );
    println!("answered after a held commit: {claims} Claims, {beats} Heartbeats");
    assert!(
        claims > 0 && beats > 0,
        "no call met a held commit: {verdict:?}"
    );
    verdict.assert_valid();
}
