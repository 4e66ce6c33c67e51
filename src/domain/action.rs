//! Complete, Heartbeat, Retry and Quarantine: what a holder may do with its claim token, as
//! one pure function from the current receipt to the next.

use super::{EXCEEDED_MAX_ATTEMPTS, Policy, Receipt, State, Timestamp, backoff_delay};
use chrono::TimeDelta;
use uuid::Uuid;

/// What the holder of a claim token asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// PROCESSING → COMPLETED, storing the response for replay.
    Complete {
        /// Replayed to duplicates.
        response: Option<Vec<u8>>,
    },
    /// Extends the lease to now + ttl, optionally storing a checkpoint.
    Heartbeat {
        /// New lease length from now.
        lease_ttl: TimeDelta,
        /// Replaces the stored checkpoint when given.
        checkpoint: Option<Vec<u8>>,
    },
    /// PROCESSING → RETRY_WAIT (or QUARANTINED when the budget is spent).
    Retry {
        /// Why the attempt failed.
        error: String,
        /// When to retry; backoff when absent.
        retry_after: Option<TimeDelta>,
        /// Whether this attempt spends the budget.
        count_attempt: bool,
        /// A sample from `[0, 1)` for the backoff jitter.
        jitter: f64,
    },
    /// PROCESSING → QUARANTINED at once.
    Quarantine {
        /// Why the event is poison.
        error: String,
    },
}

impl Action {
    /// The RPC name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Complete { .. } => "complete",
            Action::Heartbeat { .. } => "heartbeat",
            Action::Retry { .. } => "retry",
            Action::Quarantine { .. } => "quarantine",
        }
    }
}

/// Why an action was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// The token is not the current one: somebody else took the work over.
    #[error("the lease was lost: this claim token is no longer current")]
    LeaseLost,
    /// The receipt is not in a state that allows the action.
    #[error("the receipt is {}", .0.as_str())]
    WrongState(State),
}

