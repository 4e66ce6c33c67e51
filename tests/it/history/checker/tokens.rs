//! Claim tokens that settled their receipt (docs/DESIGN.md §3.3): a token settles once.

use super::super::{Call, Op};
use std::collections::HashMap;
use std::time::Instant;

/// A token that settled its receipt is spent: after an accepted Retry or Quarantine no call
/// of that token is accepted, and after an accepted Complete only Complete (which changes
/// nothing) is.
pub(super) fn spent_tokens(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let mut spent: HashMap<&str, (Instant, Call)> = HashMap::new();
    for op in ops.iter().filter(|o| o.call.holds() && o.acknowledged()) {
        if let (Some(t), Call::Retry | Call::Quarantine | Call::Complete) =
            (op.token.as_deref(), op.call)
        {
            let e = spent.entry(t).or_insert((op.end, op.call));
            if op.end < e.0 {
                *e = (op.end, op.call);
            }
        }
    }
    for op in ops.iter().filter(|o| o.call.holds() && o.acknowledged()) {
        let Some((at, by)) = op.token.as_deref().and_then(|t| spent.get(t)) else {
            continue;
        };
        let allowed = *by == Call::Complete && op.call == Call::Complete;
        if *at < op.start && !allowed {
            v.push(format!(
                "spent token: {key} {:?} accepted after the same token's {by:?}",
                op.call
            ));
        }
    }
}

/// A token settles its receipt once, whatever the order: of the settling calls (Retry,
/// Quarantine, Complete) accepted from one token, even at once, only repeated Completes may
/// be more than one (a repeated Complete changes nothing). In any serial order of a Retry
/// and another Retry or Quarantine of one token, the second is FAILED_PRECONDITION.
pub(super) fn settles_once(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let mut settled: HashMap<&str, Vec<Call>> = HashMap::new();
    for op in ops.iter().filter(|o| o.acknowledged()) {
        if let (Some(t), Call::Retry | Call::Quarantine | Call::Complete) =
            (op.token.as_deref(), op.call)
        {
            settled.entry(t).or_default().push(op.call);
        }
    }
    for calls in settled.values() {
        let other = calls.iter().filter(|c| **c != Call::Complete).count();
        if other > 1 || (other == 1 && calls.len() > 1) {
            v.push(format!(
                "spent token: {key} one token settled its receipt {} times: {calls:?}",
                calls.len()
            ));
        }
    }
}
