//! A batch's two statements in PostgreSQL, each one round trip for every row of the batch:
//! [`READ_MANY`] reads the rows with the store's clock (and the wall clock, for `gap.rs`),
//! and one of `writes.rs`'s statements makes every compare-and-set write (`store::write`)
//! at once, in one implicit transaction, so a batch costs one commit (one WAL flush)
//! however many writes it holds.
//!
//! The reads and the writes come as arrays (`unnest`; the writes' in `arrays.rs`), in
//! primary-key order with each row's position in the batch, so the statements are prepared
//! once whatever the batch's size, each row is found through the primary key (`LATERAL …
//! OFFSET 0`, whatever the plan's estimates), and inserts and the updates' locks go in
//! primary-key order, so two batches never wait for each other in a cycle. An
//! update locks its row only if it is still at the version it was decided from, then reads
//! the clock (after every lock of the batch: a lease runs from when the row was had), and
//! writes only if the caller's answer is not yet due at that moment (`late` otherwise). A
//! write that did not apply returns the row as the statement found it (`cur`), or no row.

use super::arrays::Arrays;
use super::{PgDriver, clock, interpret, writes};
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::row::columns;
use crate::store::usage;
use crate::store::write::{RowWrite, WriteOutcome};
use sqlx::{PgConnection, Row as _};

/// The rows `$2`–`$4` name (with their positions `$1`), and the store's clock.
pub(super) const READ_MANY: &str = concat!(
    "SELECT i.idx, ",
    clock!("$6", "$5"),
    " AS db_now, clock_timestamp() AS db_wall, r.namespace IS NOT NULL AS found, ",
    columns!(),
    " FROM unnest($1::int4[], $2::text[], $3::text[], $4::text[]) AS i(idx, i_tenant, i_ns, i_key)
    LEFT JOIN LATERAL (SELECT * FROM receipts r
                       WHERE r.tenant_id = i.i_tenant AND r.namespace = i.i_ns AND r.key = i.i_key
                       OFFSET 0) r
      ON true
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
pub(super) fn found(row: &sqlx::postgres::PgRow) -> Result<Option<Row>, StoreError> {
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
        // A read waits for no commit: its sample is close to the true gap (`gap.rs`).
        if let Some(row) = rows.last() {
            self.gap.observe(row.try_get("db_wall").map_err(interpret)?);
        }
        rows.iter()
            .map(|row| {
                let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
                Ok((now, found(row)?))
            })
            .collect()
    }

    /// Makes every write it can, in one statement; what became of each, in order. A batch
    /// with a write that a tenant's storage limit checks runs in a transaction that first
    /// takes that tenant's turn and reads its figures (`turn.rs`).
    pub(super) async fn write_rows(
        &self,
        writes: &[RowWrite],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        let all: Vec<&RowWrite> = writes.iter().collect();
        let tenants = usage::tenants(&all);
        // The connection first: the deadlines are measured from when the statement is sent.
        let mut conn = self.pool.acquire().await.map_err(interpret)?;
        let outcomes = match tenants.is_empty() {
            true => self.statement_on(&mut conn, &all).await,
            false => self.checked_on(&mut conn, &all, &tenants).await,
        };
        if let Err(StoreError::ReadOnly(_)) = &outcomes {
            // A server that became read-only (a failover): this connection is not put back,
            // and the pool drops the others made before now (`read_only`).
            self.read_only.seen();
            conn.close_on_drop();
        }
        outcomes
    }

    /// Makes every write of `writes` it can, in one statement on `conn`.
    pub(super) async fn statement_on(
        &self,
        conn: &mut PgConnection,
        writes: &[&RowWrite],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        // The rows go in primary-key order (bytewise, as `COLLATE "C"` compares), so every
        // batch inserts and locks in the same order; each keeps its position as `idx`.
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| row_key(writes[a]).cmp(&row_key(writes[b])));
        let sorted: Vec<&RowWrite> = order.iter().map(|&i| writes[i]).collect();
        let mut arrays = Arrays::default();
        for (&idx, w) in order.iter().zip(&sorted) {
            arrays.push(idx, w, &self.gap);
        }
        let statement = writes::statement(&sorted);
        let query = sqlx::query(statement.sql.as_str())
            .bind(self.offset())
            .bind(self.frozen());
        let rows = (statement.cols.iter())
            .fold(query, |q, &col| arrays.bind(q, col))
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
