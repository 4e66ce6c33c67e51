//! An operator's Quarantine of an orphan (the console's, docs/DESIGN.md §5.12) as one pure
//! function: a compare-and-set on the receipt the operator saw. It quarantines only the
//! same life of the key, unchanged since it was seen (state, attempt, last change), and
//! only while it is an orphan at the store's now — PROCESSING with an expired lease, or
//! RETRY_WAIT that is due. Anything else — a live lease, a takeover or a retry since, a key
//! pruned and claimed again — is refused with [`NotQuarantined`], nothing changed. No claim
//! is taken on the way: no attempt is spent and no lease is left behind.

use super::{Receipt, State, Timestamp};

/// What the operator saw of a receipt when it asked for the Quarantine (the receipt page's
/// form carries it back): the version the write compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// When the receipt's life began: a key pruned (or deleted) and claimed again starts a
    /// new life, with a new `created_at`.
    pub created_at: Timestamp,
    /// Its last change (every change but the janitor's response strip sets it).
    pub updated_at: Timestamp,
    /// Its state.
    pub state: State,
    /// Its attempt.
    pub attempt: u32,
}

impl Seen {
    /// What a page showing `r` saw.
    pub fn of(r: &Receipt) -> Seen {
        Seen {
            created_at: r.created_at,
            updated_at: r.updated_at,
            state: r.state,
            attempt: r.attempt,
        }
    }
}

/// Why an operator's Quarantine changed nothing; the text completes "Not quarantined: …".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotQuarantined {
    /// The key's receipt is another life: the one seen was pruned (or deleted) and the key
    /// claimed again since.
    #[error(
        "it changed since you saw it: that receipt is gone and its key was claimed again \
         (a new receipt, {}, attempt {attempt})",
        upper(*.state)
    )]
    AnotherLife {
        /// The new receipt's state.
        state: State,
        /// The new receipt's attempt.
        attempt: u32,
    },
    /// The same life, changed since it was seen.
    #[error(
        "it changed since you saw it: it is {} now, attempt {attempt}",
        upper(*.state)
    )]
    Changed {
        /// Its state now.
        state: State,
        /// Its attempt now.
        attempt: u32,
    },
    /// As seen, but PROCESSING under a lease that has not ended: its holder works on it.
    #[error("it is not an orphan now: its lease is live (it ends {})", time(*.until))]
    LeaseLive {
        /// The lease's end.
        until: Option<Timestamp>,
    },
    /// As seen, but RETRY_WAIT and not due yet.
    #[error("it is not an orphan now: its retry is not due yet (due {})", time(*.at))]
    NotDue {
        /// When it is due.
        at: Option<Timestamp>,
    },
    /// As seen, but COMPLETED or QUARANTINED: nobody's orphan.
    #[error("it is not an orphan: it is {}", upper(*.0))]
    Finished(State),
}

fn upper(state: State) -> String {
    state.as_str().to_uppercase()
}

fn time(t: Option<Timestamp>) -> String {
    t.map_or("—".to_owned(), |t| {
        t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
    })
}

