//! The batch write's statements (`batch.rs` runs them): one for a batch of inserts only
//! ([`INSERT_MANY`]: every first delivery of a busy moment), one for updates only
//! ([`UPDATE_MANY`]: the Completes, Heartbeats and takeovers), and [`WRITE_MANY`] for a
//! batch with both. The three are made of the same fragments below, so an insert or an
//! update is the same SQL whichever statement carries it; the lean two only leave out the
//! parts their batch cannot use, which PostgreSQL would otherwise start and run empty
//! (about 40 % of a one-row insert's database time, measured with `EXPLAIN ANALYZE`).
//!
//! Every statement takes `$1`/`$2`, the clock's offset and frozen time, and from `$3` on one
//! array per column of `i` (`arrays.rs`, bound in binary; each statement only the columns
//! its kind of write uses, NULL where a write has no value): the row and its position `idx`, whether it inserts (with the new life `life`),
//! the version an update expects (`v_*`, with the life `life`; the sealed columns
//! `v_last_error`… too when `v_sealed`), the new state, counts, token and fingerprint, the
//! three times as a value (`*_at`) or microseconds after the write's clock (`*_after`),
//! which sealed columns it sets (`mask` bits: last error, checkpoint, response, recovery
//! payload) and their values, and the deadline as microseconds after the statement's start
//! (`due_in`) and on the database's clock through the measured gap (`due_db`, `gap.rs`;
//! never claimd's own wall clock, which may be minutes off the database's: docs/DESIGN.md
//! §3.4). Each answer row says what became of its write (`src`: `ins`, `upd`, `late`, or
//! `cur` with the row as the statement found it) and carries `db_wall` to measure the gap
//! again.

use super::arrays::Col::{self, *};
use super::{clock, counted, size};
use crate::store::row::columns;
use crate::store::write::RowWrite;
use std::sync::LazyLock;

/// The statement's clock and start, and the writes as rows: `cols` unnested from the
/// arrays `$3`… (`arrays.rs`), with `ins` a constant when every write of the statement is
/// an insert or every one an update.
fn head(cols: &[Col], ins: Option<bool>) -> String {
    let mut arrays = Vec::with_capacity(cols.len());
    let mut names = Vec::with_capacity(cols.len());
    for (n, col) in cols.iter().enumerate() {
        let (name, ty) = col.sql();
        arrays.push(format!("${}::{ty}", n + 3));
        names.push(name);
    }
    let ins = ins.map_or(String::new(), |ins| format!(", {ins} AS ins"));
    format!(
        concat!(
            "\nWITH c AS (SELECT ",
            clock!("$2", "$1"),
            " AS now, statement_timestamp() AS started),
i AS (
    SELECT *{} FROM unnest({}) AS i({})
),"
        ),
        ins,
        arrays.join(", "),
        names.join(", ")
    )
}

/// The advisory lock class of the inserts' keys (`pg_advisory_xact_lock(class, key)`, a
/// space of its own beside the janitor's one-key lock): "clai" as four bytes.
macro_rules! insert_lock_class {
    () => {
        "1668047209"
    };
}

/// The inserts' keys locked first, each by a transaction-level advisory lock on a hash of
/// the row (`keyed`), in hash order so that two batches never wait on each other in a
/// cycle: a batch that would insert a row another batch is inserting waits here, before
/// its clock is read, instead of inside its `INSERT` after its deadline was checked
/// (docs/DESIGN.md §4.2.1). A collision of two hashes only makes their batches take turns.
macro_rules! keyed {
    () => {
        concat!(
            "
keyed AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(",
            insert_lock_class!(),
            ", k.h) FROM (
        SELECT DISTINCT hashtext(i.i_tenant || '/' || i.i_ns || '/' || i.i_key) AS h
        FROM i WHERE i.ins ORDER BY 1
    ) k
),"
        )
    };
}

/// Each insert made: one receipt and its bytes.
macro_rules! ins_counted {
    () => {
        "
        SELECT ins.tenant_id, 1, ins.bytes FROM ins"
    };
}

/// Each update made: the bytes it added (or freed).
macro_rules! upd_counted {
    () => {
        "
        SELECT i.i_tenant, 0, upd.bytes - l.old_bytes
        FROM upd JOIN i ON i.idx = upd.idx JOIN locked l ON l.idx = upd.idx"
    };
}

