//! A batch's two statements in PostgreSQL, each one round trip for every row of the batch:
//! [`READ_MANY`] reads the rows with the store's clock, and [`WRITE_MANY`] makes every
//! compare-and-set write (`store::write`) at once, in one implicit transaction, so a batch
//! costs one commit (one WAL flush) however many writes it holds.
//!
//! The rows come as arrays (`unnest`), bound in primary-key order with each row's position
//! in the batch, so the statements are prepared once whatever the batch's size, each row is
//! found through the primary key (`LATERAL … OFFSET 0`, whatever the plan's estimates), and inserts and
//! the updates' locks go in primary-key order, so two batches never wait for each other in a cycle. An
//! update locks its row only if it is still at the version it was decided from, then reads
//! the clock (after every lock of the batch: a lease runs from when the row was had), and
//! writes only if the caller's answer is not yet due at that moment (`late` otherwise). A
//! write that did not apply returns the row as the statement found it (`cur`), or no row.

use super::{PgDriver, clock, interpret};
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::driver::Row;
use crate::store::row::columns;
use crate::store::write::{Expect, RowWrite, Stamp, WriteOutcome};
use crate::store::{StoreError, StoredBlobs};
use sqlx::Row as _;
use std::time::Duration;
use tokio::time::Instant;

/// The rows `$2`–`$4` name (with their positions `$1`), and the store's clock.
const READ_MANY: &str = concat!(
    "SELECT i.idx, ",
    clock!("$6", "$5"),
    " AS db_now, r.namespace IS NOT NULL AS found, ",
    columns!(),
    " FROM unnest($1::int4[], $2::text[], $3::text[], $4::text[]) AS i(idx, i_tenant, i_ns, i_key)
    LEFT JOIN LATERAL (SELECT * FROM receipts r
                       WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
                       OFFSET 0) r
      ON true
    ORDER BY i.idx"
);

