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
mod node;
mod rest;

use crate::common::process::{Claimd, free_addr};
use crate::faults::{Db, SECOND, replica};
use crate::history::{Call, Op, Outcome, checker, workload};
use claimd::pb::{self, Decision};
use cluster::Cluster;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::task::block_in_place;

/// How the leader is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// SIGKILL of Patroni, its postmaster and every backend: the leader key runs out (ttl).
    Node,
    /// SIGKILL of the postmaster and every backend; Patroni sees it on its next loop.
    Postmaster,
}

/// Whether `op` certainly wrote: a CLAIMED Claim or an accepted holder call.
fn wrote(op: &Op) -> bool {
    match op.call {
        Call::Claim => op.decision() == Some(Decision::Claimed),
        Call::Get => false,
        _ => op.acknowledged(),
    }
}

/// When the first write sent after `dead_at` (every process of the old leader gone) was
/// answered, and the calls that ended between `killed_at` and then, by outcome (`OK` or the
/// status code).
fn window(
    history: &[Op],
    killed_at: Instant,
    dead_at: Instant,
) -> (Instant, BTreeMap<String, usize>) {
    let first = history.iter().filter(|op| op.start > dead_at && wrote(op));
    // Reason: the round waited for a write through the new leader before it stopped.
    let first = first
        .map(|op| op.end)
        .min()
        .expect("a write after the kill");
    let mut ended = BTreeMap::new();
    for op in history
        .iter()
        .filter(|op| op.end > killed_at && op.end < first)
    {
        let outcome = match op.outcome {
            Outcome::Ok { .. } => "OK".to_owned(),
            Outcome::Refused(code) | Outcome::Unknown(code) => format!("{code:?}"),
        };
        *ended.entry(outcome).or_default() += 1;
    }
    (first, ended)
}

/// The history workload with its usual 1 s leases. With them, before `api::wait::claim_live`,
/// a few CLAIMED answers per round arrived after their lease had ended (the commit waited for
/// the synchronous standby a new leader did not have yet), and once an attempt was granted to
/// a Claim that then answered IN_FLIGHT. claimd now claims again before it answers, and
/// answers UNAVAILABLE when the receipt was taken over meanwhile or the lease is still short.
fn workload() -> workload::Workload {
    workload::Workload {
        lease: SECOND,
        ..workload::Workload::default()
    }
}

/// Claims fresh keys (a namespace of their own) through `addr` until one is answered
/// (60 s at most): the new leader takes writes.
async fn a_write_goes_through(addr: SocketAddr) {
    let mut client = workload::channel(addr, 5 * SECOND);
    let deadline = Instant::now() + 60 * SECOND;
    for n in 0.. {
        let request = pb::ClaimRequest {
            namespace: "probe".into(),
            key: format!("after-failover-{n}"),
            ..Default::default()
        };
        match client.claim(request).await {
            Ok(_) => return,
            Err(status) => assert!(
                Instant::now() < deadline,
                "no write went through within 60 s of the kill: {status}"
            ),
        }
        tokio::time::sleep(SECOND / 10).await;
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
    let (port, standby): (i32, bool) =
        sqlx::query_as("SELECT inet_server_port(), pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await
            .expect("where the database was created");
    assert!(
        !standby,
        "HAProxy led to a standby (port {port}):\n{}",
        cluster.logs()
    );
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

/// Every node whose Patroni runs ends with the same receipts in `db` (replicas catch up
/// within 30 s); returns how many nodes and receipts.
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

/// The first lines of the replicas' logs that say ERROR or WARN, for failure messages.
fn errors(replicas: &[Claimd]) -> String {
    let logs = replicas
        .iter()
        .map(Claimd::log)
        .collect::<Vec<_>>()
        .join("\n");
    let lines = logs
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"));
    lines.take(20).collect::<Vec<_>>().join("\n")
}

/// Waits (60 s at most) until Patroni names a running leader other than `old`.
fn new_leader(cluster: &Cluster, old: &str) -> String {
    let deadline = Instant::now() + 60 * SECOND;
    loop {
        if let Some(leader) = cluster.leader().filter(|l| l != old) {
            return leader;
        }
        assert!(
            Instant::now() < deadline,
            "no new leader:\n{}",
            cluster.logs()
        );
        std::thread::sleep(SECOND / 10);
    }
}

/// One round: a fresh database, two claimd replicas through HAProxy, the workload, the
/// leader killed as `kill` says 2 s in, the load kept on until a write went through the
/// new leader and 3 s more; then the checks. Prints the figures; returns the old leader.
async fn round(cluster: &mut Cluster, kill: Kill) -> String {
    let db = create_database(cluster).await;
    let url = cluster.url(&db);
    let (a, b) = (free_addr(), free_addr());
    let replicas = [
        replica(Db::Postgres(&url), a).await,
        replica(Db::Postgres(&url), b).await,
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move { workload::run(&workload(), &[a, b], stop).await })
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
    let leader = block_in_place(|| new_leader(cluster, &old));
    let leader_after = killed_at.elapsed();
    // The callers keep going through the failover, and for 3 s after a write went
    // through the new leader.
    block_in_place(|| cluster.wait_routing_only_to(&leader));
    a_write_goes_through(a).await;
    tokio::time::sleep(3 * SECOND).await;
    stop.store(true, Ordering::SeqCst);
    let history = running.await.expect("the workload ran");
    let finals = workload::finals(&history, a, 30 * SECOND).await;
    let verdict = checker::check(&history, &finals);
    let (first, ended) = window(&history, killed_at, dead_at);
    // Shown with --nocapture: the figures of docs/RELIABILITY.md's row.
    println!(
        "patroni {kill:?} kill of {old}: {} calls, {} answered, {} CLAIMED, cut short {:?}; \
         new leader {leader} after {:.1} s; first write {:.1} s after the kill; calls ended \
         meanwhile {ended:?}; violations {:?}",
        verdict.ops,
        verdict.acknowledged,
        verdict.claimed,
        verdict.cut_short,
        leader_after.as_secs_f64(),
        (first - killed_at).as_secs_f64(),
        verdict.rules(),
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
        "calls the {kill:?} kill cut short ended otherwise than {allowed:?}: {:?}; claimd \
         said:\n{}",
        verdict.cut_short,
        errors(&replicas)
    );
    assert!(
        verdict.cut_short.contains_key("Unavailable"),
        "the {kill:?} kill cut no call short: {:?}",
        verdict.cut_short
    );
    let (nodes, receipts) = same_receipts_everywhere(cluster, &db).await;
    println!("patroni {kill:?} kill: {nodes} nodes hold the same {receipts} receipts");
    old
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_patroni_leader_failovers_lose_nothing_acknowledged_and_answer_no_internal() {
    let began = Instant::now();
    let mut cluster = tokio::task::spawn_blocking(Cluster::start)
        .await
        .expect("the Patroni cluster starts");
    let killed = round(&mut cluster, Kill::Node).await;
    // The old leader rejoins as a replica (pg_rewind) before the second round.
    cluster.restart_node(&killed);
    let leader = block_in_place(|| cluster.wait_healthy(3, 90 * SECOND));
    block_in_place(|| cluster.wait_routing_only_to(&leader));
    round(&mut cluster, Kill::Postmaster).await;
    println!("patroni test: {:.0} s", began.elapsed().as_secs_f64());
}
