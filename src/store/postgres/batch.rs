//! A batch's two statements in PostgreSQL, each one round trip for every row of the batch:
//! [`READ_MANY`] reads the rows with the store's clock, and [`WRITE_MANY`] makes every
//! compare-and-set write (`store::write`) at once, in one implicit transaction, so a batch
//! costs one commit (one WAL flush) however many writes it holds.
//!
//! The reads come as arrays (`unnest`), the writes as one JSON array (`element.rs`), in
//! primary-key order with each row's position in the batch, so the statements are prepared
//! once whatever the batch's size, each row is found through the primary key (`LATERAL …
//! OFFSET 0`, whatever the plan's estimates), and inserts and the updates' locks go in
//! primary-key order, so two batches never wait for each other in a cycle. An
//! update locks its row only if it is still at the version it was decided from, then reads
//! the clock (after every lock of the batch: a lease runs from when the row was had), and
//! writes only if the caller's answer is not yet due at that moment (`late` otherwise). A
//! write that did not apply returns the row as the statement found it (`cur`), or no row.

use super::element::element;
use super::{PgDriver, clock, interpret};
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::row::columns;
use crate::store::write::{RowWrite, WriteOutcome};
use sqlx::Row as _;

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

/// One write per element of the JSON array `$3` (its fields are the columns of `i`; an
/// absent field is NULL): the row and its position `idx`, whether it inserts (with the new
/// life `life`), the version an update expects (`v_*`, with the life `life`; the sealed
/// columns `v_last_error`… too when `v_sealed`), the new state, counts, token and
/// fingerprint, the three times as a value (`*_at`) or microseconds after the write's clock
/// (`*_after`), which sealed columns it sets (`mask` bits: last error, checkpoint,
/// response, recovery payload) and their values, and the deadline as microseconds after
/// the statement's start (`due_in`) and on the database's clock through the measured gap
/// (`due_db`, `gap.rs`; never claimd's own wall clock, which may be minutes off the
/// database's: docs/DESIGN.md §4.2.1); each answer row carries `db_wall` to measure the
/// gap again. `$1`/`$2` are
/// the clock's offset and frozen time. One JSON parameter costs the database a fraction of
/// what 37 `unnest` arrays did (about 9 µs each, per statement).
pub(super) const WRITE_MANY: &str = concat!(
    "
WITH c AS (SELECT ",
    clock!("$2", "$1"),
    " AS now, statement_timestamp() AS started),
i AS (
    SELECT * FROM json_to_recordset($3::text::json)
    AS i(idx int4, i_tenant text, i_ns text, i_key text, ins bool, life bytea, v_token uuid,
         v_state text, v_attempt int4, v_free int4, v_updated timestamptz, v_lease timestamptz,
         n_state text, n_attempt int4, n_free int4, n_token uuid, n_fingerprint bytea,
         lease_at timestamptz, lease_after int8, next_at timestamptz, next_after int8,
         done_at timestamptz, done_after int8, mask int4, n_last_error bytea,
         n_checkpoint bytea, n_response bytea, n_payload bytea, due_in int8, v_sealed bool,
         v_last_error bytea, v_checkpoint bytea, v_response bytea, v_payload bytea,
         due_db timestamptz)
),
late_ins AS MATERIALIZED (
    SELECT i.idx FROM i, c
    WHERE i.ins AND clock_timestamp() > LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db)
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
           OR t.wall <= LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db))
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
       clock_timestamp() AS db_wall,
       r.namespace IS NOT NULL AS found, ",
    columns!(),
    "
FROM i CROSS JOIN c LEFT JOIN done d ON d.idx = i.idx
LEFT JOIN LATERAL (SELECT * FROM receipts r
                   WHERE d.idx IS NULL AND r.tenant_id = i.i_tenant AND r.namespace = i.i_ns
                     AND r.key = i.i_key OFFSET 0) r ON true
ORDER BY i.idx"
);

fn idx(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The primary key of the row `w` writes.
fn row_key(w: &RowWrite) -> (&str, &str, &str) {
    (&w.tenant, &w.next.id.namespace, &w.next.id.key)
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
        // The connection first: the deadlines are measured from when the statement is sent.
        let mut conn = self.pool.acquire().await.map_err(interpret)?;
        let elements: Vec<_> = (order.iter().zip(&sorted))
            .map(|(&idx, w)| element(idx, w, &self.gap))
            .collect();
        // Serializing borrowed fields cannot fail (no maps with non-string keys).
        let elements =
            serde_json::to_string(&elements).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let rows = sqlx::query(WRITE_MANY)
            .bind(self.offset())
            .bind(self.frozen())
            .bind(elements)
            .fetch_all(&mut *conn)
            .await
            .map_err(interpret)?;
        if let Some(row) = rows.last() {
            self.gap.observe(row.try_get("db_wall").map_err(interpret)?);
        }
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
