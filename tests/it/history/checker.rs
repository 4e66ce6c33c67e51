//! The invariants of docs/DESIGN.md §3 (listed in §3.8), checked on a recorded history and
//! the final state of every key. Only acknowledged answers (`Outcome::Ok`) count as having
//! happened; a call with an `Unknown` outcome may or may not have taken effect, so it can
//! explain a state (a response stored by a Complete whose answer was lost) but is never
//! required to — except that a call cut short at a deadline it told claimd can explain
//! only what committed by that deadline (`errors.rs`). A call refused RESOURCE_EXHAUSTED
//! did nothing, and its effect is looked for (`refusals.rs`). Leases are checked against when
//! their answers arrived (`leases.rs`), tokens against how often they settled (`tokens.rs`).
//!
//! Real-time order: `a` precedes `b` when `a` was answered before `b` was sent. Every rule
//! is evaluated per key with sorting and prefix extremes, so a history of tens of thousands
//! of calls is checked in well under a second even in a debug build.

mod errors;
mod evidence;
mod leases;
mod refusals;
mod tokens;
mod verdict;

pub use errors::ERROR_MARGIN;
pub use leases::LEASE_MARGIN;
use verdict::EVIDENCE_KEYS;
pub use verdict::Verdict;

use super::{Call, Final, Op, Outcome};
use claimd::pb::{Decision, State};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Checks `history` against the invariants, with `finals` the state of every key read
/// after the run (a key missing there was never written).
pub fn check(history: &[Op], finals: &HashMap<String, Final>) -> Verdict {
    let mut verdict = Verdict {
        ops: history.len(),
        acknowledged: history.iter().filter(|o| o.acknowledged()).count(),
        unknown: history
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
            .count(),
        unavailable: history
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Unknown(tonic::Code::Unavailable)))
            .count(),
        claimed: history
            .iter()
            .filter(|o| o.decision() == Some(Decision::Claimed))
            .count(),
        cut_short: BTreeMap::new(),
        violations: Vec::new(),
        evidence: BTreeMap::new(),
    };
    for op in history {
        if let Outcome::Unknown(code) = op.outcome {
            *verdict.cut_short.entry(format!("{code:?}")).or_default() += 1;
        }
    }
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(&op.key).or_default().push(op);
    }
    for (key, ops) in by_key {
        let before = verdict.violations.len();
        let v = &mut verdict.violations;
        one_claimed_per_attempt(key, &ops, v);
        claims_follow_every_answer(key, &ops, v);
        fenced(key, &ops, v);
        tokens::spent_tokens(key, &ops, v);
        tokens::settles_once(key, &ops, v);
        completed_stays_completed(key, &ops, v);
        survives(key, &ops, finals.get(key), v);
        errors::nothing_changed(key, &ops, finals.get(key), v);
        refusals::refusals_change_nothing(key, &ops, finals.get(key), v);
        leases::leases_outlast_answers(key, &ops, v);
        let found = v.len() > before;
        if found && verdict.evidence.len() < EVIDENCE_KEYS {
            verdict
                .evidence
                .insert(key.to_owned(), evidence::lines(&ops, finals.get(key)));
        }
    }
    verdict
}

/// The acknowledged CLAIMED answers of a key.
fn claims<'a>(ops: &[&'a Op]) -> impl Iterator<Item = &'a Op> {
    ops.iter()
        .copied()
        .filter(|o| o.decision() == Some(Decision::Claimed))
}

fn answered_state(op: &Op) -> Option<State> {
    match &op.outcome {
        Outcome::Ok { state, .. } => Some(*state),
        _ => None,
    }
}

/// At most one CLAIMED per (key, attempt).
fn one_claimed_per_attempt(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let mut seen: HashMap<u32, usize> = HashMap::new();
    for op in claims(ops) {
        let n = seen.entry(op.attempt().unwrap_or(0)).or_default();
        *n += 1;
        if *n == 2 {
            v.push(format!(
                "one CLAIMED per attempt: {key} attempt {} was CLAIMED twice",
                op.attempt().unwrap_or(0)
            ));
        }
    }
}

/// A CLAIMED answer carries an attempt above every attempt answered before it was asked
/// (attempts strictly increase per key, in real time).
fn claims_follow_every_answer(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let mut answered: Vec<(Instant, u32)> = ops
        .iter()
        .filter_map(|o| o.attempt().map(|a| (o.end, a)))
        .collect();
    answered.sort();
    let mut highest = Vec::with_capacity(answered.len());
    let mut max = 0;
    for (_, a) in &answered {
        max = max.max(*a);
        highest.push(max);
    }
    for claim in claims(ops) {
        let before = answered.partition_point(|(end, _)| *end < claim.start);
        if before > 0 && highest[before - 1] >= claim.attempt().unwrap_or(0) {
            v.push(format!(
                "attempts increase: {key} CLAIMED attempt {} after attempt {} was answered",
                claim.attempt().unwrap_or(0),
                highest[before - 1]
            ));
        }
    }
}

