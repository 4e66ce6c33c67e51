//! The calls of a key, one line each, for a failed check: when each was sent and answered
//! (milliseconds after the key's first call), the deadline it told, and what came back
//! (decision, attempt, state, and the lease end and write time on the store's clock, in
//! milliseconds after the first call was sent).

use super::super::{Final, Micros, Op, Outcome};

/// The key's calls in the order they were sent, and its final read.
pub(super) fn lines(ops: &[&Op], last: Option<&Final>) -> Vec<String> {
    let mut ops = ops.to_vec();
    ops.sort_by_key(|o| o.start);
    let Some(first) = ops.first() else {
        return Vec::new();
    };
    let (t0, s0) = (first.start, first.sent_at);
    let at = |us: Micros| (us - s0) / 1000;
    let calls = ops.iter().map(|o| {
        let token = o.token.as_deref().map(|t| &t[..t.len().min(8)]);
        let outcome = match &o.outcome {
            Outcome::Ok {
                decision,
                token: granted,
                attempt,
                state,
                lease_end,
                updated_at,
                ..
            } => format!(
                "{decision:?} attempt {attempt} {state:?} token {:?} lease_end {:?} \
                     updated_at {:?}",
                granted.as_deref().map(|t| &t[..t.len().min(8)]),
                lease_end.map(at),
                updated_at.map(at)
            ),
            other => format!("{other:?}"),
        };
        format!(
            "{:>6}..{:<6} {:?} token {token:?} deadline {:?} -> {outcome}",
            o.start.duration_since(t0).as_millis(),
            o.end.duration_since(t0).as_millis(),
            o.call,
            o.deadline.map(|d| d.as_millis())
        )
    });
    let last = last.map(|l| {
        format!(
            "final: attempt {} {:?} lease_end {:?} updated_at {:?}",
            l.attempt,
            l.state,
            l.lease_end.map(at),
            l.updated_at.map(at)
        )
    });
    calls.chain(last).collect()
}
