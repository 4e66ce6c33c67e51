//! Real callers over gRPC that record a history while a fault test does its worst.
//!
//! Each caller talks to one replica (callers are spread over the addresses given) and loops:
//! it Claims a key from a small hot set that moves on every `epoch` (so several callers
//! contend for each key, and keys settle), and when it is CLAIMED it Completes (most of the
//! time), heartbeats first, schedules a Retry, quarantines, or walks away and comes back
//! after the lease ran out to Complete with its old token — which must then be refused if
//! someone took over. Every call has its own deadline; a call that fails for a reason that
//! does not say whether it happened is recorded as `Unknown` and the caller carries on.
//! Optionally (`Workload`): short deadlines told to claimd, random leases, Claims that
//! `wait`, holders that send a settling call twice at once, a Get after every call cut
//! short at its deadline (`caller.rs`), and, against a claimd whose quotas refuse calls, a
//! Get after every refused call and holders that send a refused call again.

mod caller;

use super::{Call, Final, Micros, Op, Outcome, Recorder, micros};
use caller::Caller;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{self, Decision};
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// The namespace of every history.
pub const NS: &str = "history";

/// How callers behave.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Concurrent callers.
    pub callers: usize,
    /// Keys in the hot set at a time.
    pub hot: usize,
    /// How long a hot set lasts.
    pub epoch: Duration,
    /// The lease a Claim (and a Heartbeat) asks for; with `lease_max`, a random one from
    /// `lease` to `lease_max`.
    pub lease: Duration,
    pub lease_max: Option<Duration>,
    /// The deadline of each call.
    pub call_timeout: Duration,
    /// When set, every other caller gives each call a random deadline of `cancel_from` to
    /// this, so many calls are cancelled while queued, in a statement, or on the way back.
    pub cancel_within: Option<Duration>,
    pub cancel_from: Duration,
    /// Whether the other callers tell claimd their `call_timeout` as the call's deadline
    /// (`grpc-timeout`) instead of only giving up on it themselves.
    pub tell_deadline: bool,
    /// Whether a call cut short at a deadline it told claimd is followed by a Get of its key
    /// once the deadline and the checker's margin have passed (`checker::ERROR_MARGIN`).
    pub read_after_error: bool,
    /// How often (in percent) a holder sends its settling call twice at once (a Retry
    /// twice, or a Retry and a Quarantine), as a client that retries on its own does: one
    /// may be accepted, never both.
    pub twin_settles: u32,
    /// When set, a holder works for a random time up to this between its CLAIMED and what
    /// it does next (as real holders do), so its calls meet the locks and stuck batches of
    /// a fault.
    pub work: Option<Duration>,
    /// How often (in percent) a holder heartbeats before it settles, besides the usual
    /// tenth of holders that do (a row about Heartbeats asks for more).
    pub beats: u32,
    /// How often (in percent) a holder walks away with its token, to come back with it
    /// after its lease ran out.
    pub walk_away: u32,
    /// When set, the Claims of the callers without a short deadline ask claimd to wait
    /// this long for an IN_FLIGHT receipt to settle (docs/DESIGN.md §2.9).
    pub claim_wait: Option<Duration>,
    /// The store clock's offset from this machine's wall clock, in microseconds (zero for
    /// a claimd binary; a `TestApp`'s `clock.offset_micros()`).
    pub clock_offset: Micros,
    /// The API key every call sends (`authorization: Bearer …`), for a claimd that has keys
    /// (the deployment test's); `None` sends none.
    pub api_key: Option<String>,
    /// For a claimd whose quotas refuse calls (docs/DESIGN.md §5.15): every Claim and holder
    /// call refused RESOURCE_EXHAUSTED is followed at once by a Get of its key (recorded:
    /// the checker looks there for the refused call's effect), and a holder sends a refused
    /// call again after a pause, up to [`REFUSED_TRIES`] times in all, as a client honouring
    /// the RetryInfo does.
    pub quota_refusals: bool,
    /// How often (in percent) a holder quarantines, besides the usual 4 % of holders that
    /// do (a row that needs Quarantines refused and served asks for more).
    pub quarantines: u32,
}

