//! The workloads: the untimed setup of a round ([`prepare`]) and one caller's closed loop
//! ([`caller`]), written once for both sides, with every answer checked against the
//! contract. A cycle is:
//!
//! - `new`: Claim of a never-seen key (CLAIMED, attempt 1), then Complete;
//! - `duplicate`: Claim of one of [`pool_keys`] keys completed in setup (COMPLETED, with
//!   the response stored then);
//! - `inflight`: Claim of one of [`pool_keys`] keys claimed in setup under a one-hour lease
//!   (IN_FLIGHT);
//! - `takeover`: Claim of a key claimed in setup under a 1 s lease (the shortest claimd
//!   accepts) that has run out (CLAIMED, attempt 2), then Complete; each key once, so setup
//!   claims as many as the round is expected to use, and a caller stops early if they run
//!   out;
//! - `mixed`: one delivery of an event ([`crate::mixed`]).
//!
//! Keys are `<prefix>-<caller>-<n>` with a prefix unique to the run, round and side.

use crate::cli::Workload;
use crate::runner::{Pacer, Recorder, Tap};
use crate::side::{Answer, ClaimMode, Decision, Side};
use anyhow::bail;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Keys prepared for `duplicate` and `inflight`, shared by the callers round-robin: 16
/// per caller, at least 64 and at most 4096.
pub fn pool_keys(callers: usize) -> usize {
    (callers * 16).clamp(64, 4096)
}
/// The lease of a claim whose holder is working.
pub const WORK_LEASE: Duration = Duration::from_secs(30);
/// The lease `inflight` keys are held under.
pub const LONG_LEASE: Duration = Duration::from_secs(3600);
/// The shortest lease (and retry delay) claimd accepts.
pub const SHORT_LEASE: Duration = Duration::from_secs(1);
/// Waited beyond a lease or retry delay before relying on it having run out.
pub const MARGIN: Duration = Duration::from_millis(100);
/// Concurrent tasks of a setup.
const SETUP_TASKS: usize = 32;

/// The fingerprint sent with `key`: SHA-256 of it, as a caller's digest of a body would be.
pub fn fingerprint(key: &str) -> Vec<u8> {
    Sha256::digest(key.as_bytes()).to_vec()
}

/// The response `key` is completed with (small, as a webhook's acknowledgement is).
pub fn response_for(key: &str) -> Vec<u8> {
    format!("{{\"ok\":true,\"event\":\"{key}\"}}").into_bytes()
}

/// Checks that `answer` to a Claim of `key` is `want` (with `attempt`, for CLAIMED; with
/// the stored response, for COMPLETED).
pub fn check(answer: &Answer, key: &str, want: Decision, attempt: u32) -> Result<(), String> {
    if answer.decision != want {
        return Err(format!(
            "Claim {key}: {:?} (attempt {}), want {want:?}",
            answer.decision, answer.attempt
        ));
    }
    match want {
        Decision::Claimed if answer.token.is_empty() => {
            Err(format!("Claim {key}: CLAIMED without a claim token"))
        }
        Decision::Claimed if answer.attempt != attempt => Err(format!(
            "Claim {key}: CLAIMED with attempt {}, want {attempt}",
            answer.attempt
        )),
        Decision::Completed if answer.response != response_for(key) => Err(format!(
            "Claim {key}: COMPLETED with response {:?}, not the stored one",
            String::from_utf8_lossy(&answer.response)
        )),
        _ => Ok(()),
    }
}

/// What a round's callers share: its keys and the mixed workload's seed.
#[derive(Clone)]
pub struct Plan {
    /// The workload.
    pub workload: Workload,
    /// Unique to the run, round and side.
    pub prefix: String,
    /// Total callers of the round.
    pub callers: usize,
    /// Keys prepared in setup (duplicate, inflight: a pool; takeover: a queue).
    pub keys: Arc<Vec<String>>,
    /// The takeover queue's next key.
    pub next: Arc<AtomicUsize>,
    /// Seeds the mixed workload's random deliveries (same on both sides).
    pub seed: u64,
    /// Holds the mixed workload's deliveries to a rate (a soak; rounds run unpaced).
    pub pace: Option<Arc<Pacer>>,
    /// Where the mixed workload's callers copy their records (a soak's current period).
    pub tap: Option<Tap>,
}

