//! Redrive: an operator gives a dead letter (a QUARANTINED receipt) another full attempt
//! budget, as one pure function from the current receipt to the next.

use super::{ActionError, Receipt, State, Timestamp};

/// Redrives the dead letter `r` at `now`: it becomes RETRY_WAIT, due at once, with a fresh
/// attempt budget. The attempt number is the fencing number, so it is not reset (it rises
/// again at the next claim); the fresh budget is `free_attempts = attempt`, which makes the
/// spent attempts zero. The token is cleared, so the last holder gets `LeaseLost`; the
/// recovery payload, checkpoint and last error are kept. Anything but QUARANTINED is
/// refused with [`ActionError::WrongState`].
pub fn redrive(r: &Receipt, now: Timestamp) -> Result<Receipt, ActionError> {
    if r.state != State::Quarantined {
        return Err(ActionError::WrongState(r.state));
    }
    let mut next = r.clone();
    next.state = State::RetryWait;
    next.next_attempt_at = Some(now);
    next.lease_expires_at = None;
    next.claim_token = None;
    next.free_attempts = r.attempt;
    next.updated_at = now;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Action, ClaimInput, Decision, EXCEEDED_MAX_ATTEMPTS, Policy, ReceiptKey, apply,
        decide_claim,
    };
    use chrono::{DateTime, TimeDelta, Utc};
    use uuid::Uuid;

    fn t(secs: i64) -> Timestamp {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn policy() -> Policy {
        Policy {
            max_attempts: 2,
            ..Policy::default()
        }
    }

    fn claim(current: Option<&Receipt>, now: Timestamp) -> (Decision, Receipt, Uuid) {
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            fingerprint: b"fp".to_vec(),
            lease_ttl: TimeDelta::seconds(30),
            recovery_payload: Some(b"body".to_vec()),
            new_token: Uuid::new_v4(),
        };
        let out = decide_claim(current, &input, now, &policy());
        (out.decision, out.receipt, input.new_token)
    }

    fn retry(r: &Receipt, token: Uuid, now: Timestamp) -> Receipt {
        let action = Action::Retry {
            error: "boom".into(),
            retry_after: Some(TimeDelta::seconds(5)),
            count_attempt: true,
            jitter: 0.0,
        };
        apply(r, token, &action, now, &policy()).unwrap()
    }

    /// Two counted attempts with `max_attempts = 2`: the second Retry quarantines.
    fn dead_letter() -> (Receipt, Uuid) {
        let (_, r, token) = claim(None, t(0));
        let mut r = retry(&r, token, t(1));
        r.checkpoint = Some(b"cp".to_vec());
        let (_, r, token) = claim(Some(&r), t(10));
        let r = retry(&r, token, t(11));
        assert_eq!((r.state, r.attempt), (State::Quarantined, 2));
        (r, token)
    }

    #[test]
    fn a_dead_letter_becomes_due_now_with_a_fresh_budget_and_keeps_its_data() {
        let (q, _) = dead_letter();
        let next = redrive(&q, t(100)).unwrap();
        assert_eq!(next.state, State::RetryWait);
        assert_eq!(next.next_attempt_at, Some(t(100)));
        assert_eq!(next.updated_at, t(100));
        assert_eq!((next.attempt, next.free_attempts), (2, 2));
        assert_eq!(next.spent_attempts(), 0);
        assert_eq!(next.claim_token, None);
        assert_eq!(next.lease_expires_at, None);
        assert_eq!(next.last_error, q.last_error);
        assert!(next.last_error.unwrap().starts_with(EXCEEDED_MAX_ATTEMPTS));
        assert_eq!(next.checkpoint.as_deref(), Some(&b"cp"[..]));
        assert_eq!(next.recovery_payload.as_deref(), Some(&b"body"[..]));
        assert_eq!(next.created_at, q.created_at);
    }

    #[test]
    fn a_redriven_receipt_runs_a_full_budget_again_with_a_rising_attempt() {
        let (q, old_token) = dead_letter();
        let r = redrive(&q, t(100)).unwrap();
        let (decision, r, token) = claim(Some(&r), t(100));
        assert_eq!((decision, r.attempt), (Decision::Claimed, 3));
        let r = retry(&r, token, t(101));
        assert_eq!(
            r.state,
            State::RetryWait,
            "the first attempt after a redrive"
        );
        let (decision, r, token) = claim(Some(&r), t(110));
        assert_eq!((decision, r.attempt), (Decision::Claimed, 4));
        let r = retry(&r, token, t(111));
        assert_eq!(r.state, State::Quarantined, "the budget is spent again");
        let err = apply(
            &r,
            old_token,
            &Action::Complete { response: None },
            t(112),
            &policy(),
        );
        assert_eq!(err, Err(ActionError::LeaseLost), "the old holder stays out");
    }

    #[test]
    fn the_old_holder_loses_its_lease() {
        let (q, token) = dead_letter();
        let r = redrive(&q, t(100)).unwrap();
        let err = apply(
            &r,
            token,
            &Action::Complete { response: None },
            t(101),
            &policy(),
        );
        assert_eq!(err, Err(ActionError::LeaseLost));
    }

    #[test]
    fn only_a_quarantined_receipt_can_be_redriven() {
        let (q, _) = dead_letter();
        for state in [State::Processing, State::RetryWait, State::Completed] {
            let r = Receipt { state, ..q.clone() };
            assert_eq!(redrive(&r, t(100)), Err(ActionError::WrongState(state)));
        }
    }
}
