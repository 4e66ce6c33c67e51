//! Real callers over gRPC that record a history while a fault test does its worst.
//!
//! Each caller talks to one replica (callers are spread over the addresses given) and loops:
//! it Claims a key from a small hot set that moves on every `epoch` (so several callers
//! contend for each key, and keys settle), and when it is CLAIMED it Completes (most of the
//! time), heartbeats first, schedules a Retry, quarantines, or walks away and comes back
//! after the lease ran out to Complete with its old token — which must then be refused if
//! someone took over. Every call has its own deadline; a call that fails for a reason that
//! does not say whether it happened is recorded as `Unknown` and the caller carries on.

use super::{Call, Final, Op, Outcome, Recorder, outcome_of};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{self, Decision};
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The lease a Claim asks for.
    pub lease: Duration,
    /// The deadline of each call.
    pub call_timeout: Duration,
    /// When set, every other caller gives each call a random deadline of at most this, so
    /// many calls are cancelled while queued, in a statement, or on the way back.
    pub cancel_within: Option<Duration>,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            callers: 12,
            hot: 64,
            epoch: Duration::from_millis(2000),
            // The shortest lease and retry delay claimd accepts (docs/DESIGN.md §2.8).
            lease: Duration::from_secs(1),
            call_timeout: Duration::from_secs(3),
            cancel_within: None,
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

fn duration(d: Duration) -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    })
}

/// One caller's client, recording each call.
struct Caller {
    client: ClaimServiceClient<Channel>,
    history: Recorder,
    lease: Duration,
    cancel_within: Option<Duration>,
}

impl Caller {
    /// `message` with this caller's deadline: the channel's, or a random short one.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(most) = self.cancel_within {
            let micros = rand::rng().random_range(500..=most.as_micros().max(501));
            request.set_timeout(Duration::from_micros(u64::try_from(micros).unwrap_or(500)));
        }
        request
    }

    /// Sends one call, records it, and returns its outcome.
    async fn call(&mut self, key: &str, call: Call, token: Option<&str>) -> Outcome {
        let ns = NS.to_owned();
        let k = key.to_owned();
        let t = token.unwrap_or_default().to_owned();
        let sent_response = match call {
            Call::Complete => format!("{key}@{t}").into_bytes(),
            _ => Vec::new(),
        };
        let start = Instant::now();
        let mut c = self.client.clone();
        let answer = match call {
            Call::Claim => c
                .claim(self.request(pb::ClaimRequest {
                    namespace: ns,
                    key: k,
                    fingerprint: key.as_bytes().to_vec(),
                    lease_ttl: duration(self.lease),
                    ..Default::default()
                }))
                .await
                .map(|r| {
                    let r = r.into_inner();
                    (
                        Some(r.decision()),
                        Some(r.claim_token).filter(|t| !t.is_empty()),
                        r.receipt,
                    )
                }),
            Call::Complete => c
                .complete(self.request(pb::CompleteRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    response: sent_response.clone(),
                }))
                .await
                .map(|r| (None, None, r.into_inner().receipt)),
            Call::Heartbeat => c
                .heartbeat(self.request(pb::HeartbeatRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    lease_ttl: duration(self.lease),
                    checkpoint: None,
                }))
                .await
                .map(|r| (None, None, r.into_inner().receipt)),
            Call::Retry => c
                .retry(self.request(pb::RetryRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    error: "flaky".into(),
                    retry_after: duration(Duration::from_secs(1)),
                    count_attempt: None,
                }))
                .await
                .map(|r| (None, None, r.into_inner().receipt)),
            Call::Quarantine => c
                .quarantine(self.request(pb::QuarantineRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    error: "poison".into(),
                }))
                .await
                .map(|r| (None, None, r.into_inner().receipt)),
        };
        let outcome = match answer {
            Ok((decision, token, Some(receipt))) => Outcome::Ok {
                decision,
                token,
                attempt: receipt.attempt,
                state: receipt.state(),
                response: receipt.response,
            },
            Ok((_, _, None)) => Outcome::Unknown(tonic::Code::Internal),
            Err(status) => outcome_of(&status),
        };
        self.history.push(Op {
            key: key.to_owned(),
            call,
            token: token.map(str::to_owned),
            sent_response,
            outcome: outcome.clone(),
            start,
            end: Instant::now(),
        });
        outcome
    }
}

/// Runs `workload` against `replicas` until `stop` is set; returns the history.
pub async fn run(workload: &Workload, replicas: &[SocketAddr], stop: Arc<AtomicBool>) -> Vec<Op> {
    let history = Recorder::default();
    let began = Instant::now();
    let tasks = (0..workload.callers).map(|id| {
        let mut caller = Caller {
            client: channel(replicas[id % replicas.len()], workload.call_timeout),
            history: history.clone(),
            lease: workload.lease,
            cancel_within: workload.cancel_within.filter(|_| id % 2 == 1),
        };
        let (w, stop) = (workload.clone(), stop.clone());
        tokio::spawn(async move {
            // Tokens this caller walked away from, to come back with after their lease.
            let mut abandoned: Vec<(Instant, String, String)> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let epoch = began.elapsed().as_millis() / w.epoch.as_millis().max(1);
                let pick = rand::rng().random_range(0..w.hot);
                let key = format!("e{epoch}-k{pick}");
                if let Some(i) = abandoned.iter().position(|(at, ..)| at.elapsed() > w.lease) {
                    let (_, key, token) = abandoned.swap_remove(i);
                    caller.call(&key, Call::Complete, Some(&token)).await;
                    continue;
                }
                let outcome = caller.call(&key, Call::Claim, None).await;
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
                let roll = rand::rng().random_range(0..100);
                let t = Some(token.as_str());
                match roll {
                    0..60 => drop(caller.call(&key, Call::Complete, t).await),
                    60..70 => {
                        caller.call(&key, Call::Heartbeat, t).await;
                        caller.call(&key, Call::Complete, t).await;
                    }
                    70..82 => drop(caller.call(&key, Call::Retry, t).await),
                    82..86 => drop(caller.call(&key, Call::Quarantine, t).await),
                    _ => abandoned.push((Instant::now(), key, token)),
                }
            }
        })
    });
    for task in futures::future::join_all(tasks.collect::<Vec<_>>()).await {
        // A caller panics only when the test itself is broken.
        task.expect("a caller task ran to its end");
    }
    history.ops()
}

/// Reads every key of `history` through `addr`, retrying for up to `patience` while the
/// service recovers; a key that was never written is absent from the map.
pub async fn finals(
    history: &[Op],
    addr: SocketAddr,
    patience: Duration,
) -> HashMap<String, Final> {
    let keys: HashSet<&str> = history.iter().map(|o| o.key.as_str()).collect();
    let mut client = channel(addr, Duration::from_secs(5));
    let deadline = Instant::now() + patience;
    let mut finals = HashMap::new();
    for key in keys {
        loop {
            let request = pb::GetRequest {
                namespace: NS.into(),
                key: key.into(),
            };
            match client.get(request).await {
                Ok(r) => {
                    // A Get that answers always carries the receipt.
                    let r = r.into_inner().receipt.expect("Get answers a receipt");
                    finals.insert(
                        key.to_owned(),
                        Final {
                            attempt: r.attempt,
                            state: r.state(),
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
