//! A row write as the store's common code plans it and a driver runs it: compare and set.
//! The decision is made in Rust by the domain's rules on the row as read (or as this
//! process last wrote it); the write states what the row must still be ([`Expect`]) and
//! what it becomes, and applies only if the row is still so. A write that finds the row
//! changed reports it as it is now ([`WriteOutcome::Stale`]) and the caller decides again.
//!
//! Times are written relative to the write's own clock reading, taken after the row is
//! had ([`Stamp::After`]): a lease granted after a lock wait runs from when the row was
//! had, and a decision made on one reading of the clock lands on another unchanged
//! otherwise. Only the sealed columns whose plaintext changed are written ([`Sealed`]).

use super::StoredBlobs;
use super::usage::Growth;
use crate::domain::{Receipt, State, Storage, StorageRefusal, Timestamp};
use crate::seal::LIFE_LEN;
use chrono::TimeDelta;
use tokio::time::Instant;
use uuid::Uuid;

/// A time column of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// Exactly this value: unchanged from the row as read, or empty.
    At(Option<Timestamp>),
    /// This many microseconds after the write's clock reading.
    After(i64),
}

impl Stamp {
    /// `next` as a stamp: unchanged from `before` (or absent) as is, otherwise relative to
    /// `decided_at`, the clock reading the decision used.
    fn of(
        before: Option<Option<Timestamp>>,
        next: Option<Timestamp>,
        decided_at: Timestamp,
    ) -> Stamp {
        match next {
            Some(t) if before != Some(Some(t)) => {
                Stamp::After((t - decided_at).num_microseconds().unwrap_or(i64::MAX))
            }
            _ => Stamp::At(next),
        }
    }

    /// The time this stamp stands for when the write's clock read `now`.
    pub fn resolve(self, now: Timestamp) -> Option<Timestamp> {
        match self {
            Stamp::At(t) => t,
            Stamp::After(us) => Some(now + TimeDelta::microseconds(us)),
        }
    }
}

/// What a row must still be for the write to apply: the columns every write changes, so a
/// row another write touched since it was read does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The row's life (never changes while the row exists).
    pub life_id: Option<Vec<u8>>,
    /// The holder's token.
    pub claim_token: Option<Uuid>,
    /// The state.
    pub state: State,
    /// The fencing number.
    pub attempt: u32,
    /// Attempts that did not spend the budget.
    pub free_attempts: u32,
    /// The last change.
    pub updated_at: Timestamp,
    /// The lease end.
    pub lease_expires_at: Option<Timestamp>,
    /// The sealed columns as stored, when the write was decided without reading them (from
    /// what this process last wrote): then they must be unchanged too, so a value altered
    /// behind claimd's back is read, and fails to open, before anything is written.
    pub sealed: Option<StoredBlobs>,
}

impl Version {
    /// The version of the row `(receipt, blobs)`.
    pub fn of(receipt: &Receipt, blobs: &StoredBlobs) -> Version {
        Version {
            life_id: blobs.life_id.clone(),
            claim_token: receipt.claim_token,
            state: receipt.state,
            attempt: receipt.attempt,
            free_attempts: receipt.free_attempts,
            updated_at: receipt.updated_at,
            lease_expires_at: receipt.lease_expires_at,
            sealed: None,
        }
    }
}

/// The row a write expects.
// One per write, moved rarely: boxing the version would only add an allocation per write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No row: insert one, with this new life.
    Absent([u8; LIFE_LEN]),
    /// The row at this version: update it.
    Row(Version),
}

/// Each sealed column a write sets (`Some`, to a value or NULL); `None` keeps it as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sealed {
    /// `last_error`.
    pub last_error: Option<Option<Vec<u8>>>,
    /// `checkpoint`.
    pub checkpoint: Option<Option<Vec<u8>>>,
    /// `response`.
    pub response: Option<Option<Vec<u8>>>,
    /// `recovery_payload`.
    pub recovery_payload: Option<Option<Vec<u8>>>,
}

impl Sealed {
    /// The four columns in the bit order of [`Sealed::mask`]: last error, checkpoint,
    /// response, recovery payload.
    pub fn columns(&self) -> [&Option<Option<Vec<u8>>>; 4] {
        [
            &self.last_error,
            &self.checkpoint,
            &self.response,
            &self.recovery_payload,
        ]
    }

    /// Which columns this sets, one bit each in [`Sealed::columns`]' order.
    pub fn mask(&self) -> i32 {
        (self.columns().iter().enumerate()).fold(
            0,
            |m, (bit, set)| if set.is_some() { m | 1 << bit } else { m },
        )
    }

    /// `stored` with the columns this sets replaced.
    pub fn over(&self, stored: &StoredBlobs) -> StoredBlobs {
        let pick = |set: &Option<Option<Vec<u8>>>, was: &Option<Vec<u8>>| match set {
            Some(value) => value.clone(),
            None => was.clone(),
        };
        StoredBlobs {
            last_error: pick(&self.last_error, &stored.last_error),
            checkpoint: pick(&self.checkpoint, &stored.checkpoint),
            response: pick(&self.response, &stored.response),
            recovery_payload: pick(&self.recovery_payload, &stored.recovery_payload),
            life_id: stored.life_id.clone(),
            write_id: stored.write_id,
        }
    }

