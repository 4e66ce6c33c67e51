//! The batch write on Citus (docs/DESIGN.md §4.6): the same compare-and-set writes as
//! `writes.rs`'s statements, for a batch of one tenant, in statements Citus routes whole to
//! that tenant's shard. Citus routes a statement only when every reference to `receipts`
//! names one `tenant_id` (bound as a parameter, planned with its value: the sessions use
//! custom plans on Citus) and the statement has no `INSERT` in a `WITH`, so the one
//! statement of plain PostgreSQL becomes a transaction of two or three:
//!
//! 1. [`LOCK_AND_UPDATE`]: the inserts' advisory locks and the updates' row locks (the same
//!    fragments, in the same order), the clock read after them, the deadline checks, every
//!    update, and the rows the updates found changed — on the worker that holds the
//!    tenant's shard. An insert not yet late answers `put`, with the clock reading.
//! 2. [`insert`]: the inserts not late, as one `INSERT … VALUES … ON CONFLICT DO NOTHING`
//!    with their times resolved on that reading in claimd ([`Stamp::resolve`]), under the
//!    advisory locks statement 1 took.
//! 3. The rows of the inserts that found their row (read in the same transaction).
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

/// Statement 1 (see the module's doc): locks, clock, deadlines, updates, and what became
/// of each write; `src` is `upd`, `late`, `cur` (with the row as found) or `put` (an
/// insert still to make, `db_now` the clock after the locks).
pub(in crate::store::postgres) static LOCK_AND_UPDATE: LazyLock<Statement> = LazyLock::new(|| {
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
),",
            upd!(),
            "
done AS (
    SELECT idx, 'late' AS src, NULL::timestamptz AS now FROM late_ins
    UNION ALL SELECT idx, 'upd', now FROM upd
    UNION ALL SELECT idx, 'late', NULL FROM locked WHERE idx NOT IN (SELECT idx FROM upd)
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
    // Citus refuses a function that is not IMMUTABLE (`timestamptz + interval` is
    // STABLE) in a `COALESCE` of an `UPDATE`'s target list: the new times are worked
    // out in `s`, beside the rows, and the update only copies them.
    // A `void` column (the lock's result) does not survive Citus's trip to the worker:
    // the lock's result is taken as text.
    let mut sql = sql
        .replace("r.tenant_id = i.i_tenant", &tenant)
        .replace(", k.h) FROM (", ", k.h)::text FROM (");
    for (column, at, after) in [
        ("lease_expires_at", "lease_at", "lease_after"),
        ("next_attempt_at", "next_at", "next_after"),
        ("completed_at", "done_at", "done_after"),
    ] {
        let computed = format!("COALESCE(i.{at}, t.now + i.{after} * interval '1 microsecond')");
        sql = sql.replace(
            &format!("{column} = {computed}"),
            &format!("{column} = s.{column}"),
        );
    }
    let sql = sql
            .replace(
                "\nupd AS (",
                "\ns AS (
    SELECT i.idx,
           COALESCE(i.lease_at, t.now + i.lease_after * interval '1 microsecond') AS lease_expires_at,
           COALESCE(i.next_at, t.now + i.next_after * interval '1 microsecond') AS next_attempt_at,
           COALESCE(i.done_at, t.now + i.done_after * interval '1 microsecond') AS completed_at
    FROM i, t
),
upd AS (",
            )
            .replace("    FROM i, t, c\n    WHERE r.tenant_id", "    FROM i, t, c, s\n    WHERE s.idx = i.idx AND r.tenant_id");
    Statement {
        sql,
        cols: WRITE_COLS,
    }
});

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
        let sql = &LOCK_AND_UPDATE.sql;
        assert!(!sql.contains("i.i_tenant AND"), "{sql}");
        assert!(!sql.contains("INSERT"), "{sql}");
        assert!(!sql.contains("pg_notify"), "{sql}");
        assert!(!sql.contains("= COALESCE("), "{sql}");
        assert!(
            sql.contains("FROM i, t, c, s\n    WHERE s.idx = i.idx AND r.tenant_id"),
            "{sql}"
        );
        assert_eq!(sql.matches("r.tenant_id = $40::text").count(), 3, "{sql}");
        assert!(insert(2).ends_with("RETURNING namespace, key"));
        assert!(insert(2).contains("($20, $21,"));
    }
}
