//! **A lease ends after the answer that grants it arrives** (docs/DESIGN.md §3.8): every
//! lease a write sets runs from when the row was had (§5.9), so a CLAIMED answer (or an
//! accepted Heartbeat) never reaches its caller with its lease already over — or the next
//! delivery is CLAIMED at once and two callers do the work.
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

/// The rule, for one key's calls.
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
        let over = op.answered_at - end;
        if over > margin {
            v.push(format!(
                "a lease outlasts its answer: {key} {what} attempt {attempt} arrived {} ms \
                 after its lease ended (margin {} ms; the call took {} ms)",
                over / 1000,
                LEASE_MARGIN.as_millis(),
                op.end.duration_since(op.start).as_millis()
            ));
        }
    }
}
