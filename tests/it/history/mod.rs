//! Jepsen-style histories (docs/RELIABILITY.md): clients that record every call they make
//! and what came back — the call, the key, the token sent, the decision, attempt, token and
//! state answered, the status code, and when it started and ended — under concurrency and
//! faults, and a checker (`checker.rs`) that verifies the service's invariants on the
//! whole history afterwards, with a final read of every key.
//!
//! `workload.rs` drives real callers over gRPC (against one or several replicas) and hands
//! back the history; the fault tests (`faults::*`) inject their fault while it runs.

pub mod checker;
pub mod workload;

use claimd::pb::{Decision, State};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tonic::Code;

/// What a caller asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Claim,
    Complete,
    Heartbeat,
    Retry,
    Quarantine,
}

impl Call {
    /// A holder call: it sends a claim token.
    pub fn holds(self) -> bool {
        self != Call::Claim
    }
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An answer: the decision (Claim only), the token (CLAIMED only) and the receipt's
    /// attempt, state and stored response.
    Ok {
        decision: Option<Decision>,
        token: Option<String>,
        attempt: u32,
        state: State,
        response: Vec<u8>,
    },
    /// A definite refusal: nothing was written (ABORTED, FAILED_PRECONDITION, NOT_FOUND,
    /// INVALID_ARGUMENT…).
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
    pub outcome: Outcome,
    /// When the call was sent and when its answer (or failure) came back.
    pub start: Instant,
    pub end: Instant,
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
}

/// What every key looked like when the run was over (a Get per key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Final {
    pub attempt: u32,
    pub state: State,
    pub response: Vec<u8>,
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
pub fn outcome_of(status: &tonic::Status) -> Outcome {
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
