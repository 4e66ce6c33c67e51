//! A batch's writes as the elements of the write statement's JSON array (`batch.rs`): one
//! object per row, its fields named as the statement's columns, bytes in `bytea`'s hex
//! text, times in RFC 3339 to the microsecond; an absent value is left out (the statement
//! reads a missing field as NULL), so the database parses only what a write sets.

use super::gap::ClockGap;
use crate::domain::Timestamp;
use crate::store::StoredBlobs;
use crate::store::settles::Mark;
use crate::store::write::{Expect, RowWrite, Stamp, Version};
use serde::{Serialize, Serializer};
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

/// Room left for the answer's way back: a write is not made this close to the caller's
/// deadline, so a write that just makes it is also answered in time.
const ANSWER_TRIP: Duration = Duration::from_millis(2);

/// A stamp as the pair (value, microseconds after the write's clock) the statement takes.
fn stamp(s: Stamp) -> (Option<Time>, Option<i64>) {
    match s {
        Stamp::At(t) => (t.map(Time), None),
        Stamp::After(us) => (None, Some(us)),
    }
}

/// Bytes as `bytea`'s text input reads them (`\x` and hex), written straight into the JSON.
#[derive(Clone, Copy)]
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\\x")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl Serialize for Hex<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A time as `timestamptz`'s text input reads it, to the microsecond.
#[derive(Clone, Copy)]
struct Time(Timestamp);

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
    }
}

/// One element of the write statement's array: its fields are the statement's columns
/// (`None` is left out: NULL), borrowed from the write and serialized without an
/// intermediate JSON tree.
#[derive(Serialize)]
pub(super) struct Element<'a> {
    idx: usize,
    i_tenant: &'a str,
    i_ns: &'a str,
    i_key: &'a str,
    ins: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    life: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_token: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_free: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_updated: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_lease: Option<Time>,
    v_sealed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_last_error: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_checkpoint: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_response: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    v_payload: Option<Hex<'a>>,
    n_state: &'static str,
    n_attempt: u32,
    n_free: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_token: Option<Uuid>,
    n_fingerprint: Hex<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    done_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    done_after: Option<i64>,
    mask: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_last_error: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_checkpoint: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_response: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_payload: Option<Hex<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    due_in: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    due_db: Option<Time>,
    /// The receipt's mark when the write takes it out of PROCESSING: the statement
    /// notifies it to every claimd's waiters (`settles`, docs/DESIGN.md §2.9).
    #[serde(skip_serializing_if = "Option::is_none")]
    n_wake: Option<String>,
    /// The write's id (`write_id`), by which a write whose answer was lost knows the row
    /// for its own.
    n_write: Uuid,
}

/// The element of the write statement's array for `w`, at position `idx` of the batch;
/// `gap` turns its deadline into one on the database's clock.
pub(super) fn element<'a>(idx: usize, w: &'a RowWrite, gap: &ClockGap) -> Element<'a> {
    let (lease_at, lease_after) = stamp(w.lease_expires_at);
    let (next_at, next_after) = stamp(w.next_attempt_at);
    let (done_at, done_after) = stamp(w.completed_at);
    let s = &w.sealed;
    let sets = [
        &s.last_error,
        &s.checkpoint,
        &s.response,
        &s.recovery_payload,
    ];
    let mask: i32 = (0..4)
        .filter(|&bit| sets[bit].is_some())
        .map(|bit| 1 << bit)
        .sum();
    fn set(v: &Option<Option<Vec<u8>>>) -> Option<Hex<'_>> {
        v.as_ref().and_then(|v| v.as_deref()).map(Hex)
    }
    let v = version(w);
    let was = v.and_then(|v| v.sealed.as_ref());
    let was_col =
        |f: fn(&StoredBlobs) -> &Option<Vec<u8>>| was.and_then(|s| f(s).as_deref()).map(Hex);
    let life = match &w.expect {
        Expect::Absent(life) => Some(&life[..]),
        Expect::Row(v) => v.life_id.as_deref(),
    };
    Element {
        idx,
        i_tenant: &w.tenant,
        i_ns: &w.next.id.namespace,
        i_key: &w.next.id.key,
        ins: w.inserts(),
        life: life.map(Hex),
        v_token: v.and_then(|v| v.claim_token),
        v_state: v.map(|v| v.state.as_str()),
        v_attempt: v.map(|v| v.attempt),
        v_free: v.map(|v| v.free_attempts),
        v_updated: v.map(|v| Time(v.updated_at)),
        v_lease: v.and_then(|v| v.lease_expires_at).map(Time),
        v_sealed: v.is_some_and(|v| v.sealed.is_some()),
        v_last_error: was_col(|s| &s.last_error),
        v_checkpoint: was_col(|s| &s.checkpoint),
        v_response: was_col(|s| &s.response),
        v_payload: was_col(|s| &s.recovery_payload),
        n_state: w.next.state.as_str(),
        n_attempt: w.next.attempt,
        n_free: w.next.free_attempts,
        n_token: w.next.claim_token,
        n_fingerprint: Hex(&w.next.fingerprint),
        lease_at,
        lease_after,
        next_at,
        next_after,
        done_at,
        done_after,
        mask,
        n_last_error: set(&s.last_error),
        n_checkpoint: set(&s.checkpoint),
        n_response: set(&s.response),
        n_payload: set(&s.recovery_payload),
        due_in: due_in(w.due),
        due_db: due_db(w.due, gap).map(Time),
        n_wake: w
            .settles()
            .then(|| Mark::of(&w.tenant, &w.next.id).to_hex()),
        n_write: w.id,
    }
}

