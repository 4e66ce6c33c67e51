//! Jepsen-style histories (docs/RELIABILITY.md): clients that record every call they make
//! and what came back — the call, the key, the token sent, the deadline it gave, the
//! decision, attempt, token, state, lease end and write time answered, the status code, and
//! when it started and ended (on this process's monotonic clock and on the store's wall
//! clock) — under concurrency and faults, and a checker (`checker.rs`) that verifies the
//! service's invariants on the whole history afterwards, with a final read of every key.
//!
//! `workload.rs` drives real callers over gRPC (against one or several replicas) and hands
//! back the history; the fault tests (`faults::*`) inject their fault while it runs.

pub mod checker;
pub mod workload;

use claimd::pb::{Decision, State};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::Code;

/// Microseconds since the Unix epoch on the store's clock: this machine's wall clock (claimd,
/// PostgreSQL and the test run on one machine) plus the offset a test clock may add
/// (`store::Clock`; zero for a claimd binary).
pub type Micros = i64;

/// Now on the store's clock, given the test clock's offset in microseconds.
pub fn store_now(offset: Micros) -> Micros {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX) + offset
}

/// A wire timestamp in [`Micros`].
pub fn micros(t: Option<prost_types::Timestamp>) -> Option<Micros> {
    t.map(|t| t.seconds * 1_000_000 + i64::from(t.nanos) / 1_000)
}

/// What a caller asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Claim,
    Complete,
    Heartbeat,
    Retry,
    Quarantine,
    /// A read (Get): changes nothing, observes the receipt (or that there is none).
    Get,
}

impl Call {
    /// A holder call: it sends a claim token.
    pub fn holds(self) -> bool {
        !matches!(self, Call::Claim | Call::Get)
    }
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An answer: the decision (Claim only), the token (CLAIMED only) and the receipt's
    /// attempt, state, stored response, lease end (PROCESSING only) and `updated_at` (the
    /// clock reading of the write that last changed it).
    Ok {
        decision: Option<Decision>,
        token: Option<String>,
        attempt: u32,
        state: State,
        response: Vec<u8>,
        lease_end: Option<Micros>,
        updated_at: Option<Micros>,
    },
    /// A definite refusal: nothing was written (ABORTED, FAILED_PRECONDITION, NOT_FOUND,
    /// INVALID_ARGUMENT, RESOURCE_EXHAUSTED…). A Get refused NOT_FOUND saw no receipt. A
    /// refusal explains no state; one RESOURCE_EXHAUSTED (a quota, refused before the store)
    /// is also searched for its effect (`checker/refusals.rs`).
    Refused(Code),
    /// No answer, or one that does not say whether the call took effect (UNAVAILABLE,
    /// DEADLINE_EXCEEDED, CANCELLED, a broken connection): it may or may not have happened.
    Unknown(Code),
}

/// One call and its answer.
#[derive(Debug, Clone)]
pub struct Op {
    /// The receipt's key (one namespace per history).
    pub key: String,
    pub call: Call,
    /// The token a holder call sent.
    pub token: Option<String>,
    /// The response a Complete sent.
    pub sent_response: Vec<u8>,
    /// The deadline the call told claimd (`grpc-timeout`), measured from `start`; `None`
    /// when it told none (a client-side timeout alone leaves claimd free to finish later).
    pub deadline: Option<Duration>,
    /// The lease a Claim or a Heartbeat asked for.
    pub lease: Option<Duration>,
    pub outcome: Outcome,
    /// When the call was sent and when its answer (or failure) came back.
    pub start: Instant,
    pub end: Instant,
    /// The same two moments on the store's clock.
    pub sent_at: Micros,
    pub answered_at: Micros,
    /// A Claim that asked claimd to wait (`wait`): claimd may have claimed on its behalf
    /// while it waited (docs/DESIGN.md §2.9).
    pub waited: bool,
}

impl Op {
    /// Whether the call certainly took effect as answered.
    pub fn acknowledged(&self) -> bool {
        matches!(self.outcome, Outcome::Ok { .. })
    }

    /// The decision of an answered Claim.
    pub fn decision(&self) -> Option<Decision> {
        match &self.outcome {
            Outcome::Ok { decision, .. } => *decision,
            _ => None,
        }
    }

    /// The attempt an answer carried.
    pub fn attempt(&self) -> Option<u32> {
        match &self.outcome {
            Outcome::Ok { attempt, .. } => Some(*attempt),
            _ => None,
        }
    }

    /// The attempt the receipt was at when this call read or wrote it: the attempt answered,
    /// or 0 for a Get that found no receipt.
    pub fn seen(&self) -> Option<u32> {
        match self.outcome {
            Outcome::Refused(Code::NotFound) if self.call == Call::Get => Some(0),
            _ => self.attempt(),
        }
    }
}

/// What every key looked like when the run was over (a Get per key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
    pub attempt: u32,
    pub state: State,
    pub response: Vec<u8>,
    /// When the lease ends (PROCESSING only) and when the receipt last changed.
    pub lease_end: Option<Micros>,
    pub updated_at: Option<Micros>,
}

/// A history being recorded by many callers at once.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Op>>>);

impl Recorder {
    /// Adds one finished op.
    pub fn push(&self, op: Op) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }

    /// Everything recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// How a gRPC status counts in a history: a definite refusal or "may have happened".
/// RESOURCE_EXHAUSTED is a definite refusal: every one claimd answers (a tenant quota, the
/// request-size limit, the per-source limits) comes before the store, unlike UNAVAILABLE.
pub fn outcome_of(status: &tonic::Status) -> Outcome {
    // tonic's INTERNAL for a call claimd's graceful GOAWAY kept from it: the gRPC protocol
    // has clients treat that stream as UNAVAILABLE, and so does the history (claimd's own
    // INTERNAL carries no client-side error and stays one).
    if claimd_client::never_taken(status) == Some(claimd_client::NeverTaken::GoAway) {
        return Outcome::Unknown(Code::Unavailable);
    }
    match status.code() {
        Code::Aborted
        | Code::FailedPrecondition
        | Code::NotFound
        | Code::InvalidArgument
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::Unauthenticated
        | Code::DataLoss
        | Code::ResourceExhausted
        | Code::OutOfRange => Outcome::Refused(status.code()),
        code => Outcome::Unknown(code),
    }
}
