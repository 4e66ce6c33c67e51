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

/// [`leased`] of a call that asked for a lease of `lease` ms.
fn asked(h: &mut H, at: u64, took: u64, call: Call, lease_end: u64, lease: u64) -> &mut H {
    leased(h, at, took, call, lease_end);
    let last = h.ops.last_mut().expect("just pushed");
    last.lease = Some(std::time::Duration::from_millis(lease));
    h
}

#[test]
fn a_claimed_answer_or_heartbeat_with_less_than_a_quarter_of_its_lease_left_is_caught() {
    // Issue 46 §1: a 2 s lease whose commit was held 1.8 s arrives with 0.15 s left.
    let mut h = H::new();
    asked(&mut h, 0, 1_850, Call::Claim, 2_000, 2_000);
    let found = h.rules(processing(1));
    assert!(named(&found, "a lease arrives nearly over"), "{found:?}");
    assert!(found[0].contains("with 150 ms of its 2000 ms"), "{found:?}");
    // §2: a 1 s Heartbeat answered 0.2 s before its end (a quarter is 250 ms, less the margin
    // is nothing: only one already over is caught there), and one with a 4 s lease.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    asked(&mut h, 10, 500, Call::Heartbeat, 710, 1_000);
    asked(&mut h, 20, 500, Call::Heartbeat, 1_200, 4_000);
    let found = h.rules(processing(1));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("Heartbeat attempt 1 arrived with 680 ms of its 4000 ms"),
        "{found:?}"
    );
}

#[test]
fn an_answer_with_a_quarter_of_its_lease_left_less_the_margin_is_not_a_violation() {
    let margin = u64::try_from(LEASE_MARGIN.as_millis()).unwrap_or(u64::MAX);
    let mut h = H::new();
    // A 2 s lease answered with exactly 0.5 s left, and one with 0.5 s less the margin.
    asked(&mut h, 0, 1_500, Call::Claim, 2_000, 2_000);
    asked(&mut h, 2, 1_500, Call::Heartbeat, 2_002 - margin, 2_000);
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