/// The version an update expects; `None` for an insert.
fn version(w: &RowWrite) -> Option<&Version> {
    match &w.expect {
        Expect::Row(v) => Some(v),
        Expect::Absent(_) => None,
    }
}

/// What is left until `due`, less the answer's trip.
fn left(due: Instant) -> Duration {
    due.saturating_duration_since(Instant::now())
        .saturating_sub(ANSWER_TRIP)
}

/// Microseconds from now until `due` less the answer's trip, which the statement counts
/// from its own start: a bound that holds whatever claimd's wall clock says, but late by
/// the statement's trip to the database (longer on a loaded machine).
fn due_in(due: Option<Instant>) -> Option<i64> {
    let left = left(due?);
    Some(i64::try_from(left.as_micros()).unwrap_or(i64::MAX))
}

/// `due` less the answer's trip on the database's clock, through the measured `gap`
/// (never later than the caller's deadline); none until a statement has measured it. The
/// statement keeps the earlier of this and [`due_in`].
fn due_db(due: Option<Instant>, gap: &ClockGap) -> Option<Timestamp> {
    gap.db_clock_in(left(due?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ClaimInput, Policy, ReceiptKey, decide_claim};
    use crate::store::write::Sealed;
    use chrono::TimeDelta;
    use serde_json::Value;

    /// A new receipt's write and a write over it (a takeover), both decided at `now`.
    fn writes() -> [RowWrite; 2] {
        let now = chrono::Utc::now();
        let input = ClaimInput {
            id: ReceiptKey {
                namespace: "ns".into(),
                key: "k".into(),
            },
            fingerprint: vec![0, 0xab],
            lease_ttl: TimeDelta::seconds(30),
            recovery_payload: None,
            new_token: Uuid::new_v4(),
        };
        let new = decide_claim(None, &input, now, &Policy::default()).receipt;
        let stored = StoredBlobs {
            life_id: Some(vec![7; 16]),
            ..StoredBlobs::default()
        };
        let insert = RowWrite::new(
            "t",
            Expect::Absent([7; 16]),
            None,
            new.clone(),
            now,
            (Sealed::all(stored.clone()), stored.clone()),
            None,
        );
        let later = now + TimeDelta::seconds(60);
        // Another call (its own token) takes the ended lease over.
        let other = ClaimInput {
            new_token: Uuid::new_v4(),
            ..input.clone()
        };
        let taken = decide_claim(Some(&new), &other, later, &Policy::default()).receipt;
        let update = RowWrite::new(
            "t",
            Expect::Row(Version::of(&new, &stored)),
            Some(&new),
            taken,
            later,
            (Sealed::default(), stored),
            Some(Instant::now() + Duration::from_secs(5)),
        );
        [insert, update]
    }

    /// The element as the statement receives it.
    fn json(idx: usize, w: &RowWrite) -> Value {
        serde_json::to_value(element(idx, w, &ClockGap::new())).expect("an element serializes")
    }

    #[test]
    fn every_field_is_a_column_of_the_write_statement_and_bytes_are_hex() {
        let columns = super::super::writes::WRITE_MANY;
        for w in writes() {
            let Value::Object(fields) = json(3, &w) else {
                panic!("an element is an object");
            };
            for name in fields.keys() {
                assert!(
                    columns.contains(&format!(" {name} "))
                        || columns.contains(&format!("({name} ")),
                    "{name} is not a column of the statement's recordset"
                );
            }
            assert_eq!(fields["idx"], 3);
            assert_eq!(fields["n_fingerprint"], "\\x00ab");
            assert_eq!(fields["i_key"], "k");
        }
        let [insert, update] = writes();
        let insert = json(0, &insert);
        assert_eq!(insert["ins"], true);
        assert_eq!(insert["life"], format!("\\x{}", "07".repeat(16)));
        assert_eq!(insert["lease_after"], 30_000_000);
        assert_eq!(insert["v_state"], Value::Null);
        let update = json(1, &update);
        assert_eq!(update["ins"], false);
        assert_eq!(update["v_state"], "processing");
        assert_eq!(update["v_attempt"], 1);
        assert_eq!(update["n_attempt"], 2);
        assert!(update["due_in"].as_i64().is_some_and(|us| us > 0));
        let v_updated = update["v_updated"].as_str().expect("a time");
        assert!(
            v_updated.ends_with('Z') && v_updated.contains('.'),
            "{v_updated}"
        );
    }
}
