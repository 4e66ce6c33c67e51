//! One caller's client: sends each call with the deadline its caller gives (a random short
//! one, the caller's patience told to claimd, or none told), records it in the history with
//! its times on both clocks, and — when a call ends DEADLINE_EXCEEDED or CANCELLED after
//! telling claimd its deadline — reads the receipt once that deadline and the checker's
//! margin have passed, and again while it looks the same (Gets, recorded too), so the
//! history shows what the failed call left and when it changed.

use super::super::checker::ERROR_MARGIN;
use super::super::{Call, Micros, Op, Outcome, Recorder, micros, outcome_of, store_now};
use super::NS;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{self, Receipt};
use rand::Rng;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// How many Gets follow a call cut short at its deadline, at most, and how far apart.
const READS: u32 = 5;
const READ_EVERY: Duration = Duration::from_millis(500);

/// A caller's client and how it behaves.
#[derive(Clone)]
pub(super) struct Caller {
    pub client: ClaimServiceClient<Channel>,
    pub history: Recorder,
    /// The shortest and longest lease a Claim asks for (a random one between).
    pub lease: (Duration, Duration),
    /// A random deadline between these two for every call (told to claimd).
    pub short: Option<(Duration, Duration)>,
    /// Otherwise this deadline is told to claimd (else only the channel's timeout applies).
    pub told: Option<Duration>,
    /// The store clock's offset from this machine's wall clock.
    pub offset: Micros,
    /// Whether a call cut short at its deadline is followed by a Get of its key.
    pub read_after_error: bool,
    /// How long a Claim asks claimd to wait for an IN_FLIGHT receipt to settle.
    pub wait: Option<Duration>,
    /// The Gets still to come.
    pub reads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// The API key each call sends, if any.
    pub api_key: Option<String>,
}

/// Adds `authorization: Bearer {key}` to `request`.
pub(super) fn authorize<T>(request: &mut tonic::Request<T>, key: &str) {
    // An API key is base64url and underscores: always a valid header value.
    let value = format!("Bearer {key}")
        .parse()
        .expect("an API key is ASCII");
    request.metadata_mut().insert("authorization", value);
}

fn duration(d: Duration) -> Option<prost_types::Duration> {
    Some(prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    })
}

