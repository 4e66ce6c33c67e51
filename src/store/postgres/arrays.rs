//! A batch's writes as the write statement's parameters (`writes.rs`): one array per
//! column ([`Col`]), bound in PostgreSQL's binary format — bytes as `bytea`, times as
//! microseconds, ids as 16 bytes — so the database parses no text and no JSON; the
//! statement turns them back into rows with one `unnest`. A statement binds only the
//! columns its kind of write uses (an insert carries no expected version, an update no
//! fingerprint), each array holding one element per write, NULL where the write has no
//! value.

use super::gap::ClockGap;
use crate::domain::Timestamp;
use crate::store::StoredBlobs;
use crate::store::settles::Mark;
use crate::store::write::{Expect, RowWrite, Stamp, Version};
use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

/// Room left for the answer's way back: a write is not made this close to the caller's
/// deadline, so a write that just makes it is also answered in time.
const ANSWER_TRIP: Duration = Duration::from_millis(2);

/// A column of the writes' recordset: the statement's name for it and its array type.
/// Its meaning is in `writes.rs`'s module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Col {
    Idx,
    Tenant,
    Ns,
    Key,
    Ins,
    Life,
    VToken,
    VState,
    VAttempt,
    VFree,
    VUpdated,
    VLease,
    VSealed,
    VLastError,
    VCheckpoint,
    VResponse,
    VPayload,
    NState,
    NAttempt,
    NFree,
    NToken,
    NFingerprint,
    LeaseAt,
    LeaseAfter,
    NextAt,
    NextAfter,
    DoneAt,
    DoneAfter,
    Mask,
    NLastError,
    NCheckpoint,
    NResponse,
    NPayload,
    DueIn,
    DueDb,
    NWake,
    NWrite,
}

impl Col {
    /// The column's name in the statement, and its SQL array type.
    pub(super) fn sql(self) -> (&'static str, &'static str) {
        use Col::*;
        match self {
            Idx => ("idx", "int4[]"),
            Tenant => ("i_tenant", "text[]"),
            Ns => ("i_ns", "text[]"),
            Key => ("i_key", "text[]"),
            Ins => ("ins", "bool[]"),
            Life => ("life", "bytea[]"),
            VToken => ("v_token", "uuid[]"),
            VState => ("v_state", "text[]"),
            VAttempt => ("v_attempt", "int4[]"),
            VFree => ("v_free", "int4[]"),
            VUpdated => ("v_updated", "timestamptz[]"),
            VLease => ("v_lease", "timestamptz[]"),
            VSealed => ("v_sealed", "bool[]"),
            VLastError => ("v_last_error", "bytea[]"),
            VCheckpoint => ("v_checkpoint", "bytea[]"),
            VResponse => ("v_response", "bytea[]"),
            VPayload => ("v_payload", "bytea[]"),
            NState => ("n_state", "text[]"),
            NAttempt => ("n_attempt", "int4[]"),
            NFree => ("n_free", "int4[]"),
            NToken => ("n_token", "uuid[]"),
            NFingerprint => ("n_fingerprint", "bytea[]"),
            LeaseAt => ("lease_at", "timestamptz[]"),
            LeaseAfter => ("lease_after", "int8[]"),
            NextAt => ("next_at", "timestamptz[]"),
            NextAfter => ("next_after", "int8[]"),
            DoneAt => ("done_at", "timestamptz[]"),
            DoneAfter => ("done_after", "int8[]"),
            Mask => ("mask", "int4[]"),
            NLastError => ("n_last_error", "bytea[]"),
            NCheckpoint => ("n_checkpoint", "bytea[]"),
            NResponse => ("n_response", "bytea[]"),
            NPayload => ("n_payload", "bytea[]"),
            DueIn => ("due_in", "int8[]"),
            DueDb => ("due_db", "timestamptz[]"),
            NWake => ("n_wake", "text[]"),
            NWrite => ("n_write", "uuid[]"),
        }
    }
}

type Bytes<'a> = Vec<Option<&'a [u8]>>;

