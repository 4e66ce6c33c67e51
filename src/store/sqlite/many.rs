//! A batch's writes as few statements: its inserts as multi-row `INSERT … ON CONFLICT DO
//! NOTHING RETURNING` statements and its updates as multi-row `UPDATE … FROM (VALUES …)
//! RETURNING` statements, each row's update applying only while that row is still at the
//! version it was decided from. A statement names the rows it wrote; a row it did not name
//! was not written. With sqlx every statement is a trip to the connection's worker thread,
//! so one statement for many rows, rather than one per row, is what keeps the single
//! writer's lock short (docs/PERFORMANCE.md, issue 42).
//!
//! A statement holds at most [`MOST_ROWS`] rows, and a batch's writes of one kind are cut
//! into runs of a power of two rows (45: 32, 8, 4, 1), so only eight statement texts exist
//! per kind: each is prepared once per connection and kept in sqlx's statement cache.

use super::micros;
use crate::domain::Receipt;
use crate::seal::LIFE_LEN;
use crate::store::write::{Expect, RowWrite, Version};
use sqlx::sqlite::{SqliteArguments, SqliteConnection};
use sqlx::{Arguments, Sqlite, query::QueryAs};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Most rows in one statement: 29 parameters each (an update's) stays far below SQLite's
/// 32,766.
const MOST_ROWS: usize = 128;

/// The statement texts, by `log2` of their rows.
pub(super) const LADDER: usize = MOST_ROWS.trailing_zeros() as usize + 1;

/// A new row: the holder columns, the sealed ones, fingerprint, creation, life, the
/// write's id.
const INSERT: &str = "INSERT INTO receipts (tenant_id, namespace, key, state, attempt,
    free_attempts, claim_token, lease_expires_at, next_attempt_at, updated_at, completed_at,
    last_error, checkpoint, response, recovery_payload, fingerprint, created_at, life_id,
    write_id)
    VALUES ";

const INSERT_END: &str = "
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING tenant_id, namespace, key";

const INSERT_PARAMS: usize = 19;

/// An update per row of `v`: the holder columns, and each sealed column whose bit is set in
/// `sets` (last error, checkpoint, response, recovery payload); only while the row is at the
/// version `was_…` (and, when `check_sealed` is set, its sealed columns are `was_…` too).
const UPDATE: &str = "WITH v (tenant_id, namespace, key, state, attempt, free_attempts,
    claim_token, lease_expires_at, next_attempt_at, updated_at, completed_at, sets,
    last_error, checkpoint, response, recovery_payload, life_id, was_token, was_state,
    was_attempt, was_free_attempts, was_updated_at, was_lease_expires_at, check_sealed,
    was_last_error, was_checkpoint, was_response, was_recovery_payload, write_id)
    AS (VALUES ";

const UPDATE_END: &str = ")
    UPDATE receipts SET state = v.state, attempt = v.attempt,
    free_attempts = v.free_attempts, claim_token = v.claim_token,
    lease_expires_at = v.lease_expires_at, next_attempt_at = v.next_attempt_at,
    updated_at = v.updated_at, completed_at = v.completed_at,
    last_error = CASE WHEN v.sets & 1 THEN v.last_error ELSE receipts.last_error END,
    checkpoint = CASE WHEN v.sets & 2 THEN v.checkpoint ELSE receipts.checkpoint END,
    response = CASE WHEN v.sets & 4 THEN v.response ELSE receipts.response END,
    recovery_payload = CASE WHEN v.sets & 8 THEN v.recovery_payload
                            ELSE receipts.recovery_payload END,
    write_id = v.write_id
    FROM v
    WHERE receipts.tenant_id = v.tenant_id AND receipts.namespace = v.namespace
      AND receipts.key = v.key
      AND receipts.life_id IS v.life_id AND receipts.claim_token IS v.was_token
      AND receipts.state = v.was_state AND receipts.attempt = v.was_attempt
      AND receipts.free_attempts = v.was_free_attempts
      AND receipts.updated_at = v.was_updated_at
      AND receipts.lease_expires_at IS v.was_lease_expires_at
      AND (NOT v.check_sealed OR (receipts.last_error IS v.was_last_error
                                  AND receipts.checkpoint IS v.was_checkpoint
                                  AND receipts.response IS v.was_response
                                  AND receipts.recovery_payload IS v.was_recovery_payload))
    RETURNING receipts.tenant_id, receipts.namespace, receipts.key";

const UPDATE_PARAMS: usize = 29;

/// One write to make: the write and its receipt as written.
pub(super) type Planned<'w> = (&'w RowWrite, Receipt);

/// The rows a statement wrote, by tenant, namespace and key.
type Named = (String, String, String);

/// A statement of one kind, being bound.
type Statement<'q> = QueryAs<'q, Sqlite, Named, SqliteArguments>;

/// The text of the statement of one kind for `rows` rows (a power of two).
fn text(rows: usize, inserts: bool) -> &'static str {
    static TEXTS: [[OnceLock<String>; LADDER]; 2] =
        [const { [const { OnceLock::new() }; LADDER] }; 2];
    TEXTS[usize::from(inserts)][rows.trailing_zeros() as usize].get_or_init(|| {
        let (start, params, end) = match inserts {
            true => (INSERT, INSERT_PARAMS, INSERT_END),
            false => (UPDATE, UPDATE_PARAMS, UPDATE_END),
        };
        let row = format!("({})", vec!["?"; params].join(", "));
        format!("{start}{}{end}", vec![row; rows].join(",\n    "))
    })
}

