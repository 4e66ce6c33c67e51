//! "A refusal changes nothing": a call refused RESOURCE_EXHAUSTED whose effect shows up in
//! the history is reported (the same history with the call's outcome unknown is not: an
//! UNAVAILABLE call may have acted), and a refused call retried until accepted is not.

use super::{H, completed, named, ok, processing};
use crate::history::{Call, Final, Outcome};
use claimd::pb::{Decision, State};
use std::time::Duration;
use tonic::Code;

const RULE: &str = "a refusal changes nothing";

fn refused() -> Outcome {
    Outcome::Refused(Code::ResourceExhausted)
}

/// A Get at `at` that read attempt 1 in `state`.
fn get(h: &mut H, at: u64, state: State) -> &mut H {
    h.op(at, Call::Get, None, ok(None, None, 1, state))
}

/// A Get at `at` that read attempt 1 PROCESSING with its lease ending `lease_end` ms after
/// the base.
fn lease_read(h: &mut H, at: u64, lease_end: u64) -> &mut H {
    let mut outcome = ok(None, None, 1, State::Processing);
    if let Outcome::Ok { lease_end: end, .. } = &mut outcome {
        *end = Some(super::ms(lease_end));
    }
    h.op(at, Call::Get, None, outcome)
}

/// The last op asked for a lease of `ms` (a Claim or a Heartbeat) and, when it was
/// answered PROCESSING, was answered the lease end that gives.
fn with_lease(h: &mut H, ms: u64) -> &mut H {
    let op = h.ops.last_mut().expect("an op to give a lease");
    op.lease = Some(Duration::from_millis(ms));
    let end = op.answered_at + i64::try_from(ms * 1_000).unwrap_or(i64::MAX);
    if let Outcome::Ok {
        state: State::Processing,
        lease_end,
        ..
    } = &mut op.outcome
    {
        *lease_end = Some(end);
    }
    h
}

#[test]
fn a_refused_complete_whose_response_shows_up_is_caught() {
    // The Complete is refused by the quota, yet a Get right after reads the receipt
    // COMPLETED with the response that Complete sent.
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .op(2, Call::Complete, Some("t1"), refused());
    get(&mut h, 4, State::Completed);
    let found = h.rules(completed(1));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("Complete refused"), "{found:?}");

    // Also when the holder's next Complete of it is accepted: the response was seen first.
    h.holder(6, Call::Complete, "t1", 1, State::Completed);
    let found = h.rules(completed(1));
    assert!(named(&found, RULE), "{found:?}");

    // Seen only by the final read, with no other Complete: the same.
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .op(2, Call::Complete, Some("t1"), refused());
    let found = h.rules(completed(1));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("the final read"), "{found:?}");
}

#[test]
fn an_unavailable_complete_may_have_stored_its_response() {
    // The history above with the Complete's outcome unknown: it may have committed.
    let mut h = H::new();
    h.claimed(0, "t1", 1).op(
        2,
        Call::Complete,
        Some("t1"),
        Outcome::Unknown(Code::Unavailable),
    );
    get(&mut h, 4, State::Completed);
    assert_eq!(h.rules(completed(1)), Vec::<String>::new());
}

#[test]
fn a_refused_complete_retried_until_accepted_is_a_valid_history() {
    let mut h = H::new();
    h.claimed(0, "t1", 1)
        .op(2, Call::Complete, Some("t1"), refused());
    get(&mut h, 4, State::Processing);
    h.op(6, Call::Complete, Some("t1"), refused());
    h.holder(8, Call::Complete, "t1", 1, State::Completed);
    get(&mut h, 10, State::Completed);
    assert_eq!(h.rules(completed(1)), Vec::<String>::new());
}

#[test]
fn a_refused_heartbeat_whose_lease_shows_up_is_caught() {
    // Granted a 1 s lease answered at 1 ms; the Heartbeat refused at 400 ms, yet a Get reads
    // the lease ending at 1,401 ms: what that Heartbeat would have set.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    with_lease(&mut h, 1_000);
    h.op(400, Call::Heartbeat, Some("t1"), refused());
    with_lease(&mut h, 1_000);
    lease_read(&mut h, 402, 1_401);
    let found = h.rules(processing(1));
    assert!(named(&found, RULE), "{found:?}");
    assert!(found[0].contains("Heartbeat refused"), "{found:?}");

    // The grant's own lease read back is no violation, nor one an accepted Heartbeat set.
    let mut h = H::new();
    h.claimed(0, "t1", 1);
    with_lease(&mut h, 1_000);
    h.op(400, Call::Heartbeat, Some("t1"), refused());
    with_lease(&mut h, 1_000);
    lease_read(&mut h, 402, 1_001);
    h.holder(500, Call::Heartbeat, "t1", 1, State::Processing);
    with_lease(&mut h, 1_000);
    lease_read(&mut h, 502, 1_501);
    assert_eq!(h.rules(processing(1)), Vec::<String>::new());
}

#[test]
fn a_refused_retry_or_quarantine_whose_state_shows_up_is_caught() {
    for (call, state) in [
        (Call::Retry, State::RetryWait),
        (Call::Quarantine, State::Quarantined),
    ] {
        let mut h = H::new();
        h.claimed(0, "t1", 1);
        with_lease(&mut h, 1_000);
        h.op(2, call, Some("t1"), refused());
        get(&mut h, 4, state);
        let last = Final {
            state,
            ..processing(1)
        };
        let found = h.rules(last.clone());
        assert!(named(&found, RULE), "{call:?}: {found:?}");

        // Sent again and accepted before it was seen: valid.
        let mut h = H::new();
        h.claimed(0, "t1", 1);
        with_lease(&mut h, 1_000);
        h.op(2, call, Some("t1"), refused())
            .holder(4, call, "t1", 1, state);
        get(&mut h, 6, state);
        assert_eq!(h.rules(last), Vec::<String>::new(), "{call:?}");
    }
}

#[test]
fn an_attempt_only_a_refused_claim_could_have_written_is_caught() {
    // A Claim refused by the quota, then a Claim answered IN_FLIGHT on attempt 1 that no
    // CLAIMED answer gave: the refused Claim wrote it.
    let mut h = H::new();
    h.op(0, Call::Claim, None, refused()).op(
        4,
        Call::Claim,
        None,
        ok(Some(Decision::InFlight), None, 1, State::Processing),
    );
    let found = h.rules(processing(1));
    assert!(named(&found, "an error changes nothing"), "{found:?}");
    assert!(
        found[0].contains("1 Claim(s) refused RESOURCE_EXHAUSTED"),
        "{found:?}"
    );
    // With the first Claim's outcome unknown, it owns the attempt.
    h.ops[0].outcome = Outcome::Unknown(Code::Unavailable);
    assert_eq!(h.rules(processing(1)), Vec::<String>::new());
}