/// No holder call is accepted from a token that was no longer current: once a CLAIMED with
/// a higher attempt was answered, the older token's calls are refused; an accepted holder
/// call answers the attempt its token was granted with.
fn fenced(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let granted: HashMap<&str, u32> = claims(ops)
        .filter_map(|o| match &o.outcome {
            Outcome::Ok {
                token: Some(t),
                attempt,
                ..
            } => Some((t.as_str(), *attempt)),
            _ => None,
        })
        .collect();
    // For each attempt, the earliest moment a CLAIMED of it was answered.
    let mut ends: BTreeMap<u32, Instant> = BTreeMap::new();
    for c in claims(ops) {
        let e = ends.entry(c.attempt().unwrap_or(0)).or_insert(c.end);
        *e = (*e).min(c.end);
    }
    for op in ops.iter().filter(|o| o.call.holds() && o.acknowledged()) {
        let Some(token) = op.token.as_deref() else {
            continue;
        };
        let Some(&attempt) = granted.get(token) else {
            v.push(format!(
                "fencing: {key} {:?} accepted a token no CLAIMED answer gave",
                op.call
            ));
            continue;
        };
        if op.attempt() != Some(attempt) {
            v.push(format!(
                "fencing: {key} {:?} with the token of attempt {attempt} answered attempt {:?}",
                op.call,
                op.attempt()
            ));
        }
        let newer = ends.range(attempt + 1..).map(|(_, e)| *e).min();
        if newer.is_some_and(|e| e < op.start) {
            v.push(format!(
                "fencing: {key} {:?} accepted from attempt {attempt}'s token after a newer \
                 attempt was CLAIMED",
                op.call
            ));
        }
    }
}

/// Nothing answered COMPLETED is CLAIMED later, and a completed receipt's response never
/// changes.
fn completed_stays_completed(key: &str, ops: &[&Op], v: &mut Vec<String>) {
    let completed: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|o| answered_state(o) == Some(State::Completed))
        .collect();
    let Some(first) = completed.iter().map(|o| o.end).min() else {
        return;
    };
    if claims(ops).any(|c| first < c.start) {
        v.push(format!(
            "completed stays completed: {key} was CLAIMED after COMPLETED"
        ));
    }
    let responses: Vec<&[u8]> = completed
        .iter()
        .filter_map(|o| match &o.outcome {
            Outcome::Ok { response, .. } => Some(response.as_slice()),
            _ => None,
        })
        .collect();
    if responses.windows(2).any(|w| w[0] != w[1]) {
        v.push(format!(
            "completed stays completed: {key} answered two different responses"
        ));
    }
    let sent = |r: &[u8]| {
        ops.iter()
            .any(|o| o.call == Call::Complete && o.sent_response == r)
    };
    if let Some(r) = responses.first().filter(|r| !sent(r)) {
        v.push(format!(
            "completed stays completed: {key} answered a response no Complete sent ({} bytes)",
            r.len()
        ));
    }
}

/// Everything acknowledged is there afterwards: the final attempt is at least every attempt
/// answered, and a receipt answered COMPLETED or QUARANTINED is still so (COMPLETED with
/// the same response).
fn survives(key: &str, ops: &[&Op], last: Option<&Final>, v: &mut Vec<String>) {
    let highest = ops.iter().filter_map(|o| o.attempt()).max();
    let Some(highest) = highest else {
        return;
    };
    let Some(last) = last else {
        v.push(format!(
            "durability: {key} was answered (attempt {highest}) but is gone"
        ));
        return;
    };
    if last.attempt < highest {
        v.push(format!(
            "durability: {key} ended at attempt {} after attempt {highest} was answered",
            last.attempt
        ));
    }
    for op in ops.iter().filter(|o| o.acknowledged()) {
        let Outcome::Ok {
            state, response, ..
        } = &op.outcome
        else {
            continue;
        };
        let kept = match state {
            State::Completed => last.state == State::Completed && &last.response == response,
            State::Quarantined => last.state == State::Quarantined,
            _ => true,
        };
        if !kept {
            v.push(format!(
                "durability: {key} was answered {state:?} but ended {:?}",
                last.state
            ));
            return;
        }
    }
}

#[cfg(test)]
mod tests;
