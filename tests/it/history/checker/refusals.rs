//! **A refusal changes nothing** (docs/DESIGN.md §3.8, §5.15): a call answered
//! RESOURCE_EXHAUSTED was refused before the store — by a tenant quota (after
//! authentication and validation, before any read or write), by the request-size limit or
//! by the per-source limits on failed authentications and buffered bodies — so it
//! certainly did nothing: no receipt written, no attempt spent, no lease extended, nothing
//! settled. Unlike UNAVAILABLE (which may have committed), it can explain no state; here
//! the history is searched for its effect.
//!
//! - A refused **Claim** never owns an attempt: only CLAIMED answers and Claims whose
//!   outcome is unknown can (`errors.rs`), so an attempt only a refused Claim could have
//!   written is reported by "an error changes nothing", which names the refused Claims
//!   sent before it was seen.
//! - A refused **Complete**: the response it sent is never seen stored (by any answer, a
//!   Get or the final read) unless a Complete of the same response that was answered, or
//!   whose outcome is unknown, had been sent before it was seen.
//! - A refused **Heartbeat**: no lease end of its attempt is seen past what the grant and
//!   the accepted Heartbeats of its token can have set (each at most its answer's arrival
//!   plus the lease it asked for, on the store's clock) while the refused Heartbeat's own
//!   lease would reach it. A Heartbeat of the token whose outcome is unknown may have set
//!   any lease end, so the rule then says nothing.
//! - A refused **Retry**: its attempt is never seen RETRY_WAIT unless a Retry of the token
//!   that was answered or is unknown had been sent before.
//! - A refused **Quarantine**: its attempt is never seen QUARANTINED unless a Quarantine or
//!   Retry of the token (a counted Retry at the end of the budget quarantines) that was
//!   answered or is unknown had been sent before, or a Claim that can have quarantined it
//!   at the end of the budget: answered QUARANTINED or unknown, and answered after the
//!   grant's lease could have ended.

use super::super::{Call, Final, Micros, Op, Outcome};
use claimd::pb::{Decision, State};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tonic::Code;

/// How far past the latest lease end the grant and the accepted Heartbeats can have set a
/// seen lease end may be. Both ends are one machine's clock (the store's, which the test
/// reads plus the test clock's offset) and a write reads it before it commits, so this
/// covers only rounding.
pub const REFUSAL_LEASE_MARGIN: Duration = Duration::from_millis(20);

/// Whether `op` was refused by a limit before the store (RESOURCE_EXHAUSTED).
pub fn refused(op: &Op) -> bool {
    matches!(op.outcome, Outcome::Refused(Code::ResourceExhausted))
}

/// Whether `op` may have taken effect: answered, or its outcome unknown.
fn may_have_acted(op: &Op) -> bool {
    matches!(op.outcome, Outcome::Ok { .. } | Outcome::Unknown(_))
}

/// What a read showed of the receipt, and when it came back (`None`: the final read, after
/// every call).
struct Seen<'a> {
    at: Option<Instant>,
    attempt: u32,
    state: State,
    response: &'a [u8],
    lease_end: Option<Micros>,
}

impl Seen<'_> {
    /// Whether `op` was sent before this was seen.
    fn after(&self, op: &Op) -> bool {
        self.at.is_none_or(|at| op.start < at)
    }

    fn when(&self) -> String {
        match self.at {
            Some(_) => "an answer".to_owned(),
            None => "the final read".to_owned(),
        }
    }
}

fn seen<'a>(ops: &[&'a Op], last: Option<&'a Final>) -> Vec<Seen<'a>> {
    let answers = ops.iter().filter_map(|o| match &o.outcome {
        Outcome::Ok {
            attempt,
            state,
            response,
            lease_end,
            ..
        } => Some(Seen {
            at: Some(o.end),
            attempt: *attempt,
            state: *state,
            response,
            lease_end: *lease_end,
        }),
        _ => None,
    });
    let last = last.map(|l| Seen {
        at: None,
        attempt: l.attempt,
        state: l.state,
        response: &l.response,
        lease_end: l.lease_end,
    });
    answers.chain(last).collect()
}

/// The rule, for one key's calls and its final read.
pub(super) fn refusals_change_nothing(
    key: &str,
    ops: &[&Op],
    last: Option<&Final>,
    v: &mut Vec<String>,
) {
    let refusals: Vec<&Op> = ops.iter().copied().filter(|o| refused(o)).collect();
    if refusals
        .iter()
        .all(|o| o.call == Call::Claim || o.call == Call::Get)
    {
        return;
    }
    let seen = seen(ops, last);
    // The CLAIMED answer that granted each token.
    let grants: HashMap<&str, &Op> = ops
        .iter()
        .copied()
        .filter(|o| o.decision() == Some(Decision::Claimed))
        .filter_map(|o| match &o.outcome {
            Outcome::Ok { token: Some(t), .. } => Some((t.as_str(), o)),
            _ => None,
        })
        .collect();
    let of_token = |t: &str, calls: &[Call]| -> Vec<&Op> {
        ops.iter()
            .copied()
            .filter(|o| o.token.as_deref() == Some(t) && calls.contains(&o.call))
            .collect()
    };
    for r in &refusals {
        match r.call {
            Call::Complete => complete(key, r, ops, &seen, v),
            Call::Heartbeat | Call::Retry | Call::Quarantine => {
                let Some(token) = r.token.as_deref() else {
                    continue;
                };
                let Some(grant) = grants.get(token) else {
                    continue;
                };
                let attempt = grant.attempt().unwrap_or(0);
                match r.call {
                    Call::Heartbeat => {
                        let beats = of_token(token, &[Call::Heartbeat]);
                        heartbeat(key, r, grant, &beats, &seen, v);
                    }
                    Call::Retry => {
                        let retries = of_token(token, &[Call::Retry]);
                        settled(key, r, attempt, State::RetryWait, &retries, &[], &seen, v);
                    }
                    _ => {
                        let settles = of_token(token, &[Call::Retry, Call::Quarantine]);
                        let claims = quarantining_claims(ops, grant);
                        let state = State::Quarantined;
                        settled(key, r, attempt, state, &settles, &claims, &seen, v);
                    }
                }
            }
            Call::Claim | Call::Get => {}
        }
    }
}

