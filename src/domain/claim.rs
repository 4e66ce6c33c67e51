//! The Claim decision table of docs/DESIGN.md §2, as one pure function.

use super::{Decision, EXCEEDED_MAX_ATTEMPTS, Policy, Receipt, ReceiptKey, State, Timestamp};
use chrono::TimeDelta;
use uuid::Uuid;

/// What a Claim asks for, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInput {
    /// Namespace and key.
    pub id: ReceiptKey,
    /// The caller's payload digest.
    pub fingerprint: Vec<u8>,
    /// Lease length if claimed.
    pub lease_ttl: TimeDelta,
    /// Kept for whoever takes the work over.
    pub recovery_payload: Option<Vec<u8>>,
    /// The token minted for this call; used only if the decision is CLAIMED.
    pub new_token: Uuid,
}

/// Which write, if any, a decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// A read: nothing changes.
    None,
    /// A new receipt.
    Insert,
    /// The existing receipt changes (takeover or budget quarantine).
    Update,
}

/// The decision and the receipt after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimOutcome {
    /// The answer.
    pub decision: Decision,
    /// The receipt as it is after the decision.
    pub receipt: Receipt,
    /// The write the decision needs.
    pub write: Write,
}

impl ClaimOutcome {
    /// The token the caller receives: only a CLAIMED decision carries one.
    pub fn token(&self) -> Option<Uuid> {
        match self.decision {
            Decision::Claimed => self.receipt.claim_token,
            _ => None,
        }
    }
}