/// How many times a holder sends a call its quota refuses, at most (`quota_refusals`).
pub const REFUSED_TRIES: u32 = 5;

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            callers: 12,
            hot: 64,
            epoch: Duration::from_millis(2000),
            // The shortest lease and retry delay claimd accepts (docs/DESIGN.md §2.8).
            lease: Duration::from_secs(1),
            lease_max: None,
            call_timeout: Duration::from_secs(3),
            cancel_within: None,
            cancel_from: Duration::from_micros(500),
            tell_deadline: false,
            read_after_error: false,
            twin_settles: 0,
            work: None,
            walk_away: 14,
            beats: 0,
            claim_wait: None,
            clock_offset: 0,
            api_key: None,
            quota_refusals: false,
            quarantines: 0,
        }
    }
}

/// A channel to `addr` that connects when first used and again after a failure.
pub fn channel(addr: SocketAddr, timeout: Duration) -> ClaimServiceClient<Channel> {
    // A loopback http URL is always a valid endpoint.
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("valid endpoint");
    let channel = endpoint
        .connect_timeout(Duration::from_secs(1))
        .timeout(timeout)
        .connect_lazy();
    ClaimServiceClient::new(channel)
}

/// The key of hot-set slot `pick` in epoch `epoch` (the hot set moves on every epoch).
pub fn key(epoch: u128, pick: usize) -> String {
    format!("e{epoch}-k{pick}")
}

/// Runs `workload` against `replicas` until `stop` is set; returns the history.
pub async fn run(workload: &Workload, replicas: &[SocketAddr], stop: Arc<AtomicBool>) -> Vec<Op> {
    let history = Recorder::default();
    let reads = Arc::new(Mutex::new(Vec::new()));
    let began = Instant::now();
    let lease_max = workload
        .lease_max
        .unwrap_or(workload.lease)
        .max(workload.lease);
    let tasks = (0..workload.callers).map(|id| {
        let short = workload.cancel_within.filter(|_| id % 2 == 1);
        let caller = Caller {
            client: channel(replicas[id % replicas.len()], workload.call_timeout),
            history: history.clone(),
            lease: (workload.lease, lease_max),
            short: short.map(|most| (workload.cancel_from, most)),
            told: Some(workload.call_timeout).filter(|_| workload.tell_deadline),
            offset: workload.clock_offset,
            read_after_error: workload.read_after_error,
            wait: workload.claim_wait.filter(|_| short.is_none()),
            reads: reads.clone(),
            api_key: workload.api_key.clone(),
        };
        let (w, stop) = (workload.clone(), stop.clone());
        tokio::spawn(async move {
            // Tokens this caller walked away from, to come back with after their lease.
            let mut abandoned: Vec<(Instant, String, String)> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let epoch = began.elapsed().as_millis() / w.epoch.as_millis().max(1);
                let key = key(epoch, rand::rng().random_range(0..w.hot));
                if let Some(i) = abandoned
                    .iter()
                    .position(|(at, ..)| at.elapsed() > lease_max)
                {
                    let (_, key, token) = abandoned.swap_remove(i);
                    hold(&caller, &w, &key, Call::Complete, Some(&token)).await;
                    continue;
                }
                let outcome = caller.call(&key, Call::Claim, None).await;
                if w.quota_refusals && outcome == REFUSED {
                    caller.call(&key, Call::Get, None).await;
                }
                let Outcome::Ok {
                    decision: Some(Decision::Claimed),
                    token: Some(token),
                    ..
                } = outcome
                else {
                    // Not ours: give the holder a moment (longer when claimd is unwell).
                    let pause = match outcome {
                        Outcome::Ok { .. } => 5,
                        _ => 20,
                    };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                };
                if let Some(most) = w.work {
                    let ms = rand::rng().random_range(0..=most.as_millis());
                    let ms = u64::try_from(ms).unwrap_or(u64::MAX);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                if rand::rng().random_range(0..100) < w.walk_away {
                    abandoned.push((Instant::now(), key, token));
                    continue;
                }
                let t = Some(token.as_str());
                if rand::rng().random_range(0..100) < w.beats {
                    hold(&caller, &w, &key, Call::Heartbeat, t).await;
                }
                if rand::rng().random_range(0..100) < w.twin_settles {
                    let again = match rand::rng().random_bool(0.5) {
                        true => Call::Retry,
                        false => Call::Quarantine,
                    };
                    let both = futures::future::join(
                        caller.call(&key, Call::Retry, t),
                        caller.call(&key, again, t),
                    );
                    drop(both.await);
                    continue;
                }
                if rand::rng().random_range(0..100) < w.quarantines {
                    hold(&caller, &w, &key, Call::Quarantine, t).await;
                    continue;
                }
                let roll = rand::rng().random_range(0..86);
                match roll {
                    0..60 => drop(hold(&caller, &w, &key, Call::Complete, t).await),
                    60..70 => {
                        hold(&caller, &w, &key, Call::Heartbeat, t).await;
                        hold(&caller, &w, &key, Call::Complete, t).await;
                    }
                    70..82 => drop(hold(&caller, &w, &key, Call::Retry, t).await),
                    _ => drop(hold(&caller, &w, &key, Call::Quarantine, t).await),
                }
            }
        })
    });
    for task in futures::future::join_all(tasks.collect::<Vec<_>>()).await {
        // A caller panics only when the test itself is broken.
        task.expect("a caller task ran to its end");
    }
    let reads = std::mem::take(&mut *reads.lock().unwrap_or_else(|p| p.into_inner()));
    for read in futures::future::join_all(reads).await {
        // A read panics only when the test itself is broken.
        read.expect("a read after an error ran to its end");
    }
    history.ops()
}

