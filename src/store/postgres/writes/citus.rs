//! The batch write on Citus (docs/DESIGN.md §4.6): the same compare-and-set writes as
//! `writes.rs`'s statements, for a batch of one tenant, in statements Citus routes whole to
//! that tenant's shard. Citus routes a statement only when every reference to `receipts`
//! names one `tenant_id` (bound as a parameter, planned with its value: the sessions use
//! custom plans on Citus) and the statement has no `INSERT` in a `WITH`, so the one
//! statement of plain PostgreSQL becomes a transaction of up to four:
//!
//! 1. [`LOCK`], a `SELECT`: the inserts' advisory locks and the updates' row locks (the
//!    same fragments, in the same order), the clock read after them, the deadline checks,
//!    and the rows the updates found changed — on the worker that holds the tenant's
//!    shard. An update to make answers `go` and an insert `put`, with the clock reading.
//! 2. [`UPDATE_ROWS`]: the updates, their times resolved on that reading in claimd
//!    ([`Stamp::resolve`]), under the row locks statement 1 took.
//! 3. [`insert`]: the inserts not late, as one `INSERT … VALUES … ON CONFLICT DO NOTHING`,
//!    their times resolved the same way, under the advisory locks statement 1 took.
//! 4. The rows of the inserts that found their row (read in the same transaction).
//!
//! The notification that wakes waiting Claims is sent on the coordinator after the commit
//! ([`NOTIFY`]): a `pg_notify` in a statement routed to a worker would be sent on the
//! worker, where nobody listens.
//!
//! [`Stamp::resolve`]: crate::store::write::Stamp::resolve

use super::super::arrays::Col;
use super::super::{clock, size};
use super::{Statement, WRITE_COLS, head};
use crate::store::row::columns;
use std::sync::LazyLock;

/// The parameter that names the batch's tenant: the one after the arrays.
fn tenant_param(cols: &[Col]) -> usize {
    cols.len() + 3
}

/// Statement 1 (see the module's doc): locks, clock, deadlines, and what each write is to
/// do; `src` is `go` (an update to make, `db_now` the clock after the locks), `late`,
/// `cur` (with the row as found) or `put` (an insert to make, `db_now` the same).
pub(in crate::store::postgres) static LOCK: LazyLock<Statement> = LazyLock::new(|| {
    let tenant = format!("r.tenant_id = ${}::text", tenant_param(WRITE_COLS));
    let sql = head(WRITE_COLS, None)
        + concat!(
            keyed!(),
            locked!("(SELECT count(*) FROM keyed) >= 0"),
            clock_after!("(SELECT count(*) FROM locked) l"),
            "
late_ins AS MATERIALIZED (
    SELECT i.idx FROM i, c, t
    WHERE i.ins AND t.wall > LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db)
),
go AS MATERIALIZED (
    SELECT i.idx FROM i, c, t
    WHERE i.idx IN (SELECT idx FROM locked)
      AND (i.due_in IS NULL
           OR t.wall <= LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db))
),
done AS (
    SELECT idx, 'late' AS src, NULL::timestamptz AS now FROM late_ins
    UNION ALL SELECT go.idx, 'go', t.now FROM go, t
    UNION ALL SELECT idx, 'late', NULL FROM locked WHERE idx NOT IN (SELECT idx FROM go)
)
SELECT i.idx, COALESCE(d.src, CASE WHEN i.ins THEN 'put' ELSE 'cur' END) AS src,
       COALESCE(d.now, CASE WHEN i.ins THEN t.now ELSE c.now END) AS db_now,
       clock_timestamp() AS db_wall,
       r.namespace IS NOT NULL AS found, ",
            columns!(),
            "
FROM i CROSS JOIN c CROSS JOIN t LEFT JOIN done d ON d.idx = i.idx
LEFT JOIN LATERAL (SELECT * FROM receipts r
                   WHERE d.idx IS NULL AND NOT i.ins AND r.tenant_id = i.i_tenant
                     AND r.namespace = i.i_ns AND r.key = i.i_key OFFSET 0) r ON true
ORDER BY i.idx"
        );
    // A `void` column (the lock's result) does not survive Citus's trip to the worker:
    // the lock's result is taken as text.
    let sql = sql
        .replace("r.tenant_id = i.i_tenant", &tenant)
        .replace(", k.h) FROM (", ", k.h)::text FROM (");
    Statement {
        sql,
        cols: WRITE_COLS,
    }
});

