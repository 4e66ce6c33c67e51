//! **A lease outlasts the answer that grants it, by a quarter of it** (docs/DESIGN.md §3.8,
//! §4.1): every lease a write sets runs from when the row was had (§5.9), and a CLAIMED
//! answer (or an accepted Heartbeat) reaches its caller with at least a quarter of the
//! lease it asked for left — never with its lease already over (the next delivery would be
//! CLAIMED at once and two callers do the work), nor so nearly over that the holder cannot
//! use it (a commit that waited for a synchronous standby, issue 46).
//!
//! Both ends are on one clock: the lease end is the store's (PostgreSQL's `now()` or, on
//! SQLite, claimd's wall clock, both this machine's), and the answer's arrival is this
//! process's wall clock plus the test clock's offset (`Workload::clock_offset`).

use super::super::{Call, Op, Outcome};
use claimd::pb::{Decision, State};
use std::time::Duration;

/// How long before the answer's arrival a lease may have ended without a violation. The
/// clocks are one machine's, so this is not skew: it is the answer's way from the commit
/// to the caller (claimd, the network stack and this process, any of them paused by a
/// shared 2-core machine). A lease is at least 1 s (§2.8), so a lease that ran from its
/// commit is only reported when its answer took longer than 1.25 s; one timed before a
/// lock wait of a few seconds is reported for the wait.
pub const LEASE_MARGIN: Duration = Duration::from_millis(250);

/// The rule, for one key's calls: a CLAIMED answer or an accepted Heartbeat arrives with at
/// least a quarter of the lease it asked for left (§4.1), less [`LEASE_MARGIN`]; one whose
/// lease had ended is named as such. An op that recorded no lease (a hand-made history)
/// is held only to the lease's end.
pub(super) fn leases_outlast_answers(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let margin = i64::try_from(LEASE_MARGIN.as_micros()).unwrap_or(i64::MAX);
    for op in ops {
        let Outcome::Ok {
            decision,
            attempt,
            state: State::Processing,
            lease_end: Some(end),
            ..
        } = &op.outcome
        else {
            continue;
        };
        let what = match (op.call, decision) {
            (Call::Claim, Some(Decision::Claimed)) => "CLAIMED",
            (Call::Heartbeat, _) => "Heartbeat",
            _ => continue,
        };
        let took = op.end.duration_since(op.start).as_millis();
        let left = end - op.answered_at;
        let quarter = op.lease.unwrap_or(Duration::ZERO) / 4;
        let quarter = i64::try_from(quarter.as_micros()).unwrap_or(i64::MAX);
        if left < -margin {
            v.push(format!(
                "a lease outlasts its answer: {key} {what} attempt {attempt} arrived {} ms \
                 after its lease ended (margin {} ms; the call took {took} ms)",
                -left / 1000,
                LEASE_MARGIN.as_millis(),
            ));
        } else if left < quarter - margin {
            v.push(format!(
                "a lease arrives nearly over: {key} {what} attempt {attempt} arrived with {} ms \
                 of its {} ms lease left, less than a quarter (margin {} ms; the call took \
                 {took} ms)",
                left / 1000,
                op.lease.unwrap_or_default().as_millis(),
                LEASE_MARGIN.as_millis(),
            ));
        }
    }
}
