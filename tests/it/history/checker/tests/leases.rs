//! "A lease ends after the answer that grants it arrives", and "a token settles once".

use super::{H, named, ok, processing};
use crate::history::checker::LEASE_MARGIN;
use crate::history::{Call, Outcome};
use claimd::pb::{Decision, State};

/// An answer at `at` (taking `took` ms) whose lease ends `lease_end` ms after the base.
fn leased(h: &mut H, at: u64, took: u64, call: Call, lease_end: u64) -> &mut H {
    let (decision, token) = match call {
        Call::Claim => (Some(Decision::Claimed), Some("t1")),
        _ => (None, None),
    };
    let mut outcome = ok(decision, token, 1, State::Processing);
    if let Outcome::Ok { lease_end: end, .. } = &mut outcome {
        *end = Some(super::ms(lease_end));
    }
    let sent = (call != Call::Claim).then_some("t1");
    h.timed(at, took, None, call, sent, outcome)
}

#[test]
fn a_claimed_answer_whose_lease_ended_before_it_arrived_is_caught() {
    // Issue 26 §2: a 1 s lease timed from the statement's start, answered after a 3 s wait.
    let mut h = H::new();
    leased(&mut h, 0, 3_000, Call::Claim, 1_000);
    let found = h.rules(processing(1));
    assert!(named(&found, "a lease outlasts its answer"), "{found:?}");
    assert!(
        found[0].contains("2000 ms after its lease ended"),
        "{found:?}"
    );
}

#[test]
fn a_heartbeat_whose_lease_ended_before_it_arrived_is_caught() {
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    leased(&mut h, 10, 3_000, Call::Heartbeat, 2_010);
    let found = h.rules(processing(1));
    assert!(named(&found, "a lease outlasts its answer"), "{found:?}");
}

#[test]
fn a_lease_that_outlasts_its_answer_or_ends_within_the_margin_is_not_a_violation() {
    let margin = u64::try_from(LEASE_MARGIN.as_millis()).unwrap_or(u64::MAX);
    let mut h = H::new();
    // Answered at 3 s: one lease ends a second later, one just inside the margin before.
    leased(&mut h, 0, 3_000, Call::Claim, 4_000);
    leased(&mut h, 2, 3_000, Call::Heartbeat, 3_002 - margin + 1);
    assert_eq!(h.rules(processing(1)), Vec::<String>::new());
}

#[test]
fn two_settling_calls_of_one_token_accepted_at_once_are_caught() {
    // Issue 26 §3: a Retry and a Quarantine (or two Retries) at once, both answered OK.
    for second in [Call::Retry, Call::Quarantine] {
        let mut h = H::new();
        h.claimed(0, "t1", 1)
            .holder(2, Call::Retry, "t1", 1, State::Quarantined)
            .holder(2, second, "t1", 1, State::Quarantined);
        let last = crate::history::Final {
            state: State::Quarantined,
            ..processing(1)
        };
        let found = h.rules(last);
        assert!(named(&found, "spent token"), "{second:?}: {found:?}");
    }
    // Two Completes of one token at once: the second changes nothing.
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .holder(2, Call::Complete, "t1", 1, State::Completed)
        .holder(2, Call::Complete, "t1", 1, State::Completed);
    assert_eq!(h.rules(super::completed(1)), Vec::<String>::new());
}