/// Applies `action` by the holder of `token` to `r` at `now`. Returns the receipt after it;
/// an unchanged receipt (completing twice) means nothing needs to be written.
pub fn apply(
    r: &Receipt,
    token: Uuid,
    action: &Action,
    now: Timestamp,
    policy: &Policy,
) -> Result<Receipt, ActionError> {
    if r.claim_token != Some(token) {
        return Err(ActionError::LeaseLost);
    }
    if r.state == State::Completed && matches!(action, Action::Complete { .. }) {
        return Ok(r.clone());
    }
    if r.state != State::Processing {
        return Err(ActionError::WrongState(r.state));
    }
    let mut next = r.clone();
    next.updated_at = now;
    match action {
        Action::Complete { response } => {
            next.state = State::Completed;
            next.response = response.clone();
            next.completed_at = Some(now);
            next.lease_expires_at = None;
            next.checkpoint = None;
            next.recovery_payload = None;
        }
        Action::Heartbeat {
            lease_ttl,
            checkpoint,
        } => {
            next.lease_expires_at = Some(now + *lease_ttl);
            if checkpoint.is_some() {
                next.checkpoint = checkpoint.clone();
            }
        }
        Action::Retry {
            error,
            retry_after,
            count_attempt,
            jitter,
        } => {
            next.lease_expires_at = None;
            if *count_attempt && r.spent_attempts() >= policy.max_attempts {
                next.state = State::Quarantined;
                next.last_error = Some(format!("{EXCEEDED_MAX_ATTEMPTS}: {error}"));
            } else {
                let delay =
                    retry_after.unwrap_or_else(|| backoff_delay(policy, r.attempt, *jitter));
                next.state = State::RetryWait;
                next.next_attempt_at = Some(now + delay);
                next.last_error = Some(error.clone());
                next.free_attempts += u32::from(!*count_attempt);
            }
        }
        Action::Quarantine { error } => {
            next.state = State::Quarantined;
            next.lease_expires_at = None;
            next.last_error = Some(error.clone());
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClaimInput, ReceiptKey, decide_claim};
    use chrono::{DateTime, Utc};

    fn t(secs: i64) -> Timestamp {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn claimed(policy: &Policy) -> (Receipt, Uuid) {
        let token = Uuid::new_v4();
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            fingerprint: b"fp".to_vec(),
            lease_ttl: TimeDelta::seconds(30),
            recovery_payload: Some(b"body".to_vec()),
            new_token: token,
        };
        (decide_claim(None, &input, t(0), policy).receipt, token)
    }

    fn retry(count_attempt: bool) -> Action {
        Action::Retry {
            error: "boom".into(),
            retry_after: None,
            count_attempt,
            jitter: 0.0,
        }
    }

    #[test]
    fn complete_stores_the_response_and_drops_working_data() {
        let p = Policy::default();
        let (mut r, token) = claimed(&p);
        r.checkpoint = Some(b"cp".to_vec());
        let done = apply(
            &r,
            token,
            &Action::Complete {
                response: Some(b"ok".to_vec()),
            },
            t(5),
            &p,
        )
        .unwrap();
        assert_eq!(done.state, State::Completed);
        assert_eq!(done.response.as_deref(), Some(&b"ok"[..]));
        assert_eq!(done.completed_at, Some(t(5)));
        assert_eq!(
            (done.checkpoint.clone(), done.recovery_payload.clone()),
            (None, None)
        );
        let again = apply(&done, token, &Action::Complete { response: None }, t(9), &p).unwrap();
        assert_eq!(again, done, "completing twice changes nothing");
    }

    #[test]
    fn a_token_that_is_not_current_loses_the_lease() {
        let p = Policy::default();
        let (r, _) = claimed(&p);
        let err = apply(
            &r,
            Uuid::new_v4(),
            &Action::Complete { response: None },
            t(1),
            &p,
        );
        assert_eq!(err, Err(ActionError::LeaseLost));
    }

    #[test]
    fn heartbeat_extends_the_lease_even_after_it_ran_out() {
        let p = Policy::default();
        let (r, token) = claimed(&p);
        let hb = Action::Heartbeat {
            lease_ttl: TimeDelta::seconds(60),
            checkpoint: Some(b"cp".to_vec()),
        };
        let next = apply(&r, token, &hb, t(45), &p).unwrap();
        assert_eq!(next.lease_expires_at, Some(t(105)));
        assert_eq!(next.checkpoint.as_deref(), Some(&b"cp"[..]));
        let keep = Action::Heartbeat {
            lease_ttl: TimeDelta::seconds(1),
            checkpoint: None,
        };
        assert_eq!(
            apply(&next, token, &keep, t(50), &p).unwrap().checkpoint,
            next.checkpoint
        );
    }

    #[test]
    fn retry_waits_for_backoff_or_retry_after_and_keeps_the_checkpoint() {
        let p = Policy::default();
        let (mut r, token) = claimed(&p);
        r.checkpoint = Some(b"cp".to_vec());
        let next = apply(&r, token, &retry(true), t(2), &p).unwrap();
        assert_eq!(next.state, State::RetryWait);
        assert_eq!(
            next.next_attempt_at,
            Some(t(2) + TimeDelta::milliseconds(500))
        );
        assert_eq!(next.lease_expires_at, None);
        assert_eq!(next.checkpoint.as_deref(), Some(&b"cp"[..]));
        assert_eq!(next.last_error.as_deref(), Some("boom"));
        let after = Action::Retry {
            error: "429".into(),
            retry_after: Some(TimeDelta::seconds(40)),
            count_attempt: false,
            jitter: 0.3,
        };
        let next = apply(&r, token, &after, t(2), &p).unwrap();
        assert_eq!(next.next_attempt_at, Some(t(42)));
        assert_eq!(next.free_attempts, 1);
        assert_eq!(next.spent_attempts(), 0);
    }

    #[test]
    fn retry_with_the_budget_spent_quarantines_unless_it_does_not_count() {
        let p = Policy {
            max_attempts: 1,
            ..Policy::default()
        };
        let (r, token) = claimed(&p);
        let next = apply(&r, token, &retry(true), t(2), &p).unwrap();
        assert_eq!(next.state, State::Quarantined);
        assert!(next.last_error.unwrap().starts_with(EXCEEDED_MAX_ATTEMPTS));
        let next = apply(&r, token, &retry(false), t(2), &p).unwrap();
        assert_eq!(next.state, State::RetryWait);
    }

    #[test]
    fn quarantine_is_immediate_and_later_actions_see_the_state() {
        let p = Policy::default();
        let (r, token) = claimed(&p);
        let q = Action::Quarantine {
            error: "poison".into(),
        };
        let next = apply(&r, token, &q, t(1), &p).unwrap();
        assert_eq!(next.state, State::Quarantined);
        let err = apply(&next, token, &Action::Complete { response: None }, t(2), &p);
        assert_eq!(err, Err(ActionError::WrongState(State::Quarantined)));
        let hb = Action::Heartbeat {
            lease_ttl: TimeDelta::seconds(1),
            checkpoint: None,
        };
        let done = apply(&r, token, &Action::Complete { response: None }, t(1), &p).unwrap();
        assert_eq!(
            apply(&done, token, &hb, t(2), &p),
            Err(ActionError::WrongState(State::Completed))
        );
    }
}