/// The writes of a batch, column by column, in the order they are pushed.
#[derive(Debug, Default)]
pub(super) struct Arrays<'a> {
    idx: Vec<i32>,
    tenant: Vec<&'a str>,
    ns: Vec<&'a str>,
    key: Vec<&'a str>,
    ins: Vec<bool>,
    life: Bytes<'a>,
    v_token: Vec<Option<Uuid>>,
    v_state: Vec<Option<&'static str>>,
    v_attempt: Vec<Option<i32>>,
    v_free: Vec<Option<i32>>,
    v_updated: Vec<Option<Timestamp>>,
    v_lease: Vec<Option<Timestamp>>,
    v_sealed: Vec<bool>,
    /// The expected sealed columns: last error, checkpoint, response, recovery payload.
    v_blobs: [Bytes<'a>; 4],
    n_state: Vec<&'static str>,
    n_attempt: Vec<i32>,
    n_free: Vec<i32>,
    n_token: Vec<Option<Uuid>>,
    n_fingerprint: Vec<&'a [u8]>,
    /// Lease end, next attempt, completion: a time, or microseconds after the write's clock.
    at: [Vec<Option<Timestamp>>; 3],
    after: [Vec<Option<i64>>; 3],
    mask: Vec<i32>,
    /// The sealed columns the write sets, in `mask`'s bit order.
    n_blobs: [Bytes<'a>; 4],
    due_in: Vec<Option<i64>>,
    due_db: Vec<Option<Timestamp>>,
    n_wake: Vec<Option<String>>,
    n_write: Vec<Uuid>,
}

/// A count as `int4`; the counts a receipt keeps are far below its range.
fn int4(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl<'a> Arrays<'a> {
    /// Appends `w`, at position `idx` of the batch; `gap` turns its deadline into one on
    /// the database's clock.
    pub(super) fn push(&mut self, idx: usize, w: &'a RowWrite, gap: &ClockGap) {
        self.idx.push(i32::try_from(idx).unwrap_or(i32::MAX));
        self.tenant.push(&w.tenant);
        self.ns.push(&w.next.id.namespace);
        self.key.push(&w.next.id.key);
        self.ins.push(w.inserts());
        let life = match &w.expect {
            Expect::Absent(life) => Some(&life[..]),
            Expect::Row(v) => v.life_id.as_deref(),
        };
        self.life.push(life);
        let v = version(w);
        self.v_token.push(v.and_then(|v| v.claim_token));
        self.v_state.push(v.map(|v| v.state.as_str()));
        self.v_attempt.push(v.map(|v| int4(v.attempt)));
        self.v_free.push(v.map(|v| int4(v.free_attempts)));
        self.v_updated.push(v.map(|v| v.updated_at));
        self.v_lease.push(v.and_then(|v| v.lease_expires_at));
        let was = v.and_then(|v| v.sealed.as_ref());
        self.v_sealed.push(was.is_some());
        for (col, value) in self.v_blobs.iter_mut().zip(blobs(was)) {
            col.push(value);
        }
        self.n_state.push(w.next.state.as_str());
        self.n_attempt.push(int4(w.next.attempt));
        self.n_free.push(int4(w.next.free_attempts));
        self.n_token.push(w.next.claim_token);
        self.n_fingerprint.push(&w.next.fingerprint);
        let stamps = [w.lease_expires_at, w.next_attempt_at, w.completed_at];
        for (i, s) in stamps.into_iter().enumerate() {
            let (at, after) = match s {
                Stamp::At(t) => (t, None),
                Stamp::After(us) => (None, Some(us)),
            };
            self.at[i].push(at);
            self.after[i].push(after);
        }
        for (set, col) in w.sealed.columns().into_iter().zip(&mut self.n_blobs) {
            col.push(set.as_ref().and_then(|v| v.as_deref()));
        }
        self.mask.push(w.sealed.mask());
        self.due_in.push(due_in(w.due));
        self.due_db.push(due_db(w.due, gap));
        self.n_wake.push(
            w.settles()
                .then(|| Mark::of(&w.tenant, &w.next.id).to_hex()),
        );
        self.n_write.push(w.id);
    }

    /// `q` with the array of `col` bound as its next parameter.
    pub(super) fn bind<'q>(
        &self,
        q: Query<'q, Postgres, PgArguments>,
        col: Col,
    ) -> Query<'q, Postgres, PgArguments> {
        use Col::*;
        match col {
            Idx => q.bind(&self.idx[..]),
            Tenant => q.bind(&self.tenant[..]),
            Ns => q.bind(&self.ns[..]),
            Key => q.bind(&self.key[..]),
            Ins => q.bind(&self.ins[..]),
            Life => q.bind(&self.life[..]),
            VToken => q.bind(&self.v_token[..]),
            VState => q.bind(&self.v_state[..]),
            VAttempt => q.bind(&self.v_attempt[..]),
            VFree => q.bind(&self.v_free[..]),
            VUpdated => q.bind(&self.v_updated[..]),
            VLease => q.bind(&self.v_lease[..]),
            VSealed => q.bind(&self.v_sealed[..]),
            VLastError => q.bind(&self.v_blobs[0][..]),
            VCheckpoint => q.bind(&self.v_blobs[1][..]),
            VResponse => q.bind(&self.v_blobs[2][..]),
            VPayload => q.bind(&self.v_blobs[3][..]),
            NState => q.bind(&self.n_state[..]),
            NAttempt => q.bind(&self.n_attempt[..]),
            NFree => q.bind(&self.n_free[..]),
            NToken => q.bind(&self.n_token[..]),
            NFingerprint => q.bind(&self.n_fingerprint[..]),
            LeaseAt => q.bind(&self.at[0][..]),
            LeaseAfter => q.bind(&self.after[0][..]),
            NextAt => q.bind(&self.at[1][..]),
            NextAfter => q.bind(&self.after[1][..]),
            DoneAt => q.bind(&self.at[2][..]),
            DoneAfter => q.bind(&self.after[2][..]),
            Mask => q.bind(&self.mask[..]),
            NLastError => q.bind(&self.n_blobs[0][..]),
            NCheckpoint => q.bind(&self.n_blobs[1][..]),
            NResponse => q.bind(&self.n_blobs[2][..]),
            NPayload => q.bind(&self.n_blobs[3][..]),
            DueIn => q.bind(&self.due_in[..]),
            DueDb => q.bind(&self.due_db[..]),
            NWake => q.bind(&self.n_wake[..]),
            NWrite => q.bind(&self.n_write[..]),
        }
    }
}

/// The sealed columns an update expects (when it expects them), in `mask`'s bit order.
fn blobs(was: Option<&StoredBlobs>) -> [Option<&[u8]>; 4] {
    let Some(s) = was else {
        return [None; 4];
    };
    [
        s.last_error.as_deref(),
        s.checkpoint.as_deref(),
        s.response.as_deref(),
        s.recovery_payload.as_deref(),
    ]
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
mod tests;