fn between(range: (Duration, Duration)) -> Duration {
    let (low, high) = (
        range.0.as_micros(),
        range.1.as_micros().max(range.0.as_micros()),
    );
    let micros = rand::rng().random_range(low..=high);
    Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// What an answer says: the decision, the token and the receipt.
type Answer = Result<(Option<pb::Decision>, Option<String>, Option<Receipt>), tonic::Status>;

impl Caller {
    /// `message` with this caller's deadline, and the deadline told.
    fn request<T>(&self, message: T) -> (tonic::Request<T>, Option<Duration>) {
        let mut request = tonic::Request::new(message);
        if let Some(key) = &self.api_key {
            authorize(&mut request, key);
        }
        let deadline = self.short.map(between).or(self.told);
        if let Some(d) = deadline {
            request.set_timeout(d);
        }
        (request, deadline)
    }

    /// Sends one call, records it, and returns its outcome.
    pub async fn call(&self, key: &str, call: Call, token: Option<&str>) -> Outcome {
        let (ns, k) = (NS.to_owned(), key.to_owned());
        let t = token.unwrap_or_default().to_owned();
        let sent_response = match call {
            Call::Complete => format!("{key}@{t}").into_bytes(),
            _ => Vec::new(),
        };
        let lease = between(self.lease);
        let (start, sent_at) = (Instant::now(), store_now(self.offset));
        let mut c = self.client.clone();
        let receipt =
            |r: Option<Receipt>| -> (Option<pb::Decision>, Option<String>, _) { (None, None, r) };
        let (answer, deadline): (Answer, _) = match call {
            Call::Claim => {
                let (r, d) = self.request(pb::ClaimRequest {
                    namespace: ns,
                    key: k,
                    fingerprint: key.as_bytes().to_vec(),
                    lease_ttl: duration(lease),
                    wait: self.wait.and_then(duration),
                    ..Default::default()
                });
                let a = c.claim(r).await.map(|r| {
                    let r = r.into_inner();
                    let token = Some(r.claim_token.clone()).filter(|t| !t.is_empty());
                    (Some(r.decision()), token, r.receipt)
                });
                (a, d)
            }
            Call::Complete => {
                let (r, d) = self.request(pb::CompleteRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    response: sent_response.clone(),
                });
                (
                    c.complete(r).await.map(|r| receipt(r.into_inner().receipt)),
                    d,
                )
            }
            Call::Heartbeat => {
                let (r, d) = self.request(pb::HeartbeatRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    lease_ttl: duration(lease),
                    checkpoint: None,
                });
                (
                    c.heartbeat(r)
                        .await
                        .map(|r| receipt(r.into_inner().receipt)),
                    d,
                )
            }
            Call::Retry => {
                let (r, d) = self.request(pb::RetryRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    error: "flaky".into(),
                    retry_after: duration(Duration::from_secs(1)),
                    count_attempt: None,
                });
                (c.retry(r).await.map(|r| receipt(r.into_inner().receipt)), d)
            }
            Call::Quarantine => {
                let (r, d) = self.request(pb::QuarantineRequest {
                    namespace: ns,
                    key: k,
                    claim_token: t,
                    error: "poison".into(),
                });
                (
                    c.quarantine(r)
                        .await
                        .map(|r| receipt(r.into_inner().receipt)),
                    d,
                )
            }
            Call::Get => {
                let (r, d) = self.request(pb::GetRequest {
                    namespace: ns,
                    key: k,
                });
                (c.get(r).await.map(|r| receipt(r.into_inner().receipt)), d)
            }
        };
        let outcome = match answer {
            Ok((decision, token, Some(receipt))) => Outcome::Ok {
                decision,
                token,
                attempt: receipt.attempt,
                state: receipt.state(),
                lease_end: micros(receipt.lease_expires_at),
                updated_at: micros(receipt.updated_at),
                response: receipt.response,
            },
            Ok((_, _, None)) => {
                // Shown when a test fails: what answered without a receipt.
                eprintln!("{call:?} {key}: answered without a receipt");
                Outcome::Unknown(tonic::Code::Internal)
            }
            Err(status) => {
                if status.code() == tonic::Code::Internal {
                    // Shown when a test fails: claimd's, or the transport's, words.
                    eprintln!("{call:?} {key}: INTERNAL: {status:?}");
                }
                outcome_of(&status)
            }
        };
        self.history.push(Op {
            key: key.to_owned(),
            call,
            token: token.map(str::to_owned),
            sent_response,
            deadline,
            lease: matches!(call, Call::Claim | Call::Heartbeat).then_some(lease),
            outcome: outcome.clone(),
            start,
            end: Instant::now(),
            sent_at,
            answered_at: store_now(self.offset),
            waited: call == Call::Claim && self.wait.is_some(),
        });
        use tonic::Code::{Cancelled, DeadlineExceeded};
        if let (true, Some(d), Outcome::Unknown(DeadlineExceeded | Cancelled)) =
            (self.read_after_error, deadline, &outcome)
        {
            self.read_later(key, start + d + ERROR_MARGIN);
        }
        outcome
    }

    /// Gets `key` from `at` on (in a task of its own, so the caller carries on), every
    /// [`READ_EVERY`] while it reads the same attempt (or no receipt), at most [`READS`]
    /// times: the history then shows how long the key stayed as the failed call found it,
    /// and when it changed. Each Get is recorded.
    fn read_later(&self, key: &str, at: Instant) {
        let reader = Caller {
            read_after_error: false,
            short: None,
            ..self.clone()
        };
        let key = key.to_owned();
        let read = tokio::spawn(async move {
            let mut first = None;
            for n in 0..READS {
                tokio::time::sleep_until((at + READ_EVERY * n).into()).await;
                let seen = match reader.call(&key, Call::Get, None).await {
                    Outcome::Ok { attempt, .. } => attempt,
                    Outcome::Refused(tonic::Code::NotFound) => 0,
                    _ => break,
                };
                if *first.get_or_insert(seen) != seen {
                    break;
                }
            }
        });
        self.reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(read);
    }
}
