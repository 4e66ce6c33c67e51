//! **An error that says nothing changed changed nothing** (docs/DESIGN.md §3.8): a call
//! answered DEADLINE_EXCEEDED or CANCELLED after telling claimd its deadline may have
//! taken effect only by committing before that deadline (the crossing of a commit and a
//! deadline, §5.9); after it, its receipt reads as if the call never happened — no new
//! row, no attempt spent, no lease on a token nobody was given.
//!
//! What the history can see is attempts. Every attempt of a key from 1 to the highest seen
//! (by any answer, a Get, or the final read) was granted by exactly one Claim's write, so
//! each must be owned by one call: the CLAIMED answer that carried it, or else one distinct
//! Claim whose outcome is unknown and whose write can have committed when that attempt
//! did. An attempt no call can own was granted to nobody: an orphaned lease (Claims answered
//! IN_FLIGHT on it until it runs out), a new row, or an attempt spent, by a call that was
//! told it failed — or by a Claim that was answered something else (e.g. IN_FLIGHT on its
//! own lease, issue 26 §4).
//!
//! When attempt `n` committed is bounded from below by every call that still saw the key
//! below `n` (a Get that found no receipt counts as attempt 0: it read after it was sent,
//! so `n` committed after that call's `start`) and by the write's own clock reading (the
//! receipt's `updated_at` while it is PROCESSING at `n`: the commit follows it), and from
//! above by the first answer that showed `n` or more. A Claim cut short at a deadline it
//! told claimd can own `n` only if its deadline plus [`ERROR_MARGIN`] is later than both
//! lower bounds. Any other unknown outcome (UNAVAILABLE, a broken connection, a deadline
//! claimd was not told) can own any attempt committed after it was sent: it may have
//! committed at any time. So can a Claim with `wait` that was not answered CLAIMED: its
//! takeover inside claimd may have committed with its answer lost (DESIGN §2.9).

mod describe;

use super::super::{Call, Final, Micros, Op, Outcome};
use claimd::pb::{Decision, State};
use describe::{describe, suspect};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tonic::Code;

/// How long after a call's deadline (as the caller measured it from sending) its write may
/// still commit and count as the allowed crossing of a commit and a deadline (§5.9). It
/// bounds three things together: claimd measures the deadline from when the request
/// arrived (later than the caller's `start` by its way there, a connection's setup on the
/// first call), checks it 2 ms early after its last lock wait and then commits (under a
/// millisecond on an idle machine), and a shared 2-core test machine can pause any of the
/// processes for a while. The defects this rule is for commit seconds after the deadline
/// (a lock held by another transaction, a concurrent insert rolled back).
pub const ERROR_MARGIN: Duration = Duration::from_millis(500);

/// What a call cut short by a deadline it told claimd leaves open: its write must have
/// committed by `deadline + ERROR_MARGIN`, on the test's clock and on the store's.
#[derive(Clone, Copy)]
struct Bound {
    by: Instant,
    by_store: Micros,
}

/// A Claim whose outcome is unknown: when it was sent, and its bound if it has one.
struct Candidate<'a> {
    op: &'a Op,
    bound: Option<Bound>,
}

/// When attempt `n` committed, as far as the history tells.
#[derive(Default)]
struct Window<'a> {
    /// The last call sent that still saw the key below `n`.
    after: Option<&'a Op>,
    /// The write's own clock reading.
    written: Option<Micros>,
    /// The first answer that showed `n` or more.
    before: Option<Instant>,
    /// How many Claims were answered IN_FLIGHT on `n`.
    in_flight: usize,
}

impl Window<'_> {
    /// Whether `c` can have written the attempt.
    fn admits(&self, c: &Candidate) -> bool {
        if self.before.is_some_and(|b| c.op.start >= b) {
            return false;
        }
        let Some(bound) = c.bound else {
            return true;
        };
        self.after.is_none_or(|o| bound.by > o.start)
            && self.written.is_none_or(|w| bound.by_store > w)
    }

    /// How far past `c`'s deadline the attempt was seen to commit at the earliest, and
    /// what showed it.
    fn late(&self, c: &Candidate) -> Option<(i64, String)> {
        let bound = c.bound?;
        let margin = micros_of(ERROR_MARGIN);
        let by_read = self.after.map(|o| {
            let late = signed(o.start, bound.by) + margin;
            let what = match o.seen() {
                Some(0) => "no receipt".to_owned(),
                Some(a) => format!("attempt {a}"),
                None => "an earlier attempt".to_owned(),
            };
            (late, format!("a {:?} sent then still found {what}", o.call))
        });
        let by_write = self.written.map(|w| {
            let late = w - bound.by_store + margin;
            (
                late,
                "the receipt's updated_at says it was written then".to_owned(),
            )
        });
        by_read
            .into_iter()
            .chain(by_write)
            .max_by_key(|(late, _)| *late)
    }
}

