//! A write decided at one clock reading and made at another lands exactly as the domain
//! would have decided at the second: for every state a receipt can be in and every call
//! that changes it, `RowWrite::written(t1)` of the decision at `t0` equals the decision at
//! `t1`. This is what lets the write statements read the clock after their lock waits.

use super::*;
use crate::domain::{Action, ClaimInput, Policy, ReceiptKey, apply, decide_claim, redrive};
use chrono::DateTime;

fn t(secs: i64) -> Timestamp {
    // A fixed instant well inside chrono's range.
    DateTime::from_timestamp(1_800_000_000 + secs, 0).expect("a valid time")
}

fn input(token: Uuid, payload: Option<&[u8]>) -> ClaimInput {
    ClaimInput {
        id: ReceiptKey {
            namespace: "ns".into(),
            key: "k".into(),
        },
        fingerprint: b"fp".to_vec(),
        lease_ttl: TimeDelta::seconds(30),
        recovery_payload: payload.map(<[u8]>::to_vec),
        new_token: token,
    }
}

/// Receipts in every state, each with the token of its last holder.
fn receipts(policy: &Policy) -> Vec<(Receipt, Uuid)> {
    let token = Uuid::new_v4();
    let fresh = decide_claim(None, &input(token, Some(b"body")), t(0), policy).receipt;
    let mut all = vec![(fresh.clone(), token)];
    let complete = Action::Complete {
        response: Some(b"ok".to_vec()),
    };
    let retry = Action::Retry {
        error: "boom".into(),
        retry_after: None,
        count_attempt: true,
        jitter: 0.5,
    };
    let quarantine = Action::Quarantine {
        error: "bad".into(),
    };
    for action in [complete, retry, quarantine] {
        let next = apply(&fresh, token, &action, t(3), policy).expect("the holder acts");
        all.push((next, token));
    }
    all
}

/// Every call that may change `r`, decided at `now`.
fn decisions(r: &Receipt, token: Uuid, now: Timestamp, policy: &Policy) -> Vec<Receipt> {
    let actions = [
        Action::Complete {
            response: Some(b"done".to_vec()),
        },
        Action::Heartbeat {
            lease_ttl: TimeDelta::seconds(45),
            checkpoint: Some(b"cp".to_vec()),
        },
        Action::Retry {
            error: "again".into(),
            retry_after: None,
            count_attempt: true,
            jitter: 0.25,
        },
        Action::Retry {
            error: "later".into(),
            retry_after: Some(TimeDelta::seconds(7)),
            count_attempt: false,
            jitter: 0.0,
        },
        Action::Quarantine {
            error: "poison".into(),
        },
    ];
    let mut out: Vec<Receipt> = actions
        .iter()
        .filter_map(|a| apply(r, token, a, now, policy).ok())
        .collect();
    out.extend(redrive(r, now).ok());
    let taker = input(Uuid::from_u128(7), Some(b"other"));
    out.push(decide_claim(Some(r), &taker, now, policy).receipt);
    out
}

fn write(before: Option<&Receipt>, next: Receipt, decided_at: Timestamp) -> RowWrite {
    let expect = match before {
        None => Expect::Absent([1; LIFE_LEN]),
        Some(r) => Expect::Row(Version::of(r, &StoredBlobs::default())),
    };
    let sealed = (Sealed::default(), StoredBlobs::default());
    RowWrite::new("t", expect, before, next, decided_at, sealed, None)
}

#[test]
fn a_write_made_later_lands_as_the_decision_made_then() {
    let policy = Policy {
        max_attempts: 3,
        ..Policy::default()
    };
    let (t0, t1) = (t(40), t(100));
    let mut checked = 0;
    for (r, token) in receipts(&policy) {
        let early = decisions(&r, token, t0, &policy);
        let late = decisions(&r, token, t1, &policy);
        assert_eq!(early.len(), late.len());
        for (at_t0, at_t1) in early.into_iter().zip(late) {
            if at_t0 == r {
                continue; // nothing to write
            }
            assert_eq!(write(Some(&r), at_t0, t0).written(t1), at_t1, "from {r:?}");
            checked += 1;
        }
    }
    let token = Uuid::new_v4();
    let new = |now| decide_claim(None, &input(token, None), now, &policy).receipt;
    assert_eq!(write(None, new(t0), t0).written(t1), new(t1));
    // Processing: five holder calls and a takeover; retry-wait: a takeover; quarantined: Redrive.
    assert_eq!(checked, 8, "transitions checked");
}

#[test]
fn unchanged_times_are_written_as_they_were_and_changed_ones_relative_to_the_write() {
    let lease = Some(t(30));
    assert_eq!(Stamp::of(Some(lease), lease, t(5)), Stamp::At(lease));
    assert_eq!(Stamp::of(Some(lease), None, t(5)), Stamp::At(None));
    assert_eq!(
        Stamp::of(Some(lease), Some(t(50)), t(5)),
        Stamp::After(45_000_000)
    );
    assert_eq!(Stamp::of(None, Some(t(5)), t(5)), Stamp::After(0));
    assert_eq!(
        Stamp::After(1).resolve(t(0)),
        Some(t(0) + TimeDelta::microseconds(1))
    );
}

#[test]
fn sealed_over_keeps_what_it_does_not_set() {
    let stored = StoredBlobs {
        last_error: Some(b"e".to_vec()),
        checkpoint: Some(b"c".to_vec()),
        response: None,
        recovery_payload: Some(b"p".to_vec()),
        life_id: Some(vec![3; LIFE_LEN]),
        write_id: Some(Uuid::from_u128(9)),
    };
    let set = Sealed {
        checkpoint: Some(None),
        response: Some(Some(b"r".to_vec())),
        ..Sealed::default()
    };
    let after = set.over(&stored);
    assert_eq!(after.last_error, stored.last_error);
    assert_eq!(after.checkpoint, None);
    assert_eq!(after.response.as_deref(), Some(&b"r"[..]));
    assert_eq!(after.recovery_payload, stored.recovery_payload);
    assert_eq!(after.life_id, stored.life_id);
    assert_eq!(after.write_id, stored.write_id);
}
