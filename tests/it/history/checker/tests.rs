//! The checker against hand-made histories: a valid one passes, and each broken invariant
//! is reported by its rule (so a checker that always passes would fail here). The rules
//! of errors, leases, refusals and settling tokens have theirs in `tests/`.

mod errors;
mod leases;
mod refusals;

use super::check;
use crate::history::{Call, Final, Micros, Op, Outcome};
use claimd::pb::{Decision, State};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tonic::Code;

/// The store clock's reading at a history's time base (any moment will do).
const BASE_US: Micros = 1_700_000_000_000_000;

/// Builds a history on one key with a shared time base: each op runs from `at` to `at + 1`
/// (in milliseconds), so `at` values two apart are in real-time order; the store clock
/// reads [`BASE_US`] at the base.
struct H {
    base: Instant,
    ops: Vec<Op>,
}

impl H {
    fn new() -> H {
        H {
            base: Instant::now(),
            ops: Vec::new(),
        }
    }

    fn op(&mut self, at: u64, call: Call, token: Option<&str>, outcome: Outcome) -> &mut H {
        self.timed(at, 1, None, call, token, outcome)
    }

    /// An op from `at` taking `took` ms, that told claimd `deadline` ms.
    fn timed(
        &mut self,
        at: u64,
        took: u64,
        deadline: Option<u64>,
        call: Call,
        token: Option<&str>,
        outcome: Outcome,
    ) -> &mut H {
        let start = self.base + Duration::from_millis(at);
        self.ops.push(Op {
            key: "k".into(),
            call,
            token: token.map(str::to_owned),
            sent_response: if call == Call::Complete {
                b"done".to_vec()
            } else {
                Vec::new()
            },
            deadline: deadline.map(Duration::from_millis),
            lease: None,
            outcome,
            start,
            end: start + Duration::from_millis(took),
            sent_at: ms(at),
            answered_at: ms(at + took),
            waited: false,
        });
        self
    }

    fn claimed(&mut self, at: u64, token: &str, attempt: u32) -> &mut H {
        let outcome = ok(
            Some(Decision::Claimed),
            Some(token),
            attempt,
            State::Processing,
        );
        self.op(at, Call::Claim, None, outcome)
    }

    fn holder(&mut self, at: u64, call: Call, token: &str, attempt: u32, state: State) -> &mut H {
        self.op(at, call, Some(token), ok(None, None, attempt, state))
    }

    fn rules(&self, last: Final) -> Vec<String> {
        let finals = HashMap::from([("k".to_owned(), last)]);
        check(&self.ops, &finals).violations
    }
}

/// The store clock `at` ms after the base.
fn ms(at: u64) -> Micros {
    BASE_US + i64::try_from(at).unwrap_or(i64::MAX) * 1_000
}

fn ok(decision: Option<Decision>, token: Option<&str>, attempt: u32, state: State) -> Outcome {
    Outcome::Ok {
        decision,
        token: token.map(str::to_owned),
        attempt,
        state,
        response: if state == State::Completed {
            b"done".to_vec()
        } else {
            Vec::new()
        },
        lease_end: None,
        updated_at: None,
    }
}

fn completed(attempt: u32) -> Final {
    Final {
        attempt,
        state: State::Completed,
        response: b"done".to_vec(),
        lease_end: None,
        updated_at: None,
    }
}

/// A PROCESSING receipt at `attempt` as a final read.
fn processing(attempt: u32) -> Final {
    Final {
        attempt,
        state: State::Processing,
        response: Vec::new(),
        lease_end: None,
        updated_at: None,
    }
}

fn named(violations: &[String], rule: &str) -> bool {
    !violations.is_empty() && violations.iter().all(|v| v.starts_with(rule))
}

#[test]
fn a_takeover_then_a_completion_is_a_valid_history() {
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .op(
            2,
            Call::Claim,
            None,
            ok(Some(Decision::InFlight), None, 1, State::Processing),
        )
        .claimed(4, "t2", 2)
        .op(
            6,
            Call::Complete,
            Some("t1"),
            Outcome::Refused(Code::Aborted),
        )
        .holder(8, Call::Complete, "t2", 2, State::Completed)
        .op(
            10,
            Call::Claim,
            None,
            ok(Some(Decision::Completed), None, 2, State::Completed),
        );
    assert_eq!(h.rules(completed(2)), Vec::<String>::new());
}

#[test]
fn an_unknown_outcome_may_explain_the_final_state() {
    let mut h = H::new();
    h.claimed(0, "t1", 1).op(
        2,
        Call::Complete,
        Some("t1"),
        Outcome::Unknown(Code::Unavailable),
    );
    assert_eq!(h.rules(completed(1)), Vec::<String>::new());
}

#[test]
fn two_claimed_answers_for_one_attempt_are_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1).claimed(0, "t2", 1);
    let found = h.rules(processing(1));
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("one CLAIMED per attempt")),
        "{found:?}"
    );
}

#[test]
fn a_claim_whose_attempt_does_not_rise_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 2).claimed(4, "t2", 1);
    let found = h.rules(processing(2));
    assert!(named(&found, "attempts increase"), "{found:?}");
}

#[test]
fn a_holder_call_accepted_from_a_superseded_token_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1).claimed(2, "t2", 2).holder(
        4,
        Call::Heartbeat,
        "t1",
        1,
        State::Processing,
    );
    let found = h.rules(processing(2));
    assert!(named(&found, "fencing"), "{found:?}");
}

#[test]
fn a_holder_call_racing_the_takeover_is_not_a_violation() {
    let mut h = H::new();
    h.claimed(0, "t1", 1).claimed(2, "t2", 2).holder(
        2,
        Call::Heartbeat,
        "t1",
        1,
        State::Processing,
    );
    let last = processing(2);
    assert_eq!(h.rules(last), Vec::<String>::new());
}

#[test]
fn a_token_used_after_its_retry_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .holder(2, Call::Retry, "t1", 1, State::RetryWait)
        .holder(4, Call::Heartbeat, "t1", 1, State::Processing);
    let found = h.rules(Final {
        state: State::RetryWait,
        ..processing(1)
    });
    assert!(named(&found, "spent token"), "{found:?}");
}

#[test]
fn a_claim_after_completed_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .holder(2, Call::Complete, "t1", 1, State::Completed)
        .claimed(4, "t2", 2);
    let found = h.rules(completed(2));
    assert!(
        found
            .iter()
            .any(|v| v.starts_with("completed stays completed")),
        "{found:?}"
    );
}

#[test]
fn an_acknowledged_completion_that_is_gone_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .holder(2, Call::Complete, "t1", 1, State::Completed);
    let lost = processing(1);
    assert!(named(&h.rules(lost), "durability"));
    let mut h = H::new();
    h.claimed(0, "t1", 1).claimed(2, "t2", 2);
    let earlier = processing(1);
    assert!(named(&h.rules(earlier), "durability"));
    let missing = check(&h.ops, &HashMap::new()).violations;
    assert!(named(&missing, "durability"), "{missing:?}");
}
