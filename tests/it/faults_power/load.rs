//! The power-failure rows' load and their accounting: the history workload against one
//! claimd while the failures happen, the checker over the whole history with a final read of
//! every key, and every answered write read back — the attempt it answered reached, a
//! receipt answered COMPLETED (with its response) or QUARANTINED still so.

use super::lazyfs::LazyFs;
use crate::history::{Call, Final, Op, Outcome, checker, workload};
use claimd::pb::{Decision, State};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Answered writes and how many of them the final read does not show.
#[derive(Debug)]
pub struct ReadBack {
    /// Claims answered CLAIMED; Completes, Heartbeats, Retries and Quarantines answered.
    pub answered: usize,
    /// The keys they wrote.
    pub keys: usize,
    /// Answered writes whose effect the final read does not show.
    pub lost: Vec<String>,
}

/// Runs the workload against `addr` while `failures` runs, then for `settle` more; checks
/// the history against a final read through `addr` and reads every answered write back.
pub async fn recorded<F: Future<Output = ()>>(
    addr: SocketAddr,
    settle: Duration,
    failures: F,
) -> (checker::Verdict, ReadBack) {
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        tokio::spawn(
            async move { workload::run(&workload::Workload::default(), &[addr], stop).await },
        )
    };
    failures.await;
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::SeqCst);
    // The callers end when their last call does: within one call's deadline.
    let history = running.await.expect("the workload ran");
    let finals = workload::finals(&history, addr, Duration::from_secs(30)).await;
    let verdict = checker::check(&history, &finals);
    let back = read_back(&history, &finals);
    // Shown with --nocapture: the load and the figures of the row in docs/RELIABILITY.md.
    println!(
        "history: {} calls, {} answered, {} unknown {:?}, {} CLAIMED, {} violations; \
         read back: {} answered writes over {} keys, lost {}",
        verdict.ops,
        verdict.acknowledged,
        verdict.unknown,
        verdict.cut_short,
        verdict.claimed,
        verdict.violations.len(),
        back.answered,
        back.keys,
        back.lost.len()
    );
    assert!(
        verdict.claimed > 20,
        "too little load to judge: {verdict:?}"
    );
    (verdict, back)
}

/// Every answered write of `history` against what `finals` shows of its key.
pub fn read_back(history: &[Op], finals: &HashMap<String, Final>) -> ReadBack {
    // A Claim writes when it is CLAIMED; every other answered call but Get wrote, or found
    // its write already there (a Complete repeated).
    let wrote = |o: &&Op| match o.call {
        Call::Get => false,
        Call::Claim => o.decision() == Some(Decision::Claimed),
        _ => o.acknowledged(),
    };
    let writes: Vec<&Op> = history.iter().filter(wrote).collect();
    let keys: HashSet<&str> = writes.iter().map(|o| o.key.as_str()).collect();
    let lost = writes
        .iter()
        .filter_map(|op| {
            let Outcome::Ok {
                attempt,
                state,
                response,
                ..
            } = &op.outcome
            else {
                return None;
            };
            let last = finals.get(&op.key);
            let kept = last.is_some_and(|last| {
                last.attempt >= *attempt
                    && match state {
                        State::Completed => {
                            last.state == State::Completed && &last.response == response
                        }
                        State::Quarantined => last.state == State::Quarantined,
                        _ => true,
                    }
            });
            let (call, key) = (op.call, &op.key);
            (!kept).then(|| format!("{call:?} of {key} answered {state:?} at {attempt}: {last:?}"))
        })
        .collect();
    ReadBack {
        answered: writes.len(),
        keys: keys.len(),
        lost,
    }
}

/// The power failure once every process writing to `fs` is dead: what is not fsynced is
/// dropped. Checks the cache never filled (writes past it would have bypassed the
/// simulation); prints what was dropped.
pub fn power_failure(fs: &LazyFs, n: usize) {
    let usage = cache_usage(fs);
    let (bytes, files) = fs.unsynced();
    fs.clear_cache();
    dropped(n, "at a random moment", bytes, files, usage);
}

/// The power failure at the worst moment: LazyFS dies, its cache with it, right before the
/// next fsync of a file matching `pattern` — a commit written, not yet durable, so not yet
/// answered. Prints what was lost; then kill the writers and mount LazyFS again.
pub fn power_failure_before_fsync(fs: &LazyFs, pattern: &str, n: usize) {
    let usage = cache_usage(fs);
    fs.crash_before_fsync_of(pattern);
    let (bytes, files) = fs.crashed();
    dropped(
        n,
        &format!("before an fsync of {pattern}"),
        bytes,
        files,
        usage,
    );
}

/// How full LazyFS's cache is, checked below full: writes past it would bypass it.
fn cache_usage(fs: &LazyFs) -> f64 {
    let usage = fs.usage();
    assert!(
        usage < 100.0,
        "LazyFS's cache filled ({usage}%): later writes bypassed it; give it more"
    );
    usage
}

/// Shown with --nocapture: what a failure dropped.
fn dropped(n: usize, when: &str, bytes: u64, mut files: Vec<String>, usage: f64) {
    files.sort();
    files.dedup();
    let more = if files.len() > 6 { ", …" } else { "" };
    println!(
        "power failure {n} ({when}): {bytes} unsynced bytes of {} files dropped ({}{more}); \
         cache {usage:.1}% used",
        files.len(),
        files[..files.len().min(6)].join(", ")
    );
}
