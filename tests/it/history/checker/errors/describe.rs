//! How a violation of "an error changes nothing" is told: the attempt, how it was seen,
//! the Claim cut short whose deadline came closest (and by how much it was past), and the
//! answered Claims that were in flight while it was written.

use super::{Candidate, ERROR_MARGIN, Window, micros_of, signed};
use crate::history::{Call, Op, Outcome};
use claimd::pb::Decision;

/// The answered Claims that were in flight while the attempt was written (one of them may
/// have written it and been answered otherwise), the longest of them described.
pub(super) fn suspect(w: &Window, ops: &[&Op]) -> String {
    let in_flight: Vec<&Op> = ops
        .iter()
        .copied()
        .filter(|o| o.call == Call::Claim && o.acknowledged())
        .filter(|o| w.before.is_none_or(|b| o.start < b))
        .filter(|o| w.after.is_none_or(|a| o.end > a.start))
        .collect();
    // Those answered CLAIMED or IN_FLIGHT first (a Claim that took the receipt over).
    let rank = |o: &&&Op| {
        let took = matches!(o.decision(), Some(Decision::Claimed | Decision::InFlight));
        (took, o.end.duration_since(o.start))
    };
    let Some(longest) = in_flight.iter().max_by_key(rank) else {
        return String::new();
    };
    let answer = match &longest.outcome {
        Outcome::Ok {
            decision, attempt, ..
        } => format!("{decision:?} attempt {attempt}"),
        other => format!("{other:?}"),
    };
    format!(
        "; {} answered Claim(s) were in flight meanwhile, the longest answered {answer} \
         after {} ms",
        in_flight.len(),
        longest.end.duration_since(longest.start).as_millis()
    )
}

pub(super) fn describe(key: &str, n: u32, w: &Window, candidates: &[Candidate]) -> String {
    let mut line = format!(
        "an error changes nothing: {key} attempt {n} was granted to nobody (no CLAIMED \
         answer carried it"
    );
    if w.in_flight > 0 {
        line += &format!("; {} Claim(s) were answered IN_FLIGHT on it", w.in_flight);
    }
    line += ")";
    let earlier = || {
        candidates
            .iter()
            .filter(|c| w.before.is_none_or(|b| c.op.start < b))
    };
    let taken = earlier().filter(|c| w.admits(c)).count();
    // Of the calls cut short before it was seen, the one whose deadline came closest.
    let closest = earlier()
        .filter(|c| !w.admits(c))
        .filter_map(|c| w.late(c).map(|late| (late, c)))
        .min_by_key(|((late, _), _)| *late);
    match closest {
        Some(((late, what), c)) => {
            let code = match c.op.outcome {
                Outcome::Unknown(code) => format!("{code:?}"),
                _ => String::new(),
            };
            line += &format!(
                ": the Claim cut short closest to it, answered {code} with a {} ms \
                 deadline, was {} ms past that deadline when {what} (margin {} ms)",
                c.op.deadline.unwrap_or_default().as_millis(),
                late / 1000,
                ERROR_MARGIN.as_millis()
            );
            if let (Some(before), Some(b)) = (w.before, c.bound) {
                let seen = signed(before, b.by) + micros_of(ERROR_MARGIN);
                line += &format!(", and it was first seen {} ms past it", seen / 1000);
            }
        }
        None if taken == 0 => line += ", and no Claim's answer was lost",
        None => {}
    }
    if taken > 0 {
        line += &format!("; the {taken} Claim(s) that may have written it own other attempts");
    }
    line
}