/// The inserts, after every lock of the batch (`t`): those already late are not made
/// (`late_ins`); the rest go in primary-key order, with the clock read after the locks, so
/// a new lease runs from when the row is written; a row that exists (or appears meanwhile)
/// is left alone by `ON CONFLICT`, which looks in the primary key whatever the plan. (A
/// `NOT EXISTS` here before was redundant and worse: a generic plan made while the table
/// was small ran it as a hash anti-join over a scan of the whole table, on every insert,
/// as the table grew.)
macro_rules! inserts {
    () => {
        concat!(
            "
late_ins AS MATERIALIZED (
    SELECT i.idx FROM i, c, t
    WHERE i.ins AND t.wall > LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db)
),
ins AS (
    INSERT INTO receipts (tenant_id, namespace, key, state, attempt, free_attempts, fingerprint,
                          claim_token, lease_expires_at, next_attempt_at, created_at, updated_at,
                          completed_at, last_error, checkpoint, response, recovery_payload, life_id,
                          write_id)
    SELECT i.i_tenant, i.i_ns, i.i_key, i.n_state, i.n_attempt, i.n_free, i.n_fingerprint,
           i.n_token, COALESCE(i.lease_at, t.now + i.lease_after * interval '1 microsecond'),
           COALESCE(i.next_at, t.now + i.next_after * interval '1 microsecond'), t.now, t.now,
           COALESCE(i.done_at, t.now + i.done_after * interval '1 microsecond'),
           i.n_last_error, i.n_checkpoint, i.n_response, i.n_payload, i.life, i.n_write
    FROM i, t
    WHERE i.ins AND i.idx NOT IN (SELECT idx FROM late_ins)
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING tenant_id, namespace, key, ",
            size!("receipts"),
            " AS bytes
),"
        )
    };
}