/// One write per element of the arrays: `$3` its position, `$4`, `$5` and `$31` the row, `$6` whether it inserts (with
/// the new life `$7`), `$8`–`$13` the version an update expects (with the life `$7`), `$14`–
/// `$18` state, counts, token and fingerprint, `$19`–`$24` the three times as a value or
/// microseconds after the write's clock, `$25` which sealed columns it sets (bits: last
/// error, checkpoint, response, recovery payload) and `$26`–`$29` their values, `$30` how
/// many microseconds after the statement's start the write may still be made (NULL: no
/// deadline), `$32` whether the update also expects the sealed columns `$33`–`$36`
/// unchanged, `$37` the same deadline on claimd's wall clock ([`due_wall`]). `$1`/`$2` are the clock's offset and frozen time.
const WRITE_MANY: &str = concat!(
    "
WITH c AS (SELECT ",
    clock!("$2", "$1"),
    " AS now, statement_timestamp() AS started),
i AS (
    SELECT * FROM unnest($3::int4[], $4::text[], $5::text[], $31::text[], $6::bool[], $7::bytea[],
        $8::uuid[], $9::text[], $10::int4[], $11::int4[], $12::timestamptz[], $13::timestamptz[],
        $14::text[], $15::int4[], $16::int4[], $17::uuid[], $18::bytea[],
        $19::timestamptz[], $20::int8[], $21::timestamptz[], $22::int8[], $23::timestamptz[],
        $24::int8[], $25::int4[], $26::bytea[], $27::bytea[], $28::bytea[], $29::bytea[],
        $30::int8[], $32::bool[], $33::bytea[], $34::bytea[], $35::bytea[], $36::bytea[],
        $37::timestamptz[])
    AS i(idx, i_tenant, i_ns, i_key, ins, life, v_token, v_state, v_attempt, v_free, v_updated,
         v_lease, n_state, n_attempt, n_free, n_token, n_fingerprint, lease_at, lease_after,
         next_at, next_after, done_at, done_after, mask, n_last_error, n_checkpoint, n_response,
         n_payload, due_in, v_sealed, v_last_error, v_checkpoint, v_response, v_payload,
         due_wall)
),
late_ins AS MATERIALIZED (
    SELECT i.idx FROM i, c
    WHERE i.ins AND clock_timestamp() > LEAST(c.started + i.due_in * interval '1 microsecond', i.due_wall)
),
ins AS (
    INSERT INTO receipts (tenant_id, namespace, key, state, attempt, free_attempts, fingerprint,
                          claim_token, lease_expires_at, next_attempt_at, created_at, updated_at,
                          completed_at, last_error, checkpoint, response, recovery_payload, life_id)
    SELECT i.i_tenant, i.i_ns, i.i_key, i.n_state, i.n_attempt, i.n_free, i.n_fingerprint,
           i.n_token, COALESCE(i.lease_at, c.now + i.lease_after * interval '1 microsecond'),
           COALESCE(i.next_at, c.now + i.next_after * interval '1 microsecond'), c.now, c.now,
           COALESCE(i.done_at, c.now + i.done_after * interval '1 microsecond'),
           i.n_last_error, i.n_checkpoint, i.n_response, i.n_payload, i.life
    FROM i, c
    WHERE i.ins AND i.idx NOT IN (SELECT idx FROM late_ins)
      AND NOT EXISTS (SELECT 1 FROM receipts r
                      WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key)
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING tenant_id, namespace, key
),
locked AS MATERIALIZED (
    SELECT i.idx FROM i CROSS JOIN LATERAL (
        SELECT 1 FROM receipts r
        WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
          AND r.life_id IS NOT DISTINCT FROM i.life
          AND r.claim_token IS NOT DISTINCT FROM i.v_token AND r.state = i.v_state
          AND r.attempt = i.v_attempt AND r.free_attempts = i.v_free
          AND r.updated_at = i.v_updated AND r.lease_expires_at IS NOT DISTINCT FROM i.v_lease
          AND (NOT i.v_sealed OR (r.last_error IS NOT DISTINCT FROM i.v_last_error
            AND r.checkpoint IS NOT DISTINCT FROM i.v_checkpoint
            AND r.response IS NOT DISTINCT FROM i.v_response
            AND r.recovery_payload IS NOT DISTINCT FROM i.v_payload))
        FOR UPDATE OF r
    ) l
    WHERE NOT i.ins
),
t AS (SELECT ",
    clock!(after_lock: "$2", "$1"),
    " AS now, clock_timestamp() AS wall FROM (SELECT count(*) FROM locked) l),
upd AS (
    UPDATE receipts r SET
        state = i.n_state, attempt = i.n_attempt, free_attempts = i.n_free, claim_token = i.n_token,
        lease_expires_at = COALESCE(i.lease_at, t.now + i.lease_after * interval '1 microsecond'),
        next_attempt_at = COALESCE(i.next_at, t.now + i.next_after * interval '1 microsecond'),
        completed_at = COALESCE(i.done_at, t.now + i.done_after * interval '1 microsecond'),
        updated_at = t.now,
        last_error = CASE WHEN i.mask & 1 <> 0 THEN i.n_last_error ELSE r.last_error END,
        checkpoint = CASE WHEN i.mask & 2 <> 0 THEN i.n_checkpoint ELSE r.checkpoint END,
        response = CASE WHEN i.mask & 4 <> 0 THEN i.n_response ELSE r.response END,
        recovery_payload = CASE WHEN i.mask & 8 <> 0 THEN i.n_payload ELSE r.recovery_payload END
    FROM i, t, c
    WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
      AND i.idx IN (SELECT idx FROM locked)
      AND (i.due_in IS NULL
           OR t.wall <= LEAST(c.started + i.due_in * interval '1 microsecond', i.due_wall))
    RETURNING i.idx, t.now
),
done AS (
    SELECT i.idx, 'ins' AS src, c.now FROM ins JOIN i
      ON ins.tenant_id = i.i_tenant AND ins.namespace = i.i_ns AND ins.key = i.i_key, c
    UNION ALL SELECT idx, 'upd', now FROM upd
    UNION ALL SELECT idx, 'late', NULL FROM late_ins
    UNION ALL SELECT idx, 'late', NULL FROM locked WHERE idx NOT IN (SELECT idx FROM upd)
)
SELECT i.idx, COALESCE(d.src, 'cur') AS src, COALESCE(d.now, c.now) AS db_now,
       r.namespace IS NOT NULL AS found, ",
    columns!(),
    "
FROM i CROSS JOIN c LEFT JOIN done d ON d.idx = i.idx
LEFT JOIN LATERAL (SELECT * FROM receipts r
                   WHERE d.idx IS NULL AND r.tenant_id = i.i_tenant AND r.namespace = i.i_ns
                     AND r.key = i.i_key OFFSET 0) r ON true
ORDER BY i.idx"
);

/// Room left for the answer's way back: a write is not made this close to the caller's
/// deadline, so a write that just makes it is also answered in time.
const ANSWER_TRIP: Duration = Duration::from_millis(2);

fn count(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn idx(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A stamp as the pair (value, microseconds after the write's clock) the statement takes.
fn stamp(s: Stamp) -> (Option<Timestamp>, Option<i64>) {
    match s {
        Stamp::At(t) => (t, None),
        Stamp::After(us) => (None, Some(us)),
    }
}

/// The primary key of the row `w` writes.
fn row_key(w: &RowWrite) -> (&str, &str, &str) {
    (&w.tenant, &w.next.id.namespace, &w.next.id.key)
}

/// The version an update expects; `None` for an insert.
fn version(w: &RowWrite) -> Option<&crate::store::write::Version> {
    match &w.expect {
        Expect::Row(v) => Some(v),
        Expect::Absent(_) => None,
    }
}

/// A sealed column an update expects unchanged, if it checks them.
fn checked(w: &RowWrite, f: fn(&StoredBlobs) -> &Option<Vec<u8>>) -> Option<Vec<u8>> {
    version(w)?.sealed.as_ref().and_then(|s| f(s).clone())
}

/// Microseconds from now until `due` less the answer's trip, for the statement's check.
fn due_in(due: Option<Instant>) -> Option<i64> {
    let left = due?
        .saturating_duration_since(Instant::now())
        .saturating_sub(ANSWER_TRIP);
    Some(i64::try_from(left.as_micros()).unwrap_or(i64::MAX))
}

/// `due` less the answer's trip on this process's wall clock. The statement keeps the
/// earlier of this and [`due_in`] after its own start: with the two clocks in step the
/// deadline holds exactly however long the statement took to reach the database; with
/// them apart it holds to within the statement's trip, as the relative one alone does.
fn due_wall(due: Option<Instant>) -> Option<Timestamp> {
    let left = due?
        .saturating_duration_since(Instant::now())
        .saturating_sub(ANSWER_TRIP);
    Some(chrono::Utc::now() + left)
}

/// The row of a `found` result, or none.
fn found(row: &sqlx::postgres::PgRow) -> Result<Option<Row>, StoreError> {
    match row.try_get::<bool, _>("found").map_err(interpret)? {
        true => super::rows::row(row).map(Some),
        false => Ok(None),
    }
}

impl PgDriver {
    /// The rows, in the order of `keys`, each with the clock reading of the statement.
    pub(super) async fn read_rows(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        let rows = sqlx::query(READ_MANY)
            .bind((0..keys.len()).map(idx).collect::<Vec<_>>())
            .bind(keys.iter().map(|(t, _)| *t).collect::<Vec<_>>())
            .bind(
                keys.iter()
                    .map(|(_, k)| k.namespace.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(keys.iter().map(|(_, k)| k.key.as_str()).collect::<Vec<_>>())
            .bind(self.offset())
            .bind(self.frozen())
            .fetch_all(&self.pool)
            .await
            .map_err(interpret)?;
        rows.iter()
            .map(|row| {
                let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
                Ok((now, found(row)?))
            })
            .collect()
    }

    /// Makes every write it can, in one statement; what became of each, in order.
    pub(super) async fn write_rows(
        &self,
        writes: &[RowWrite],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        // The rows go in primary-key order (bytewise, as `COLLATE "C"` compares), so every
        // batch inserts and locks in the same order; each keeps its position as `idx`.
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| row_key(&writes[a]).cmp(&row_key(&writes[b])));
        let sorted: Vec<&RowWrite> = order.iter().map(|&i| &writes[i]).collect();
        fn each<T>(writes: &[&RowWrite], f: impl Fn(&RowWrite) -> T) -> Vec<T> {
            writes.iter().map(|w| f(w)).collect()
        }
        let writes = &sorted[..];
        let mask = |w: &RowWrite| {
            let s = &w.sealed;
            [
                &s.last_error,
                &s.checkpoint,
                &s.response,
                &s.recovery_payload,
            ]
            .iter()
            .enumerate()
            .map(|(bit, set)| i32::from(set.is_some()) << bit)
            .sum::<i32>()
        };
        let sealed = |f: fn(&crate::store::write::Sealed) -> &Option<Option<Vec<u8>>>| {
            writes
                .iter()
                .map(|w| f(&w.sealed).clone().flatten())
                .collect::<Vec<_>>()
        };
        // The connection first: the deadlines are measured from when the statement is sent.
        let mut conn = self.pool.acquire().await.map_err(interpret)?;
        let rows = sqlx::query(WRITE_MANY)
            .bind(self.offset())
            .bind(self.frozen())
            .bind(order.iter().copied().map(idx).collect::<Vec<_>>())
            .bind(each(writes, |w| w.tenant.clone()))
            .bind(each(writes, |w| w.next.id.namespace.clone()))
            .bind(each(writes, RowWrite::inserts))
            .bind(each(writes, |w| match &w.expect {
                Expect::Absent(life) => Some(life.to_vec()),
                Expect::Row(v) => v.life_id.clone(),
            }))
            .bind(each(writes, |w| version(w).and_then(|v| v.claim_token)))
            .bind(each(writes, |w| version(w).map(|v| v.state.as_str())))
            .bind(each(writes, |w| version(w).map(|v| count(v.attempt))))
            .bind(each(writes, |w| version(w).map(|v| count(v.free_attempts))))
            .bind(each(writes, |w| version(w).map(|v| v.updated_at)))
            .bind(each(writes, |w| {
                version(w).and_then(|v| v.lease_expires_at)
            }))
            .bind(each(writes, |w| w.next.state.as_str()))
            .bind(each(writes, |w| count(w.next.attempt)))
            .bind(each(writes, |w| count(w.next.free_attempts)))
            .bind(each(writes, |w| w.next.claim_token))
            .bind(each(writes, |w| w.next.fingerprint.clone()))
            .bind(each(writes, |w| stamp(w.lease_expires_at).0))
            .bind(each(writes, |w| stamp(w.lease_expires_at).1))
            .bind(each(writes, |w| stamp(w.next_attempt_at).0))
            .bind(each(writes, |w| stamp(w.next_attempt_at).1))
            .bind(each(writes, |w| stamp(w.completed_at).0))
            .bind(each(writes, |w| stamp(w.completed_at).1))
            .bind(each(writes, mask))
            .bind(sealed(|s| &s.last_error))
            .bind(sealed(|s| &s.checkpoint))
            .bind(sealed(|s| &s.response))
            .bind(sealed(|s| &s.recovery_payload))
            .bind(each(writes, |w| due_in(w.due)))
            .bind(each(writes, |w| w.next.id.key.clone()))
            .bind(each(writes, |w| {
                version(w).is_some_and(|v| v.sealed.is_some())
            }))
            .bind(each(writes, |w| checked(w, |s| &s.last_error)))
            .bind(each(writes, |w| checked(w, |s| &s.checkpoint)))
            .bind(each(writes, |w| checked(w, |s| &s.response)))
            .bind(each(writes, |w| checked(w, |s| &s.recovery_payload)))
            .bind(each(writes, |w| due_wall(w.due)))
            .fetch_all(&mut *conn)
            .await
            .map_err(interpret)?;
        rows.iter()
            .map(|row| {
                let src: &str = row.try_get("src").map_err(interpret)?;
                let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
                Ok(match src {
                    "ins" | "upd" => WriteOutcome::Written(now),
                    "late" => WriteOutcome::Late,
                    _ => WriteOutcome::Stale(now, found(row)?.map(Box::new)),
                })
            })
            .collect()
    }
}
