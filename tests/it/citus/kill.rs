//! Issue 45's kill test: two claimd replicas (real processes over real sockets) against
//! the coordinator, serving the history checker's workload for one tenant (`default`: the
//! callers send no API key), while the worker that holds that tenant's shard is killed
//! with SIGKILL (its postmaster and every backend), left down for [`DOWN`] and started
//! again on the same port and data directory, every [`PERIOD`]. The checker must find no
//! violation, no call may be answered INTERNAL, calls must succeed again after every
//! restart, and both replicas must still be running at the end.

use super::cluster::CitusCluster;
use crate::common::process::free_addr;
use crate::faults::{Db, SECOND, replica};
use crate::history::{Op, Outcome, checker, workload};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::task::block_in_place;

/// How often the tenant's worker is killed.
const PERIOD: Duration = Duration::from_secs(12);
/// How long it stays down before it is started again.
const DOWN: Duration = Duration::from_secs(2);
/// Kills in a run.
const KILLS: u32 = 3;
/// The load before the first kill, and after the last restart.
const LEAD: Duration = Duration::from_secs(3);
const TAIL: Duration = Duration::from_secs(10);

/// The history workload, with Claims that wait (docs/DESIGN.md §2.9) for up to 2 s on an
/// IN_FLIGHT receipt, so waiters meet the kills too, and leases of 1 to 2 s.
fn load() -> workload::Workload {
    workload::Workload {
        lease: SECOND,
        lease_max: Some(2 * SECOND),
        call_timeout: 5 * SECOND,
        claim_wait: Some(2 * SECOND),
        ..workload::Workload::default()
    }
}

/// How an op ended: `OK` or its status code.
fn ended(op: &Op) -> String {
    match op.outcome {
        Outcome::Ok { .. } => "OK".to_owned(),
        Outcome::Refused(code) | Outcome::Unknown(code) => format!("{code:?}"),
    }
}

/// The ops of `history` that ended in `[from, to)`, counted by how they ended.
fn by_code(history: &[Op], from: Instant, to: Instant) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for op in history.iter().filter(|op| op.end >= from && op.end < to) {
        *counts.entry(ended(op)).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenants_worker_killed_every_12_s_under_two_replicas_loses_nothing_and_answers_no_internal()
 {
    let mut citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let (a, b) = (free_addr(), free_addr());
    // One after the other: each migrates at its start.
    let mut first = replica(Db::Postgres(&url), a).await;
    let mut second = replica(Db::Postgres(&url), b).await;
    let worker = citus.worker_of(&url, claimd::auth::DEFAULT_TENANT).await;

    let began = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move { workload::run(&load(), &[a, b], stop).await })
    };
    // (killed, started again) for each kill.
    let mut kills = Vec::new();
    for n in 0..KILLS {
        tokio::time::sleep_until((began + LEAD + PERIOD * n).into()).await;
        let killed = Instant::now();
        block_in_place(|| citus.workers[worker].kill_9());
        tokio::time::sleep(DOWN).await;
        block_in_place(|| citus.workers[worker].restart());
        kills.push((killed, Instant::now()));
    }
    tokio::time::sleep(TAIL).await;
    stop.store(true, Ordering::SeqCst);
    let history = running.await.expect("the workload ran");
    let done = Instant::now();
    let finals = workload::finals(&history, a, 30 * SECOND).await;
    let verdict = checker::check(&history, &finals);

    // Shown with --nocapture: the figures of docs/RELIABILITY.md's row.
    println!(
        "citus worker kills: {} calls in {:.0} s, {} answered, {} unknown ({} UNAVAILABLE), \
         {} CLAIMED; all calls by outcome {:?}; violations {:?}",
        verdict.ops,
        began.elapsed().as_secs_f64(),
        verdict.acknowledged,
        verdict.unknown,
        verdict.unavailable,
        verdict.claimed,
        by_code(&history, began, done),
        verdict.rules(),
    );
    let mut windows = Vec::new();
    for (n, (killed, back)) in kills.iter().enumerate() {
        let next = kills.get(n + 1).map_or(done, |(k, _)| *k);
        let down = by_code(&history, *killed, *back);
        let up = by_code(&history, *back, next);
        println!(
            "kill {}: worker down {:.1} s, calls ended meanwhile {down:?}; from its restart to \
             the next kill {up:?}",
            n + 1,
            (*back - *killed).as_secs_f64()
        );
        windows.push((n + 1, down, up));
    }
    // The load is small (one tenant whose every call fails while its worker is down, and
    // on a shared 2-core machine three servers, two debug-build replicas and Citus's
    // planning of every statement): alone a run has ~100 CLAIMED, beside other tests ~20.
    assert!(
        verdict.claimed >= 10,
        "too little load to judge: {verdict:?}"
    );
    verdict.assert_valid();
    citus.assert_routed();
    let internal: Vec<String> = history
        .iter()
        .filter(|op| ended(op) == "Internal")
        .map(|op| format!("{:?} {} at {:?}", op.call, op.key, op.end - began))
        .take(10)
        .collect();
    assert!(
        internal.is_empty(),
        "calls answered INTERNAL: {internal:?}; claimd said:\n{}\n{}",
        first.log(),
        second.log()
    );
    for (n, down, up) in &windows {
        assert!(
            down.contains_key("Unavailable"),
            "kill {n}: no call met the worker down: {down:?}"
        );
        assert!(
            up.get("OK").is_some_and(|ok| *ok > 0),
            "kill {n}: the tenant was not served again after its worker restarted: {up:?}"
        );
    }
    for (name, replica) in [("first", &mut first), ("second", &mut second)] {
        let exited = replica.wait_for_exit(Duration::ZERO).await;
        assert!(
            exited.is_none(),
            "the {name} replica exited ({exited:?}):\n{}",
            replica.log()
        );
    }
}