    /// Every column set, to what `blobs` holds (an insert).
    pub fn all(blobs: StoredBlobs) -> Sealed {
        Sealed {
            last_error: Some(blobs.last_error),
            checkpoint: Some(blobs.checkpoint),
            response: Some(blobs.response),
            recovery_payload: Some(blobs.recovery_payload),
        }
    }
}

/// One compare-and-set write of a `receipts` row.
#[derive(Debug, Clone)]
pub struct RowWrite {
    /// The tenant of the row (`next` names its namespace and key).
    pub tenant: String,
    /// What the row must be.
    pub expect: Expect,
    /// The receipt after the write: its state, counts, token and fingerprint are written as
    /// they are; its times are the stamps below, and `updated_at` (and an insert's
    /// `created_at`) the write's clock reading.
    pub next: Receipt,
    /// `lease_expires_at`.
    pub lease_expires_at: Stamp,
    /// `next_attempt_at`.
    pub next_attempt_at: Stamp,
    /// `completed_at`.
    pub completed_at: Stamp,
    /// The sealed columns it sets.
    pub sealed: Sealed,
    /// The row's sealed columns (and life) as they are once it is written.
    pub stored: StoredBlobs,
    /// When the caller's answer is due: a write that would land after it is not made.
    pub due: Option<Instant>,
    /// This write's id, minted for it and written in the row's `write_id` (also in
    /// `stored`): the row holds it exactly while this write is the last one made.
    pub id: Uuid,
    /// What it adds to its tenant's receipts and stored bytes, as decided
    /// ([`RowWrite::new`] knows an insert's; the caller sets an update's).
    pub growth: Growth,
    /// The tenant's storage limits it is checked against (none by default).
    pub storage: Storage,
}

impl RowWrite {
    /// Whether the write takes its receipt out of PROCESSING (waiting calls are woken once
    /// it has committed: docs/DESIGN.md §2.9).
    pub fn settles(&self) -> bool {
        self.next.state != State::Processing
    }

    /// A write that turns `before` (`None`: no row) into `next`, decided at `decided_at`.
    pub fn new(
        tenant: &str,
        expect: Expect,
        before: Option<&Receipt>,
        next: Receipt,
        decided_at: Timestamp,
        (sealed, mut stored): (Sealed, StoredBlobs),
        due: Option<Instant>,
    ) -> RowWrite {
        let id = Uuid::new_v4();
        stored.write_id = Some(id);
        let stamp = |field: fn(&Receipt) -> Option<Timestamp>| {
            Stamp::of(before.map(field), field(&next), decided_at)
        };
        let growth = match expect {
            Expect::Absent(_) => Growth {
                receipts: 1,
                bytes: super::usage::size(&stored),
            },
            Expect::Row(_) => Growth::default(),
        };
        RowWrite {
            tenant: tenant.to_owned(),
            expect,
            lease_expires_at: stamp(|r| r.lease_expires_at),
            next_attempt_at: stamp(|r| r.next_attempt_at),
            completed_at: stamp(|r| r.completed_at),
            next,
            sealed,
            stored,
            due,
            id,
            growth,
            storage: Storage::default(),
        }
    }

    /// Whether the write inserts a row.
    pub fn inserts(&self) -> bool {
        matches!(self.expect, Expect::Absent(_))
    }

    /// Whether `found`, the row a write that was not made reports, is still the row it
    /// expected (absent for an insert; at the version for an update): then what stopped it
    /// committed after the statement's snapshot, and the row must be read again to be
    /// known (docs/DESIGN.md §4.2).
    pub fn found_as_expected(&self, found: Option<&super::driver::Row>) -> bool {
        match (&self.expect, found) {
            (Expect::Absent(_), None) => true,
            (Expect::Row(v), Some((r, b))) => {
                Version::of(r, b)
                    == Version {
                        sealed: None,
                        ..v.clone()
                    }
            }
            _ => false,
        }
    }

    /// The receipt as written, when the write's clock read `now`.
    pub fn written(&self, now: Timestamp) -> Receipt {
        let mut r = self.next.clone();
        r.updated_at = now;
        if self.inserts() {
            r.created_at = now;
        }
        r.lease_expires_at = self.lease_expires_at.resolve(now);
        r.next_attempt_at = self.next_attempt_at.resolve(now);
        r.completed_at = self.completed_at.resolve(now);
        r
    }
}

/// What became of one write.
#[derive(Debug)]
pub enum WriteOutcome {
    /// Written, with the write's clock reading; committed before this is returned.
    Written(Timestamp),
    /// Not written: the row is not as expected. It is this now (`None`: there is none),
    /// read at this clock reading.
    Stale(Timestamp, Option<Box<super::driver::Row>>),
    /// Not written: the caller's answer was due before the row could be had.
    Late,
    /// Not written: it would have taken its tenant over a storage limit.
    OverQuota(StorageRefusal),
}

#[cfg(test)]
mod tests;
