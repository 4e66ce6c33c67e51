//! The fault matrix's Patroni row (docs/RELIABILITY.md): claimd through a real leader
//! failover. etcd, three Patroni nodes (synchronous mode, strict) and HAProxy in front of
//! whichever is the primary (`cluster.rs`); two claimd replicas reach the database through
//! HAProxy and serve the history workload while the leader is killed — first the whole node
//! (Patroni, its postmaster and every backend), then, once that node has rejoined, the new
//! leader's postmaster alone. Each round checks the history, that the calls cut short ended
//! only UNAVAILABLE, CANCELLED or DEADLINE_EXCEEDED (never INTERNAL), and that every node
//! still running ends with the same receipts; it prints the figures the row shows.
//! Needs root (PostgreSQL runs as `postgres`) and the Debian packages patroni, etcd-server
//! and haproxy (`scripts/test` installs them).

mod cluster;
mod config;
mod rest;

use crate::common::process::free_addr;
use crate::faults::{Db, SECOND, replica};
use crate::history::{Call, Op, Outcome, checker, workload};
use claimd::pb::Decision;
use cluster::Cluster;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::block_in_place;

/// How the leader is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// SIGKILL of Patroni, its postmaster and every backend: the leader key runs out (ttl).
    Node,
    /// SIGKILL of the postmaster and every backend; Patroni sees it on its next loop.
    Postmaster,
}

/// What one round measured, for the row.
struct Figures {
    kill: Kill,
    ops: usize,
    acknowledged: usize,
    claimed: usize,
    /// Calls sent after the kill and answered before the first write, by outcome.
    in_window: BTreeMap<String, usize>,
    /// From the kill to the first write answered through the new leader (sent after it).
    first_write: Duration,
    new_leader: String,
    /// From the kill until Patroni named the new leader.
    leader_after: Duration,
    verdict: String,
}

/// Whether `op` certainly wrote: a CLAIMED Claim or an accepted holder call.
fn wrote(op: &Op) -> bool {
    match op.call {
        Call::Claim => op.decision() == Some(Decision::Claimed),
        Call::Get => false,
        _ => op.acknowledged(),
    }
}

/// The history workload with 5 s leases. A commit waits for the synchronous standby, and
/// right after a failover the new leader has none until the remaining replica follows it
/// (a Patroni loop or so): with the workload's usual 1 s leases, a few CLAIMED answers per
/// round arrived after the lease they grant had ended (docs/RELIABILITY.md's Patroni row).
fn workload() -> workload::Workload {
    workload::Workload {
        lease: 5 * SECOND,
        ..workload::Workload::default()
    }
}