/// Makes `planned`, inserts and updates each in as few statements as the ladder allows;
/// for each write, whether it was made.
pub(super) async fn write(
    conn: &mut SqliteConnection,
    planned: &[Planned<'_>],
) -> Result<Vec<bool>, sqlx::Error> {
    let mut written = vec![false; planned.len()];
    for inserts in [true, false] {
        let kind: Vec<usize> = (0..planned.len())
            .filter(|&i| planned[i].0.inserts() == inserts)
            .collect();
        for run in Ladder(&kind) {
            // Sized once: growing a statement's thousands of arguments one at a time would
            // copy them again and again.
            let mut arguments = SqliteArguments::default();
            let params = if inserts {
                INSERT_PARAMS
            } else {
                UPDATE_PARAMS
            };
            arguments.reserve(run.len() * params, 0);
            let mut query = sqlx::query_as_with(text(run.len(), inserts), arguments);
            for &i in run {
                let (w, r) = &planned[i];
                query = match &w.expect {
                    Expect::Absent(life) => insert_row(query, w, r, life),
                    Expect::Row(was) => update_row(query, w, r, was),
                };
            }
            let named = query.fetch_all(&mut *conn).await?;
            let at: HashMap<(&str, &str, &str), usize> = run
                .iter()
                .map(|&i| {
                    let w = planned[i].0;
                    (
                        (w.tenant.as_str(), &*w.next.id.namespace, &*w.next.id.key),
                        i,
                    )
                })
                .collect();
            for (tenant, namespace, key) in &named {
                if let Some(&i) = at.get(&(tenant.as_str(), namespace.as_str(), key.as_str())) {
                    written[i] = true;
                }
            }
        }
    }
    Ok(written)
}

/// Cuts a slice into runs of the largest power of two rows left, at most [`MOST_ROWS`].
pub(super) struct Ladder<'a>(pub(super) &'a [usize]);

impl<'a> Iterator for Ladder<'a> {
    type Item = &'a [usize];

    fn next(&mut self) -> Option<&'a [usize]> {
        let left = self.0.len();
        if left == 0 {
            return None;
        }
        let (run, rest) = self.0.split_at((1 << left.ilog2()).min(MOST_ROWS));
        self.0 = rest;
        Some(run)
    }
}

/// Binds `r`'s holder columns: tenant, namespace, key, state, counts, token, times.
fn holder<'q>(query: Statement<'q>, tenant: &'q str, r: &'q Receipt) -> Statement<'q> {
    query
        .bind(tenant)
        .bind(&r.id.namespace)
        .bind(&r.id.key)
        .bind(r.state.as_str())
        .bind(i64::from(r.attempt))
        .bind(i64::from(r.free_attempts))
        .bind(r.claim_token)
        .bind(r.lease_expires_at.map(micros))
        .bind(r.next_attempt_at.map(micros))
        .bind(micros(r.updated_at))
        .bind(r.completed_at.map(micros))
}

/// Binds one row of an insert.
fn insert_row<'q>(
    query: Statement<'q>,
    w: &'q RowWrite,
    r: &'q Receipt,
    life: &[u8; LIFE_LEN],
) -> Statement<'q> {
    let s = &w.sealed;
    holder(query, &w.tenant, r)
        .bind(s.last_error.clone().flatten())
        .bind(s.checkpoint.clone().flatten())
        .bind(s.response.clone().flatten())
        .bind(s.recovery_payload.clone().flatten())
        .bind(r.fingerprint.clone())
        .bind(micros(r.created_at))
        .bind(life.to_vec())
        .bind(w.id)
}

/// Binds one row of an update.
fn update_row<'q>(
    query: Statement<'q>,
    w: &'q RowWrite,
    r: &'q Receipt,
    v: &'q Version,
) -> Statement<'q> {
    let s = &w.sealed;
    let sets = [
        &s.last_error,
        &s.checkpoint,
        &s.response,
        &s.recovery_payload,
    ];
    let mask = (0..4)
        .filter(|&bit| sets[bit].is_some())
        .map(|bit| 1_i64 << bit);
    let was = v.sealed.clone().unwrap_or_default();
    holder(query, &w.tenant, r)
        .bind(mask.sum::<i64>())
        .bind(s.last_error.clone().flatten())
        .bind(s.checkpoint.clone().flatten())
        .bind(s.response.clone().flatten())
        .bind(s.recovery_payload.clone().flatten())
        .bind(v.life_id.clone())
        .bind(v.claim_token)
        .bind(v.state.as_str())
        .bind(i64::from(v.attempt))
        .bind(i64::from(v.free_attempts))
        .bind(micros(v.updated_at))
        .bind(v.lease_expires_at.map(micros))
        .bind(v.sealed.is_some())
        .bind(was.last_error)
        .bind(was.checkpoint)
        .bind(was.response)
        .bind(was.recovery_payload)
        .bind(w.id)
}