/// The clock after every lock of the batch, read once `$locks` (the lock CTEs, as a
/// `FROM` list of counts) have all been taken.
macro_rules! clock_after {
    ($locks:literal) => {
        concat!(
            "
t AS (SELECT ",
            clock!(after_lock: "$2", "$1"),
            " AS now, clock_timestamp() AS wall FROM ",
            $locks,
            "),"
        )
    };
}

/// The updates' rows, each locked only if still at the version decided from (`locked`),
/// after the inserts' keys (`$after`: a condition that reads `keyed`, or `true`).
macro_rules! locked {
    ($after:literal) => {
        concat!(
            "
locked AS MATERIALIZED (
    SELECT i.idx, l.old_bytes FROM i CROSS JOIN LATERAL (
        SELECT ",
            size!("r"),
            " AS old_bytes FROM receipts r
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
    WHERE NOT i.ins AND ",
            $after,
            "
),"
        )
    };
}

/// The updates, after every lock of the batch (`t`), each written only if its answer is
/// not yet due, and the notification that wakes the Claims waiting on the receipts they
/// settle.
macro_rules! updates {
    () => {
        concat!(
            "
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
        recovery_payload = CASE WHEN i.mask & 8 <> 0 THEN i.n_payload ELSE r.recovery_payload END,
        write_id = i.n_write
    FROM i, t, c
    WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
      AND i.idx IN (SELECT idx FROM locked)
      AND (i.due_in IS NULL
           OR t.wall <= LEAST(c.started + i.due_in * interval '1 microsecond', i.due_db))
    RETURNING i.idx, t.now, ",
            size!("r"),
            " AS bytes
),
woken AS (
    SELECT pg_notify('claimd_settled', string_agg(w.n_wake, ',')) FROM (
        SELECT i.n_wake, (row_number() OVER ()) / 400 AS part
        FROM upd JOIN i ON i.idx = upd.idx WHERE i.n_wake IS NOT NULL
    ) w
    -- Only while the queue has room (--notify-queue-max-usage; postgres/listen.rs): a
    -- full queue would fail the commit, and so every write of the batch.
    WHERE (SELECT pg_notification_queue_usage()
           < current_setting('claimd.notify_queue_max_usage', true)::float8)
    GROUP BY w.part
),"
        )
    };
}

/// What became of each insert.
macro_rules! inserted {
    () => {
        "
    SELECT i.idx, 'ins' AS src, t.now FROM ins JOIN i
      ON ins.tenant_id = i.i_tenant AND ins.namespace = i.i_ns AND ins.key = i.i_key, t
    UNION ALL SELECT idx, 'late', NULL FROM late_ins"
    };
}

/// What became of each update.
macro_rules! updated {
    () => {
        "
    SELECT idx, 'upd' AS src, now FROM upd WHERE (SELECT count(*) FROM woken) >= 0
    UNION ALL SELECT idx, 'late', NULL FROM locked WHERE idx NOT IN (SELECT idx FROM upd)"
    };
}

/// One answer row per write, in batch order: what became of it, and the row as the
/// statement found it when the write was not made.
macro_rules! answers {
    () => {
        concat!(
            "
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
        )
    };
}

/// A write statement: its SQL and the columns it binds, in parameter order from `$3`.
#[derive(Debug)]
pub(super) struct Statement {
    /// The SQL.
    pub(super) sql: String,
    /// The arrays it takes.
    pub(super) cols: &'static [Col],
}

/// What every write statement binds: the row, its position, and what it writes.
#[rustfmt::skip]
const INSERT_COLS: &[Col] = &[
    Idx, Tenant, Ns, Key, Life, NState, NAttempt, NFree, NToken, NFingerprint, LeaseAt,
    LeaseAfter, NextAt, NextAfter, DoneAt, DoneAfter, NLastError, NCheckpoint, NResponse,
    NPayload, DueIn, DueDb, NWrite,
];

/// An update's: no fingerprint (it never changes), the version it expects, which sealed
/// columns it sets, and the mark it notifies.
#[rustfmt::skip]
const UPDATE_COLS: &[Col] = &[
    Idx, Tenant, Ns, Key, Life, VToken, VState, VAttempt, VFree, VUpdated, VLease, VSealed,
    VLastError, VCheckpoint, VResponse, VPayload, NState, NAttempt, NFree, NToken, LeaseAt,
    LeaseAfter, NextAt, NextAfter, DoneAt, DoneAfter, Mask, NLastError, NCheckpoint, NResponse,
    NPayload, DueIn, DueDb, NWake, NWrite,
];

/// A batch with both: every column, and which kind each write is.
#[rustfmt::skip]
const WRITE_COLS: &[Col] = &[
    Idx, Tenant, Ns, Key, Ins, Life, VToken, VState, VAttempt, VFree, VUpdated, VLease, VSealed,
    VLastError, VCheckpoint, VResponse, VPayload, NState, NAttempt, NFree, NToken, NFingerprint,
    LeaseAt, LeaseAfter, NextAt, NextAfter, DoneAt, DoneAfter, Mask, NLastError, NCheckpoint,
    NResponse, NPayload, DueIn, DueDb, NWake, NWrite,
];

/// A batch with inserts and updates.
pub(super) static WRITE_MANY: LazyLock<Statement> = LazyLock::new(|| Statement {
    sql: head(WRITE_COLS, None)
        + concat!(
            keyed!(),
            locked!("(SELECT count(*) FROM keyed) >= 0"),
            clock_after!("(SELECT count(*) FROM locked) l"),
            inserts!(),
            updates!(),
            "
done AS (",
            inserted!(),
            "
    UNION ALL",
            updated!(),
            "
),",
            counted!(concat!(
                ins_counted!(),
                "\n        UNION ALL",
                upd_counted!()
            )),
            answers!()
        ),
    cols: WRITE_COLS,
});

/// A batch of inserts only.
pub(super) static INSERT_MANY: LazyLock<Statement> = LazyLock::new(|| Statement {
    sql: head(INSERT_COLS, Some(true))
        + concat!(
            keyed!(),
            clock_after!("(SELECT count(*) FROM keyed) k"),
            inserts!(),
            "
done AS (",
            inserted!(),
            "
),",
            counted!(ins_counted!()),
            answers!()
        ),
    cols: INSERT_COLS,
});

/// A batch of updates only.
pub(super) static UPDATE_MANY: LazyLock<Statement> = LazyLock::new(|| Statement {
    sql: head(UPDATE_COLS, Some(false))
        + concat!(
            locked!("true"),
            clock_after!("(SELECT count(*) FROM locked) l"),
            updates!(),
            "
done AS (",
            updated!(),
            "
),",
            counted!(upd_counted!()),
            answers!()
        ),
    cols: UPDATE_COLS,
});

/// The statement for `writes`: the lean one when they are all inserts or all updates.
pub(super) fn statement(writes: &[&RowWrite]) -> &'static Statement {
    let inserts = writes.iter().filter(|w| w.inserts()).count();
    match inserts {
        0 => &UPDATE_MANY,
        n if n == writes.len() => &INSERT_MANY,
        _ => &WRITE_MANY,
    }
}

mod citus;
pub(super) use citus::{LOCK, NOTIFY, READ_TENANT, UPDATE_ROWS, insert};