/// What a quota refusal is recorded as.
const REFUSED: Outcome = Outcome::Refused(tonic::Code::ResourceExhausted);

/// A holder call. With `quota_refusals`, a call refused RESOURCE_EXHAUSTED is followed by a
/// Get of its key and sent again after 20–150 ms, up to [`REFUSED_TRIES`] times in all;
/// the last outcome.
async fn hold(
    caller: &Caller,
    w: &Workload,
    key: &str,
    call: Call,
    token: Option<&str>,
) -> Outcome {
    let mut tries = 0;
    loop {
        let outcome = caller.call(key, call, token).await;
        tries += 1;
        if !w.quota_refusals || outcome != REFUSED {
            return outcome;
        }
        caller.call(key, Call::Get, None).await;
        if tries == REFUSED_TRIES {
            return outcome;
        }
        let pause = rand::rng().random_range(20..=150);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Reads every key of `history` through `addr`, retrying for up to `patience` while the
/// service recovers; a key that was never written is absent from the map.
pub async fn finals(
    history: &[Op],
    addr: SocketAddr,
    patience: Duration,
) -> HashMap<String, Final> {
    finals_as(history, addr, patience, None).await
}

/// [`finals`], each Get sending `api_key` when there is one.
pub async fn finals_as(
    history: &[Op],
    addr: SocketAddr,
    patience: Duration,
    api_key: Option<&str>,
) -> HashMap<String, Final> {
    let keys: HashSet<&str> = history.iter().map(|o| o.key.as_str()).collect();
    let mut client = channel(addr, Duration::from_secs(5));
    let deadline = Instant::now() + patience;
    let mut finals = HashMap::new();
    for key in keys {
        loop {
            let mut request = tonic::Request::new(pb::GetRequest {
                namespace: NS.into(),
                key: key.into(),
            });
            if let Some(key) = api_key {
                caller::authorize(&mut request, key);
            }
            match client.get(request).await {
                Ok(r) => {
                    // A Get that answers always carries the receipt.
                    let r = r.into_inner().receipt.expect("Get answers a receipt");
                    finals.insert(
                        key.to_owned(),
                        Final {
                            attempt: r.attempt,
                            state: r.state(),
                            lease_end: micros(r.lease_expires_at),
                            updated_at: micros(r.updated_at),
                            response: r.response,
                        },
                    );
                    break;
                }
                Err(s) if s.code() == tonic::Code::NotFound => break,
                Err(s) => {
                    assert!(
                        Instant::now() < deadline,
                        "the final read of {key} failed: {s}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    finals
}