/// Quarantines `r` at the store's `now` with the operator's `reason` if it is the receipt
/// `seen` (same life, same state, attempt and last change) and an orphan at `now`: it
/// becomes QUARANTINED with `last_error` = `reason`; the token, lease and next attempt are
/// cleared (a late holder gets `LeaseLost`); the attempt and the budget are untouched (no
/// attempt is spent); checkpoint and recovery payload are kept, for a Redrive. Otherwise
/// [`NotQuarantined`] says what differs, and nothing is to be written.
pub fn quarantine_orphan(
    r: &Receipt,
    seen: &Seen,
    reason: &str,
    now: Timestamp,
) -> Result<Receipt, NotQuarantined> {
    let (state, attempt) = (r.state, r.attempt);
    if r.created_at != seen.created_at {
        return Err(NotQuarantined::AnotherLife { state, attempt });
    }
    if Seen::of(r) != *seen {
        return Err(NotQuarantined::Changed { state, attempt });
    }
    if !r.orphaned_at(now) {
        return Err(match state {
            State::Processing => NotQuarantined::LeaseLive {
                until: r.lease_expires_at,
            },
            State::RetryWait => NotQuarantined::NotDue {
                at: r.next_attempt_at,
            },
            State::Completed | State::Quarantined => NotQuarantined::Finished(state),
        });
    }
    let mut next = r.clone();
    next.state = State::Quarantined;
    next.last_error = Some(reason.to_owned());
    next.claim_token = None;
    next.lease_expires_at = None;
    next.next_attempt_at = None;
    next.updated_at = now;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Action, ActionError, ClaimInput, Policy, ReceiptKey, apply, decide_claim};
    use chrono::{DateTime, TimeDelta, Utc};
    use uuid::Uuid;

    fn t(secs: i64) -> Timestamp {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    /// `max_attempts = 1`: one claim spends the whole budget.
    fn policy() -> Policy {
        Policy {
            max_attempts: 1,
            ..Policy::default()
        }
    }

    /// Claimed at `at` with a 1 s lease and a recovery payload.
    fn claimed(current: Option<&Receipt>, at: i64) -> (Receipt, Uuid) {
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            fingerprint: b"fp".to_vec(),
            lease_ttl: TimeDelta::seconds(1),
            recovery_payload: Some(b"body".to_vec()),
            new_token: Uuid::new_v4(),
        };
        let out = decide_claim(current, &input, t(at), &Policy::default());
        (out.receipt, input.new_token)
    }

    /// Claimed at 0, retried at 1 without spending the budget: due at 11.
    fn retry_waiting() -> Receipt {
        let (r, token) = claimed(None, 0);
        let retry = Action::Retry {
            error: "boom".into(),
            retry_after: Some(TimeDelta::seconds(10)),
            count_attempt: false,
            jitter: 0.0,
        };
        apply(&r, token, &retry, t(1), &policy()).unwrap()
    }

    #[test]
    fn an_expired_lease_with_its_budget_spent_is_quarantined_with_the_reason_and_no_attempt() {
        let (r, token) = claimed(None, 0);
        assert_eq!(r.spent_attempts(), policy().max_attempts);
        let next = quarantine_orphan(&r, &Seen::of(&r), "hung on a lock", t(2)).unwrap();
        assert_eq!(next.state, State::Quarantined);
        assert_eq!(next.last_error.as_deref(), Some("hung on a lock"));
        assert_eq!((next.attempt, next.free_attempts), (1, 0));
        assert_eq!((next.claim_token, next.lease_expires_at), (None, None));
        assert_eq!(next.next_attempt_at, None);
        assert_eq!(next.updated_at, t(2));
        assert_eq!(next.created_at, r.created_at);
        assert_eq!(next.recovery_payload.as_deref(), Some(&b"body"[..]));
        let late = apply(
            &next,
            token,
            &Action::Complete { response: None },
            t(3),
            &policy(),
        );
        assert_eq!(late, Err(ActionError::LeaseLost), "the old holder is out");
        let redriven = crate::domain::redrive(&next, t(4)).unwrap();
        assert_eq!(redriven.state, State::RetryWait, "a dead letter like any");
    }

    #[test]
    fn a_due_retry_is_quarantined_and_its_schedule_cleared() {
        let r = retry_waiting();
        let next = quarantine_orphan(&r, &Seen::of(&r), "poison", t(11)).unwrap();
        assert_eq!(next.state, State::Quarantined);
        assert_eq!(next.next_attempt_at, None);
        assert_eq!((next.attempt, next.free_attempts), (1, 1));
        assert_eq!(next.last_error.as_deref(), Some("poison"));
    }

    #[test]
    fn a_live_lease_or_a_retry_not_yet_due_is_not_an_orphan() {
        let (r, _) = claimed(None, 0);
        let refused = quarantine_orphan(&r, &Seen::of(&r), "x", t(0));
        assert_eq!(
            refused,
            Err(NotQuarantined::LeaseLive { until: Some(t(1)) })
        );
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("its lease is live")
        );
        let r = retry_waiting();
        let refused = quarantine_orphan(&r, &Seen::of(&r), "x", t(10));
        assert_eq!(refused, Err(NotQuarantined::NotDue { at: Some(t(11)) }));
    }

    #[test]
    fn a_completed_or_quarantined_receipt_is_nobodys_orphan() {
        let (r, token) = claimed(None, 0);
        let done = apply(
            &r,
            token,
            &Action::Complete { response: None },
            t(0),
            &policy(),
        );
        let done = done.unwrap();
        let refused = quarantine_orphan(&done, &Seen::of(&done), "x", t(5));
        assert_eq!(refused, Err(NotQuarantined::Finished(State::Completed)));
        let q = quarantine_orphan(&r, &Seen::of(&r), "first", t(2)).unwrap();
        let again = quarantine_orphan(&q, &Seen::of(&q), "second", t(3));
        assert_eq!(again, Err(NotQuarantined::Finished(State::Quarantined)));
    }

    #[test]
    fn a_receipt_changed_since_it_was_seen_is_refused() {
        // Seen as a due retry of attempt 1; taken over (attempt 2), then due again.
        let seen = retry_waiting();
        let (taken, token) = claimed(Some(&seen), 11);
        let retry = Action::Retry {
            error: "again".into(),
            retry_after: Some(TimeDelta::seconds(1)),
            count_attempt: false,
            jitter: 0.0,
        };
        let now = apply(&taken, token, &retry, t(12), &policy()).unwrap();
        assert!(now.orphaned_at(t(20)));
        let refused = quarantine_orphan(&now, &Seen::of(&seen), "x", t(20));
        let changed = NotQuarantined::Changed {
            state: State::RetryWait,
            attempt: 2,
        };
        assert_eq!(refused, Err(changed));
        assert!(
            changed
                .to_string()
                .starts_with("it changed since you saw it")
        );
        // The same state and attempt with another last change (redriven since) is refused too.
        let mut touched = seen.clone();
        touched.updated_at = t(30);
        let refused = quarantine_orphan(&touched, &Seen::of(&seen), "x", t(40));
        assert!(matches!(refused, Err(NotQuarantined::Changed { .. })));
    }

    #[test]
    fn another_life_of_the_key_is_refused_even_in_the_same_state_and_attempt() {
        let (old, _) = claimed(None, 0);
        // Pruned, then a new delivery: attempt 1 again, PROCESSING, its lease over too.
        let (new, _) = claimed(None, 100);
        assert_eq!((new.state, new.attempt), (old.state, old.attempt));
        let refused = quarantine_orphan(&new, &Seen::of(&old), "x", t(200));
        let another = NotQuarantined::AnotherLife {
            state: State::Processing,
            attempt: 1,
        };
        assert_eq!(refused, Err(another));
    }
}