/// Sets a round up, untimed: the keys `duplicate`, `inflight` and `takeover` need
/// (`takeover_keys` of them for takeover), waiting for the short leases to run out.
pub async fn prepare(
    side: &Side,
    workload: Workload,
    prefix: String,
    callers: usize,
    takeover_keys: usize,
    seed: u64,
) -> anyhow::Result<Plan> {
    let count = match workload {
        Workload::Duplicate | Workload::Inflight => pool_keys(callers),
        Workload::Hot => 1,
        Workload::Takeover => takeover_keys,
        Workload::New | Workload::Mixed => 0,
    };
    let keys: Arc<Vec<String>> = Arc::new((0..count).map(|n| format!("{prefix}-s-{n}")).collect());
    let (lease, complete) = match workload {
        Workload::Duplicate | Workload::Hot => (WORK_LEASE, true),
        Workload::Inflight => (LONG_LEASE, false),
        _ => (SHORT_LEASE, false),
    };
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..SETUP_TASKS)
        .map(|t| {
            let (side, keys, next) = (side.clone(), keys.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let Some(key) = keys.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return Ok::<(), String>(());
                    };
                    let fp = fingerprint(key);
                    let answer = side
                        .claim(t, key, &fp, lease, ClaimMode::InsertOnly)
                        .await?;
                    check(&answer, key, Decision::Claimed, 1)?;
                    if complete {
                        side.complete(t, key, &answer.token, &response_for(key))
                            .await?;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        if let Err(e) = task.await? {
            bail!("setup of {} failed: {e}", workload.label());
        }
    }
    if workload == Workload::Takeover {
        // Every lease was granted before now, so it has run out 1 s (plus margin) later.
        tokio::time::sleep(SHORT_LEASE + MARGIN).await;
    }
    next.store(0, Ordering::Relaxed);
    Ok(Plan {
        workload,
        prefix,
        callers,
        keys,
        next,
        seed,
        pace: None,
        tap: None,
    })
}

/// One caller's closed loop until `deadline`.
pub async fn caller(side: Side, plan: Plan, caller: usize, deadline: Instant) -> Recorder {
    if plan.workload == Workload::Mixed {
        return crate::mixed::caller(side, plan, caller, deadline).await;
    }
    let mut rec = Recorder::default();
    let mut n = 0usize;
    while Instant::now() < deadline {
        let key = match plan.workload {
            Workload::Duplicate | Workload::Inflight | Workload::Hot => {
                let i = (caller + n * plan.callers) % plan.keys.len();
                plan.keys[i].clone()
            }
            Workload::Takeover => match plan.keys.get(plan.next.fetch_add(1, Ordering::Relaxed)) {
                Some(key) => key.clone(),
                None => {
                    rec.ran_out = true;
                    break;
                }
            },
            _ => format!("{}-{caller}-{n}", plan.prefix),
        };
        n += 1;
        let start = Instant::now();
        match cycle(&side, plan.workload, caller, &key).await {
            Ok(()) => rec.ok(start.elapsed()),
            Err(e) => rec.error(e),
        }
    }
    rec
}

/// One cycle of `new`, `duplicate`, `inflight`, `takeover` or `hot` on `key`.
async fn cycle(side: &Side, workload: Workload, caller: usize, key: &str) -> Result<(), String> {
    let fp = fingerprint(key);
    match workload {
        Workload::New | Workload::Takeover => {
            let (mode, attempt) = match workload {
                Workload::New => (ClaimMode::InsertOnly, 1),
                _ => (ClaimMode::Takeover, 2),
            };
            let answer = side.claim(caller, key, &fp, WORK_LEASE, mode).await?;
            check(&answer, key, Decision::Claimed, attempt)?;
            side.complete(caller, key, &answer.token, &response_for(key))
                .await
        }
        Workload::Duplicate | Workload::Hot => {
            let answer = side.claim(caller, key, &fp, WORK_LEASE, ClaimMode::InsertOnly);
            check(&answer.await?, key, Decision::Completed, 1)
        }
        Workload::Inflight => {
            let answer = side.claim(caller, key, &fp, WORK_LEASE, ClaimMode::InsertOnly);
            check(&answer.await?, key, Decision::InFlight, 1)
        }
        Workload::Mixed => Err("mixed has no single cycle".into()),
    }
}