fn micros_of(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// `a - b` in microseconds, negative when `a` came first.
fn signed(a: Instant, b: Instant) -> i64 {
    match a.checked_duration_since(b) {
        Some(d) => micros_of(d),
        None => -micros_of(b.duration_since(a)),
    }
}

/// The rule, for one key's calls and its final read.
pub(super) fn nothing_changed(key: &str, ops: &[&Op], last: Option<&Final>, v: &mut Vec<String>) {
    let granted: HashSet<u32> = ops
        .iter()
        .filter(|o| o.decision() == Some(Decision::Claimed))
        .filter_map(|o| o.attempt())
        .collect();
    let top = ops
        .iter()
        .filter_map(|o| o.attempt())
        .chain(last.map(|l| l.attempt))
        .max()
        .unwrap_or(0);
    let owed: Vec<u32> = (1..=top).filter(|n| !granted.contains(n)).collect();
    if owed.is_empty() {
        return;
    }
    let candidates: Vec<Candidate> = ops
        .iter()
        .filter(|o| o.call == Call::Claim)
        .filter_map(|o| match o.outcome {
            Outcome::Unknown(code) => Some(Candidate {
                op: o,
                bound: bound(o, code),
            }),
            // A waiting Claim claims again inside claimd at its holder's lease end; when
            // that takeover committed but its answer was lost, and its lease ran out
            // before claimd could read it back, another Claim took the receipt over and
            // the waiter was answered what came of that: an attempt spent by a call that
            // was not told of it, as by a holder that died (docs/DESIGN.md §2.9).
            Outcome::Ok { decision, .. } if o.waited && decision != Some(Decision::Claimed) => {
                Some(Candidate { op: o, bound: None })
            }
            _ => None,
        })
        .collect();
    let windows: Vec<Window> = owed.iter().map(|&n| window(n, ops, last)).collect();
    let owner = matching(&windows, &candidates);
    for (i, n) in owed.iter().enumerate() {
        if owner[i].is_none() {
            let mut line = describe(key, *n, &windows[i], &candidates);
            line += &suspect(&windows[i], ops);
            line += &refused_claims(&windows[i], ops);
            v.push(line);
        }
    }
}

/// The Claims refused RESOURCE_EXHAUSTED that were sent while the attempt can have been
/// written: a refusal writes nothing (`refusals.rs`), so none of them owns it, but one that
/// did write would leave exactly this.
fn refused_claims(w: &Window, ops: &[&Op]) -> String {
    let refused = ops
        .iter()
        .filter(|o| o.call == Call::Claim && super::refusals::refused(o))
        .filter(|o| w.before.is_none_or(|b| o.start < b))
        .filter(|o| w.after.is_none_or(|a| o.end > a.start))
        .count();
    match refused {
        0 => String::new(),
        n => format!("; {n} Claim(s) refused RESOURCE_EXHAUSTED were sent meanwhile"),
    }
}

/// The bound of a call cut short at a deadline it told claimd.
fn bound(op: &Op, code: Code) -> Option<Bound> {
    let deadline = op.deadline?;
    if !matches!(code, Code::DeadlineExceeded | Code::Cancelled) {
        return None;
    }
    Some(Bound {
        by: op.start + deadline + ERROR_MARGIN,
        by_store: op.sent_at + micros_of(deadline + ERROR_MARGIN),
    })
}

fn window<'a>(n: u32, ops: &[&'a Op], last: Option<&Final>) -> Window<'a> {
    let mut w = Window::default();
    for &o in ops {
        let Some(seen) = o.seen() else { continue };
        if seen < n {
            if w.after.is_none_or(|a| a.start < o.start) {
                w.after = Some(o);
            }
            continue;
        }
        w.before = Some(w.before.map_or(o.end, |b| b.min(o.end)));
        if let Outcome::Ok {
            state: State::Processing,
            updated_at,
            attempt,
            decision,
            ..
        } = &o.outcome
            && *attempt == n
        {
            // Only a grant writes PROCESSING at `n`, and nobody holds an owed attempt's
            // token to heartbeat it: the row's time is the grant's.
            if let Some(at) = *updated_at {
                w.written = Some(w.written.map_or(at, |x| x.min(at)));
            }
            w.in_flight += usize::from(*decision == Some(Decision::InFlight));
        }
    }
    if let Some(l) = last.filter(|l| l.attempt == n && l.state == State::Processing)
        && let Some(at) = l.updated_at
    {
        w.written = Some(w.written.map_or(at, |x| x.min(at)));
    }
    w
}

/// A largest matching of owed attempts to distinct candidates (augmenting paths; a key has
/// a handful of each): the candidate owning each attempt, if any.
fn matching(windows: &[Window], candidates: &[Candidate]) -> Vec<Option<usize>> {
    fn augment(
        i: usize,
        windows: &[Window],
        candidates: &[Candidate],
        seen: &mut [bool],
        owner_of: &mut [Option<usize>],
    ) -> bool {
        for (c, cand) in candidates.iter().enumerate() {
            if seen[c] || !windows[i].admits(cand) {
                continue;
            }
            seen[c] = true;
            let free = match owner_of[c] {
                None => true,
                Some(j) => augment(j, windows, candidates, seen, owner_of),
            };
            if free {
                owner_of[c] = Some(i);
                return true;
            }
        }
        false
    }
    let mut owner_of: Vec<Option<usize>> = vec![None; candidates.len()];
    for i in 0..windows.len() {
        let mut seen = vec![false; candidates.len()];
        augment(i, windows, candidates, &mut seen, &mut owner_of);
    }
    let mut owner = vec![None; windows.len()];
    for (c, i) in owner_of.iter().enumerate() {
        if let Some(i) = i {
            owner[*i] = Some(c);
        }
    }
    owner
}