/// Statement 2: the updates statement 1 found still at their version, locked and not
/// late, for the tenant `$1`, each with its values and times resolved in claimd on that
/// statement's clock reading (`now`); answers the rows it wrote. No function but operators
/// on the values: Citus routes a modification whole only when it calls no STABLE function
/// on a column and no volatile one in a `CASE` or `COALESCE` — and would evaluate
/// `clock_timestamp()` on the coordinator, before the locks — so the times come in as
/// values.
pub(in crate::store::postgres) const UPDATE_ROWS: &str = "UPDATE receipts r SET
    state = u.state, attempt = u.attempt, free_attempts = u.free, claim_token = u.token,
    lease_expires_at = u.lease, next_attempt_at = u.next, completed_at = u.done,
    updated_at = u.now,
    last_error = CASE WHEN u.mask & 1 <> 0 THEN u.le ELSE r.last_error END,
    checkpoint = CASE WHEN u.mask & 2 <> 0 THEN u.cp ELSE r.checkpoint END,
    response = CASE WHEN u.mask & 4 <> 0 THEN u.resp ELSE r.response END,
    recovery_payload = CASE WHEN u.mask & 8 <> 0 THEN u.payload ELSE r.recovery_payload END,
    write_id = u.write
FROM unnest($2::text[], $3::text[], $4::text[], $5::int4[], $6::int4[], $7::uuid[],
            $8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[],
            $12::int4[], $13::bytea[], $14::bytea[], $15::bytea[], $16::bytea[], $17::uuid[])
     AS u(ns, key, state, attempt, free, token, lease, next, done, now, mask, le, cp, resp,
          payload, write)
WHERE r.tenant_id = $1::text AND r.namespace = u.ns AND r.key = u.key
RETURNING r.namespace, r.key";

/// The columns statement 2 inserts, in its `VALUES` order.
const INSERT_COLUMNS: usize = 19;

/// Statement 2 for `rows` inserts: the new rows' every column as parameters, each row's
/// tenant the batch's; a row that exists is left alone and not returned.
pub(in crate::store::postgres) fn insert(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO receipts (tenant_id, namespace, key, state, attempt, free_attempts,
    fingerprint, claim_token, lease_expires_at, next_attempt_at, created_at, updated_at,
    completed_at, last_error, checkpoint, response, recovery_payload, life_id, write_id)
VALUES ",
    );
    for row in 0..rows {
        let first = row * INSERT_COLUMNS + 1;
        let params: Vec<String> = (first..first + INSERT_COLUMNS)
            .map(|n| format!("${n}"))
            .collect();
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&params.join(", "));
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (tenant_id, namespace, key) DO NOTHING RETURNING namespace, key");
    sql
}

/// Statement 3: the rows `$2`, `$3` name of the tenant `$1`, with the store's clock.
pub(in crate::store::postgres) const READ_TENANT: &str = concat!(
    "SELECT i.idx, ",
    clock!("$6", "$5"),
    " AS db_now, clock_timestamp() AS db_wall, r.namespace IS NOT NULL AS found, ",
    columns!(),
    " FROM unnest($1::int4[], $3::text[], $4::text[]) AS i(idx, i_ns, i_key)
    LEFT JOIN LATERAL (SELECT * FROM receipts r
                       WHERE r.tenant_id = $2::text AND r.namespace = i.i_ns AND r.key = i.i_key
                       OFFSET 0) r
      ON true
    ORDER BY i.idx"
);

/// The wake-up of waiting Claims, on the coordinator after the commit: the marks `$1`
/// (comma-separated), only while the notification queue has room
/// (`--notify-queue-max-usage`, `postgres/listen.rs`).
pub(in crate::store::postgres) const NOTIFY: &str = "SELECT pg_notify('claimd_settled', $1)
    WHERE pg_notification_queue_usage()
          < current_setting('claimd.notify_queue_max_usage', true)::float8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_to_receipts_in_the_citus_statements_names_the_batchs_one_tenant() {
        let sql = &LOCK.sql;
        assert!(!sql.contains("i.i_tenant AND"), "{sql}");
        assert!(!sql.contains("INSERT"), "{sql}");
        assert!(!sql.contains("UPDATE receipts"), "{sql}");
        assert!(!sql.contains("pg_notify"), "{sql}");
        assert!(sql.contains("FOR UPDATE OF r"), "{sql}");
        assert_eq!(sql.matches("r.tenant_id = $40::text").count(), 2, "{sql}");
        // The update is a modification: no function call at all, only operators.
        assert!(!UPDATE_ROWS.contains("COALESCE"), "{UPDATE_ROWS}");
        assert!(!UPDATE_ROWS.contains("interval"), "{UPDATE_ROWS}");
        assert!(!UPDATE_ROWS.contains("clock_timestamp"), "{UPDATE_ROWS}");
        assert_eq!(UPDATE_ROWS.matches("r.tenant_id = $1::text").count(), 1);
        assert!(insert(2).ends_with("RETURNING namespace, key"));
        assert!(insert(2).contains("($20, $21,"));
    }
}
