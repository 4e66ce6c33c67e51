//! A checked batch's transaction on PostgreSQL (docs/DESIGN.md §5.15): the tenants' turns
//! and their figures, then the batch statement, then the commit — three round trips.
//!
//! The first round trip is one simple-protocol query of three statements: `BEGIN` (READ
//! COMMITTED whatever the server's default), the turn of each tenant (a transaction-level
//! advisory lock in a space of its own, "quot" as four bytes, on a hash of the tenant, in
//! lock order), and the read of their figures. They are three statements, not one, because
//! in READ COMMITTED each statement reads with a snapshot taken when it starts: the read,
//! which starts once every lock is held, sees what the tenant's previous checked batch
//! committed before it let go of the turn. A simple query carries no parameters, so the
//! tenants are written into it as escaped literals ([`literal`]). A transaction begun this
//! way is not one sqlx tracks, so [`Open`] closes the connection if the work stops before
//! the commit (an error, or `--db-timeout` dropping the future): PostgreSQL then rolls it
//! back and lets go of the turns.

use super::{PgDriver, interpret};
use crate::store::StoreError;
use crate::store::usage;
use crate::store::write::{RowWrite, WriteOutcome};
use futures_util::TryStreamExt;
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Postgres, Row as _};
use std::collections::HashMap;

/// `text` as a PostgreSQL escape-string literal: `E'…'`, with backslashes and quotes
/// doubled, so it reads back as `text` whatever `standard_conforming_strings` says.
pub(super) fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 3);
    out.push_str("E'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// The first round trip of a checked batch for `tenants` (sorted, distinct, none empty).
pub(super) fn opening(tenants: &[String]) -> String {
    let list = (tenants.iter())
        .map(|t| literal(t))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT pg_advisory_xact_lock(1903521652, k.h) FROM (
    SELECT DISTINCT hashtext(t) AS h FROM unnest(ARRAY[{list}]::text[]) AS t ORDER BY 1) k;
SELECT tenant_id, sum(receipts)::int8 AS receipts, sum(stored_bytes)::int8 AS bytes
    FROM tenant_usage WHERE tenant_id = ANY(ARRAY[{list}]::text[]) GROUP BY tenant_id"
    )
}

/// A connection inside a transaction sqlx does not track: closed when dropped before
/// [`Open::committed`], so that nothing it began outlives the work.
struct Open<'c> {
    conn: &'c mut PoolConnection<Postgres>,
    committed: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.committed {
            self.conn.close_on_drop();
        }
    }
}

impl PgDriver {
    /// `writes` in one transaction that first waits for the turn of each of `tenants` (an
    /// advisory lock: their checked batches take turns, on every replica) and reads their
    /// figures, then makes the writes `usage::admit` lets through; the others are
    /// answered [`WriteOutcome::OverQuota`].
    pub(super) async fn checked_on(
        &self,
        conn: &mut PoolConnection<Postgres>,
        writes: &[&RowWrite],
        tenants: &[String],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        let mut open = Open {
            conn,
            committed: false,
        };
        let sql = opening(tenants);
        // The turns' rows have one column, the figures' three: only the latter are read.
        let rows: Vec<sqlx::postgres::PgRow> = sqlx::raw_sql(AssertSqlSafe(sql))
            .fetch(&mut **open.conn)
            .try_filter(|row| std::future::ready(row.len() == 3))
            .try_collect()
            .await
            .map_err(interpret)?;
        let mut figures = HashMap::with_capacity(rows.len());
        for row in &rows {
            let tenant: String = row.try_get("tenant_id").map_err(interpret)?;
            let receipts: i64 = row.try_get("receipts").map_err(interpret)?;
            let bytes: i64 = row.try_get("bytes").map_err(interpret)?;
            figures.insert(tenant, (receipts, bytes));
        }
        let refused = usage::admit(writes, &figures);
        let admitted: Vec<&RowWrite> = (writes.iter().zip(&refused))
            .filter(|(_, r)| r.is_none())
            .map(|(w, _)| *w)
            .collect();
        let mut made = match admitted.is_empty() {
            true => Vec::new(),
            false => self.statement_on(open.conn, &admitted).await?,
        }
        .into_iter();
        sqlx::raw_sql(AssertSqlSafe("COMMIT"))
            .execute(&mut **open.conn)
            .await
            .map_err(interpret)?;
        open.committed = true;
        (refused.into_iter())
            .map(|r| match r {
                Some(refusal) => Ok(WriteOutcome::OverQuota(refusal)),
                None => made
                    .next()
                    .ok_or_else(|| StoreError::Corrupt("a write statement answered short".into())),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_reads_back_as_the_text_whatever_it_holds() {
        assert_eq!(literal("acme"), "E'acme'");
        assert_eq!(literal(r"a'b\c"), r"E'a''b\\c'");
        assert_eq!(literal("é'"), "E'é'''");
    }

    #[test]
    fn the_opening_begins_then_locks_then_reads_in_three_statements() {
        let sql = opening(&["a".into(), "b'".into()]);
        let parts: Vec<&str> = sql.split(";\n").collect();
        assert_eq!(parts.len(), 3, "{sql}");
        assert!(parts[0].starts_with("BEGIN ISOLATION LEVEL READ COMMITTED"));
        assert!(parts[1].contains("pg_advisory_xact_lock") && parts[1].contains("E'b'''"));
        assert!(parts[2].contains("FROM tenant_usage") && parts[2].contains("E'a', E'b'''"));
    }
}