/// A refused Complete's response is seen stored only after a Complete of it that may have
/// acted was sent.
fn complete(key: &str, r: &Op, ops: &[&Op], seen: &[Seen], v: &mut Vec<String>) {
    let sent = r.sent_response.as_slice();
    let shown = seen.iter().find(|s| {
        s.state == State::Completed
            && s.response == sent
            && s.after(r)
            && !ops.iter().any(|o| {
                o.call == Call::Complete
                    && o.sent_response == sent
                    && may_have_acted(o)
                    && s.after(o)
            })
    });
    if let Some(s) = shown {
        v.push(format!(
            "a refusal changes nothing: {key} Complete refused RESOURCE_EXHAUSTED, yet \
             {} showed the receipt COMPLETED with its response (attempt {}) and no \
             Complete of that response that may have acted was sent before",
            s.when(),
            s.attempt
        ));
    }
}

/// A refused Heartbeat's lease is never seen.
fn heartbeat(key: &str, r: &Op, grant: &Op, beats: &[&Op], seen: &[Seen], v: &mut Vec<String>) {
    if beats
        .iter()
        .any(|o| matches!(o.outcome, Outcome::Unknown(_)))
    {
        return;
    }
    let lease = |o: &Op| i64::try_from(o.lease.unwrap_or_default().as_micros()).unwrap_or(0);
    let answered_end = |o: &Op| match &o.outcome {
        Outcome::Ok { lease_end, .. } => *lease_end,
        _ => None,
    };
    // The latest lease end a write of the token that acted can have set: no later than its
    // answer's arrival plus its lease (or, without a recorded lease, the end it answered).
    let most = std::iter::once(grant)
        .chain(beats.iter().copied().filter(|o| o.acknowledged()))
        .filter_map(|o| match o.lease {
            Some(_) => Some(o.answered_at + lease(o)),
            None => answered_end(o),
        })
        .max();
    let Some(most) = most else {
        return;
    };
    let margin = i64::try_from(REFUSAL_LEASE_MARGIN.as_micros()).unwrap_or(i64::MAX);
    let attempt = grant.attempt().unwrap_or(0);
    // What the refused Heartbeat would have set at the least: from when it was sent.
    let would = r.lease.map(|_| r.sent_at + lease(r));
    let shown = seen.iter().find(|s| {
        s.attempt == attempt
            && s.state == State::Processing
            && s.after(r)
            && s.lease_end
                .is_some_and(|end| end > most + margin && would.is_none_or(|w| end + margin >= w))
    });
    if let Some(s) = shown {
        v.push(format!(
            "a refusal changes nothing: {key} Heartbeat refused RESOURCE_EXHAUSTED, yet {} \
             showed attempt {attempt}'s lease ending {} ms past the latest end its grant and \
             accepted Heartbeats can have set (margin {} ms)",
            s.when(),
            (s.lease_end.unwrap_or(most) - most) / 1000,
            REFUSAL_LEASE_MARGIN.as_millis()
        ));
    }
}

/// The Claims that can have quarantined `grant`'s attempt at the end of the budget: answered
/// QUARANTINED or unknown, and answered once the grant's lease can have ended.
fn quarantining_claims<'a>(ops: &[&'a Op], grant: &Op) -> Vec<&'a Op> {
    let lease = i64::try_from(grant.lease.unwrap_or_default().as_micros()).unwrap_or(0);
    ops.iter()
        .copied()
        .filter(|o| o.call == Call::Claim && o.answered_at >= grant.sent_at + lease)
        .filter(|o| match &o.outcome {
            Outcome::Unknown(_) => true,
            Outcome::Ok { decision, .. } => *decision == Some(Decision::Quarantined),
            Outcome::Refused(_) => false,
        })
        .collect()
}

/// A refused Retry's (or Quarantine's) attempt is seen in the state it would have set only
/// after a call that may have set it was sent.
#[allow(clippy::too_many_arguments)]
fn settled(
    key: &str,
    r: &Op,
    attempt: u32,
    state: State,
    settles: &[&Op],
    claims: &[&Op],
    seen: &[Seen],
    v: &mut Vec<String>,
) {
    let shown = seen.iter().find(|s| {
        s.attempt == attempt
            && s.state == state
            && s.after(r)
            && !settles
                .iter()
                .chain(claims)
                .any(|o| may_have_acted(o) && s.after(o))
    });
    if let Some(s) = shown {
        v.push(format!(
            "a refusal changes nothing: {key} {:?} refused RESOURCE_EXHAUSTED, yet {} showed \
             attempt {attempt} {state:?} and no call that may have made it so was sent before",
            r.call,
            s.when()
        ));
    }
}