/// Decides a Claim against the current receipt at `now` (docs/DESIGN.md §2, checked in order).
pub fn decide_claim(
    current: Option<&Receipt>,
    input: &ClaimInput,
    now: Timestamp,
    policy: &Policy,
) -> ClaimOutcome {
    let Some(r) = current else {
        return ClaimOutcome {
            decision: Decision::Claimed,
            write: Write::Insert,
            receipt: Receipt {
                id: input.id.clone(),
                state: State::Processing,
                attempt: 1,
                free_attempts: 0,
                fingerprint: input.fingerprint.clone(),
                claim_token: Some(input.new_token),
                lease_expires_at: Some(now + input.lease_ttl),
                next_attempt_at: None,
                created_at: now,
                updated_at: now,
                completed_at: None,
                last_error: None,
                checkpoint: None,
                response: None,
                recovery_payload: input.recovery_payload.clone(),
                response_pruned_at: None,
            },
        };
    };
    let read = |decision| ClaimOutcome {
        decision,
        receipt: r.clone(),
        write: Write::None,
    };
    if r.fingerprint != input.fingerprint {
        return read(Decision::Conflict);
    }
    match r.state {
        State::Completed => return read(Decision::Completed),
        State::Quarantined => return read(Decision::Quarantined),
        // Held on this call's own token: an earlier write of this same call landed though
        // its answer was lost (a waiting Claim that claims again, a batch re-run). The
        // token was minted for this call alone, so the lease is the caller's.
        State::Processing if r.claim_token == Some(input.new_token) => {
            if r.lease_expires_at.is_some_and(|t| t > now) {
                return read(Decision::Claimed);
            }
            // Its lease ran out before the caller heard of it: nobody else was told
            // CLAIMED for this attempt, so the same attempt gets a fresh lease (no attempt
            // spent on an answer that was lost).
            let mut next = r.clone();
            next.updated_at = now;
            next.lease_expires_at = Some(now + input.lease_ttl);
            return ClaimOutcome {
                decision: Decision::Claimed,
                receipt: next,
                write: Write::Update,
            };
        }
        State::Processing if r.lease_expires_at.is_some_and(|t| t > now) => {
            return read(Decision::InFlight);
        }
        State::RetryWait if r.next_attempt_at.is_some_and(|t| t > now) => {
            return read(Decision::RetryScheduled);
        }
        State::Processing | State::RetryWait => {}
    }
    let mut next = r.clone();
    next.updated_at = now;
    next.next_attempt_at = None;
    if r.spent_attempts() >= policy.max_attempts {
        next.state = State::Quarantined;
        next.claim_token = None;
        next.lease_expires_at = None;
        next.last_error = Some(EXCEEDED_MAX_ATTEMPTS.to_owned());
        return ClaimOutcome {
            decision: Decision::Quarantined,
            receipt: next,
            write: Write::Update,
        };
    }
    next.state = State::Processing;
    next.attempt = r.attempt + 1;
    next.claim_token = Some(input.new_token);
    next.lease_expires_at = Some(now + input.lease_ttl);
    if next.recovery_payload.is_none() {
        next.recovery_payload = input.recovery_payload.clone();
    }
    ClaimOutcome {
        decision: Decision::Claimed,
        receipt: next,
        write: Write::Update,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn t(secs: i64) -> Timestamp {
        DateTime::<Utc>::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn input(fp: &[u8]) -> ClaimInput {
        ClaimInput {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            fingerprint: fp.to_vec(),
            lease_ttl: TimeDelta::seconds(30),
            recovery_payload: Some(b"body".to_vec()),
            new_token: Uuid::new_v4(),
        }
    }

    fn claimed_at(now: Timestamp) -> Receipt {
        decide_claim(None, &input(b"fp"), now, &Policy::default()).receipt
    }

    #[test]
    fn a_claim_that_finds_its_own_token_on_a_live_lease_is_claimed_without_a_write() {
        let i = input(b"fp");
        let mine = decide_claim(None, &i, t(0), &Policy::default()).receipt;
        let again = decide_claim(Some(&mine), &i, t(10), &Policy::default());
        assert_eq!(again.decision, Decision::Claimed);
        assert_eq!(again.write, Write::None);
        assert_eq!(again.receipt, mine, "the lease as the landed write made it");
        let other = decide_claim(Some(&mine), &input(b"fp"), t(10), &Policy::default());
        assert_eq!(other.decision, Decision::InFlight, "another call's token");
        let expired = decide_claim(Some(&mine), &i, t(31), &Policy::default());
        assert_eq!(expired.decision, Decision::Claimed);
        assert_eq!(expired.write, Write::Update);
        assert_eq!(
            expired.receipt.attempt, 1,
            "no attempt spent on a lost answer"
        );
        assert_eq!(
            expired.receipt.lease_expires_at,
            Some(t(61)),
            "a fresh lease"
        );
    }

    #[test]
    fn no_receipt_is_claimed_with_attempt_one() {
        let i = input(b"fp");
        let out = decide_claim(None, &i, t(0), &Policy::default());
        assert_eq!(out.decision, Decision::Claimed);
        assert_eq!(out.write, Write::Insert);
        assert_eq!(out.receipt.attempt, 1);
        assert_eq!(out.receipt.lease_expires_at, Some(t(30)));
        assert_eq!(out.token(), Some(i.new_token));
    }

    #[test]
    fn another_fingerprint_is_a_conflict_in_any_state() {
        let mut r = claimed_at(t(0));
        for state in [
            State::Processing,
            State::RetryWait,
            State::Completed,
            State::Quarantined,
        ] {
            r.state = state;
            let out = decide_claim(Some(&r), &input(b"other"), t(100), &Policy::default());
            assert_eq!(out.decision, Decision::Conflict);
            assert_eq!(out.write, Write::None);
            assert_eq!(out.token(), None);
        }
    }

    #[test]
    fn completed_and_quarantined_are_replayed() {
        let mut r = claimed_at(t(0));
        r.state = State::Completed;
        r.response = Some(b"ok".to_vec());
        let out = decide_claim(Some(&r), &input(b"fp"), t(1), &Policy::default());
        assert_eq!(
            (out.decision, out.write),
            (Decision::Completed, Write::None)
        );
        assert_eq!(out.receipt.response.as_deref(), Some(&b"ok"[..]));
        r.state = State::Quarantined;
        let out = decide_claim(Some(&r), &input(b"fp"), t(1), &Policy::default());
        assert_eq!(
            (out.decision, out.write),
            (Decision::Quarantined, Write::None)
        );
    }

    #[test]
    fn a_live_lease_is_in_flight_and_an_expired_one_is_taken_over() {
        let mut r = claimed_at(t(0));
        r.checkpoint = Some(b"step 2".to_vec());
        let out = decide_claim(Some(&r), &input(b"fp"), t(29), &Policy::default());
        assert_eq!((out.decision, out.write), (Decision::InFlight, Write::None));
        let i = input(b"fp");
        let out = decide_claim(Some(&r), &i, t(30), &Policy::default());
        assert_eq!(
            (out.decision, out.write),
            (Decision::Claimed, Write::Update)
        );
        assert_eq!(out.receipt.attempt, 2);
        assert_eq!(out.receipt.claim_token, Some(i.new_token));
        assert_eq!(out.receipt.lease_expires_at, Some(t(60)));
        assert_eq!(out.receipt.checkpoint.as_deref(), Some(&b"step 2"[..]));
        assert_eq!(out.receipt.recovery_payload.as_deref(), Some(&b"body"[..]));
    }

    #[test]
    fn retry_wait_is_scheduled_until_due_then_claimed() {
        let mut r = claimed_at(t(0));
        r.state = State::RetryWait;
        r.lease_expires_at = None;
        r.next_attempt_at = Some(t(10));
        let out = decide_claim(Some(&r), &input(b"fp"), t(9), &Policy::default());
        assert_eq!(out.decision, Decision::RetryScheduled);
        let out = decide_claim(Some(&r), &input(b"fp"), t(10), &Policy::default());
        assert_eq!(out.decision, Decision::Claimed);
        assert_eq!(out.receipt.state, State::Processing);
        assert_eq!(out.receipt.next_attempt_at, None);
    }

    #[test]
    fn a_spent_budget_quarantines_instead_of_claiming() {
        let policy = Policy {
            max_attempts: 2,
            ..Policy::default()
        };
        let mut r = claimed_at(t(0));
        r.attempt = 2;
        let out = decide_claim(Some(&r), &input(b"fp"), t(31), &policy);
        assert_eq!(
            (out.decision, out.write),
            (Decision::Quarantined, Write::Update)
        );
        assert_eq!(out.receipt.state, State::Quarantined);
        assert_eq!(out.receipt.attempt, 2);
        assert_eq!(out.receipt.claim_token, None);
        assert_eq!(
            out.receipt.last_error.as_deref(),
            Some(EXCEEDED_MAX_ATTEMPTS)
        );
        // Attempts that did not count leave room in the budget.
        r.free_attempts = 1;
        let out = decide_claim(Some(&r), &input(b"fp"), t(31), &policy);
        assert_eq!(out.decision, Decision::Claimed);
        assert_eq!(out.receipt.attempt, 3);
    }
}
