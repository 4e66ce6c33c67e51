//! "An error that says nothing changed changed nothing": each way an attempt can be granted
//! to nobody is reported, and each way a lost answer can own it is not.

use super::{H, named, ok, processing};
use crate::history::checker::ERROR_MARGIN;
use crate::history::{Call, Final, Outcome};
use claimd::pb::{Decision, State};
use tonic::Code;

const RULE: &str = "an error changes nothing";

/// Margin in milliseconds, as the histories below are built.
fn margin() -> u64 {
    u64::try_from(ERROR_MARGIN.as_millis()).unwrap_or(u64::MAX)
}

/// A Claim sent at `at` that told claimd `deadline` ms and was cut short with `code`.
fn cut_short(h: &mut H, at: u64, deadline: u64, code: Code) -> &mut H {
    h.timed(
        at,
        deadline,
        Some(deadline),
        Call::Claim,
        None,
        Outcome::Unknown(code),
    )
}

/// A Get at `at` that found no receipt.
fn nothing_at(h: &mut H, at: u64) -> &mut H {
    h.op(at, Call::Get, None, Outcome::Refused(Code::NotFound))
}

/// A Claim at `at` answered IN_FLIGHT on `attempt`, whose write time was `written` ms.
fn in_flight(h: &mut H, at: u64, attempt: u32, written: Option<u64>) -> &mut H {
    let mut outcome = ok(Some(Decision::InFlight), None, attempt, State::Processing);
    if let Outcome::Ok { updated_at, .. } = &mut outcome {
        *updated_at = written.map(super::ms);
    }
    h.op(at, Call::Claim, None, outcome)
}

#[test]
fn a_new_row_that_appears_after_its_claim_timed_out_and_was_read_absent_is_caught() {
    // Issue 26 §1: the Claim ends DEADLINE_EXCEEDED at 200 ms, a Get well after that finds
    // nothing, and later a Claim is answered IN_FLIGHT on an attempt nobody was given.
    let mut h = H::new();
    cut_short(&mut h, 0, 200, Code::DeadlineExceeded);
    nothing_at(&mut h, 200 + margin() + 100);
    in_flight(&mut h, 4_000, 1, None);
    let found = h.rules(processing(1));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("answered IN_FLIGHT"), "{found:?}");
    assert!(found[0].contains("no receipt"), "{found:?}");
}

#[test]
fn a_write_that_crossed_its_deadline_within_the_margin_is_not_a_violation() {
    // The allowed race (DESIGN §5.9): committed around the deadline, its answer too late.
    let mut h = H::new();
    cut_short(&mut h, 0, 200, Code::Cancelled);
    nothing_at(&mut h, 200 + margin() - 100);
    in_flight(&mut h, 4_000, 1, Some(150));
    assert_eq!(h.rules(processing(1)), Vec::<String>::new());
    // With nothing read in between, the lost answer explains the row as before.
    let mut h = H::new();
    cut_short(&mut h, 0, 200, Code::DeadlineExceeded);
    in_flight(&mut h, 4_000, 1, None);
    assert_eq!(h.rules(processing(1)), Vec::<String>::new());
}

#[test]
fn an_attempt_written_after_the_deadline_by_the_rows_own_clock_is_caught() {
    // A takeover's time is read after its lock wait: the row says when it was written.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    cut_short(&mut h, 2_000, 300, Code::DeadlineExceeded);
    in_flight(&mut h, 6_000, 2, Some(2_000 + 300 + margin() + 1_000));
    let found = h.rules(processing(2));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("updated_at"), "{found:?}");
    // The final read alone tells it too.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    cut_short(&mut h, 2_000, 300, Code::DeadlineExceeded);
    let last = Final {
        updated_at: Some(super::ms(2_000 + 300 + margin() + 1_000)),
        ..processing(2)
    };
    assert!(named(&h.rules(last), RULE));
    // Written before the deadline: the lost answer owns it.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    cut_short(&mut h, 2_000, 300, Code::DeadlineExceeded);
    in_flight(&mut h, 6_000, 2, Some(2_100));
    assert_eq!(h.rules(processing(2)), Vec::<String>::new());
}

#[test]
fn a_claim_cut_short_without_telling_its_deadline_or_by_unavailable_may_own_a_later_attempt() {
    // claimd did not know the deadline, or said nothing about whether the write was made.
    for (deadline, code) in [
        (None, Code::Cancelled),
        (Some(200), Code::Unavailable),
        (Some(200), Code::Unknown),
    ] {
        let mut h = H::new();
        h.timed(0, 200, deadline, Call::Claim, None, Outcome::Unknown(code));
        nothing_at(&mut h, 3_000);
        in_flight(&mut h, 4_000, 1, Some(3_500));
        assert_eq!(h.rules(processing(1)), Vec::<String>::new(), "{code:?}");
    }
}

#[test]
fn a_claim_answered_in_flight_on_its_own_lease_is_caught() {
    // Issue 26 §4: a waiting Claim's takeover landed, its answer was lost inside claimd,
    // and the same call was then answered IN_FLIGHT on attempt 2; no answer was lost.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    in_flight(&mut h, 2_000, 2, Some(1_500));
    let found = h.rules(processing(2));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("no Claim's answer was lost"), "{found:?}");
}

#[test]
fn one_lost_answer_owns_one_attempt_and_only_one_seen_after_it_was_sent() {
    // Attempts 1 and 2 granted to nobody, one lost answer: one of them is a violation.
    let mut h = H::new();
    h.timed(
        0,
        50,
        None,
        Call::Claim,
        None,
        Outcome::Unknown(Code::Unavailable),
    )
    .claimed(9_000, "t3", 3);
    let found = h.rules(processing(3));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(named(&found, RULE), "{found:?}");
    // A Claim sent after attempt 2 was already seen cannot have written it.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    in_flight(&mut h, 3_000, 2, None);
    h.timed(
        5_000,
        50,
        None,
        Call::Claim,
        None,
        Outcome::Unknown(Code::Unavailable),
    );
    let found = h.rules(processing(2));
    assert!(named(&found, RULE), "{found:?}");
}