/// A fresh database on the primary (through HAProxy).
async fn create_database(cluster: &Cluster) -> String {
    let name = format!("claimd_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(&cluster.url("postgres"))
        .await
        .unwrap_or_else(|e| panic!("cannot reach the primary through HAProxy: {e}"));
    conn.execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
    name
}

/// The receipts of `db` on node `name`: how many, and a digest of them in key order.
async fn receipts_on(cluster: &Cluster, name: &str, db: &str) -> Option<(i64, String)> {
    let mut conn = PgConnection::connect(&cluster.node_url(name, db))
        .await
        .ok()?;
    let digest = "SELECT count(*), coalesce(md5(string_agg(r::text, E'\\n' \
                  ORDER BY tenant_id, namespace, key)), '') FROM receipts r";
    sqlx::query_as(digest).fetch_one(&mut conn).await.ok()
}

/// Every running node ends with the same receipts in `db` (replicas catch up within 30 s).
async fn same_receipts_everywhere(cluster: &Cluster, db: &str) -> (usize, i64) {
    let deadline = Instant::now() + 30 * SECOND;
    loop {
        let mut seen = Vec::new();
        for name in cluster.running() {
            seen.push((name.clone(), receipts_on(cluster, &name, db).await));
        }
        let first = &seen[0].1;
        if first.is_some() && seen.iter().all(|(_, r)| r == first) {
            return (seen.len(), first.as_ref().map_or(0, |r| r.0));
        }
        assert!(
            Instant::now() < deadline,
            "the nodes hold different receipts: {seen:?}"
        );
        tokio::time::sleep(SECOND / 5).await;
    }
}

/// One round: a fresh database, two claimd replicas through HAProxy, the workload, the
/// leader killed as `kill` says 2 s in, the load kept on until a write went through the
/// new leader and 3 s more; then the checks. Returns the figures and the killed leader.
async fn round(cluster: &mut Cluster, kill: Kill) -> (Figures, String) {
    let db = create_database(cluster).await;
    let url = cluster.url(&db);
    let (a, b) = (free_addr(), free_addr());
    let _first = replica(Db::Postgres(&url), a).await;
    let _second = replica(Db::Postgres(&url), b).await;
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        let load = workload();
        tokio::spawn(async move { workload::run(&load, &[a, b], stop).await })
    };
    tokio::time::sleep(2 * SECOND).await;
    // Reason: the round starts from a healthy cluster (the caller waited for it).
    let old = cluster.leader().expect("a leader before the kill");
    let killed_at = Instant::now();
    match kill {
        Kill::Node => cluster.kill_node(&old),
        Kill::Postmaster => cluster.kill_postmaster(&old),
    }
    // Every process of the old leader has ended: a write sent from now on goes through
    // the new one.
    let dead_at = Instant::now();
    let new_leader = block_in_place(|| {
        let deadline = Instant::now() + 60 * SECOND;
        loop {
            if let Some(leader) = cluster.leader().filter(|l| *l != old) {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader:\n{}",
                cluster.logs()
            );
            std::thread::sleep(SECOND / 10);
        }
    });
    let leader_after = killed_at.elapsed();
    // The callers keep going through the failover; 3 s after the new leader is routed to.
    block_in_place(|| cluster.wait_routing_only_to(&new_leader));
    tokio::time::sleep(3 * SECOND).await;
    stop.store(true, Ordering::SeqCst);
    let history = running.await.expect("the workload ran");
    let finals = workload::finals(&history, a, 30 * SECOND).await;
    let verdict = checker::check(&history, &finals);
    let first = history.iter().filter(|op| op.start > dead_at && wrote(op));
    let first = first.map(|op| op.end).min();
    let first = first.unwrap_or_else(|| panic!("no write after the {kill:?} kill: {verdict:?}"));
    let mut in_window = BTreeMap::new();
    for op in history
        .iter()
        .filter(|op| op.start > dead_at && op.end < first)
    {
        let outcome = match op.outcome {
            Outcome::Ok { .. } => "OK".to_owned(),
            Outcome::Refused(code) | Outcome::Unknown(code) => format!("{code:?}"),
        };
        *in_window.entry(outcome).or_default() += 1;
    }
    let figures = Figures {
        kill,
        ops: verdict.ops,
        acknowledged: verdict.acknowledged,
        claimed: verdict.claimed,
        in_window,
        first_write: first - killed_at,
        new_leader,
        leader_after,
        verdict: if verdict.violations.is_empty() {
            "valid".to_owned()
        } else {
            format!("{:?}", verdict.rules())
        },
    };
    println!(
        "patroni {kill:?} kill of {old}: {} calls, {} answered, {} CLAIMED, cut short {:?}; \
         new leader {} after {:.1} s; first write {:.1} s after the kill; in that window {:?}; \
         checker {}",
        figures.ops,
        figures.acknowledged,
        figures.claimed,
        verdict.cut_short,
        figures.new_leader,
        figures.leader_after.as_secs_f64(),
        figures.first_write.as_secs_f64(),
        figures.in_window,
        figures.verdict
    );
    assert!(
        verdict.claimed > 20,
        "too little load to judge: {verdict:?}"
    );
    verdict.assert_valid();
    let allowed = ["Unavailable", "Cancelled", "DeadlineExceeded"];
    assert!(
        verdict
            .cut_short
            .keys()
            .all(|c| allowed.contains(&c.as_str())),
        "calls the {kill:?} kill cut short ended otherwise than {allowed:?}: {:?}",
        verdict.cut_short
    );
    assert!(
        verdict.cut_short.contains_key("Unavailable"),
        "the {kill:?} kill cut no call short: {:?}",
        verdict.cut_short
    );
    let (nodes, receipts) = same_receipts_everywhere(cluster, &db).await;
    println!("patroni {kill:?} kill: {nodes} nodes hold the same {receipts} receipts");
    (figures, old)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_patroni_leader_failovers_lose_nothing_acknowledged_and_answer_no_internal() {
    let began = Instant::now();
    let mut cluster = tokio::task::spawn_blocking(Cluster::start)
        .await
        .expect("the Patroni cluster starts");
    let (node, killed) = round(&mut cluster, Kill::Node).await;
    // The old leader rejoins as a replica (pg_rewind) before the second round.
    cluster.restart_node(&killed);
    let leader = block_in_place(|| cluster.wait_healthy(3, 90 * SECOND));
    block_in_place(|| cluster.wait_routing_only_to(&leader));
    let (postmaster, _) = round(&mut cluster, Kill::Postmaster).await;
    for f in [&node, &postmaster] {
        println!(
            "row: {:?} kill: {} calls ({} answered, {} CLAIMED); first write {:.1} s; \
             window {:?}; checker {}",
            f.kill,
            f.ops,
            f.acknowledged,
            f.claimed,
            f.first_write.as_secs_f64(),
            f.in_window,
            f.verdict
        );
    }
    println!(
        "patroni test wall time {:.0} s",
        began.elapsed().as_secs_f64()
    );
}
