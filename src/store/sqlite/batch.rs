//! A batch's reads and writes in SQLite: the reads on one reader connection; the writes in
//! one `BEGIN IMMEDIATE` transaction on the single writer, so a batch costs one commit (one
//! fsync) however many writes it holds. Inside it the inserts and the updates are each a
//! few multi-row statements (`many`): an insert applies only while its row is absent
//! (`ON CONFLICT DO NOTHING`), an update only while its row is still at the version the
//! write was decided from; only a write that did not apply reads the row, to report it.
//! The clock is read once, when the write lock is had: every write of the batch is stamped
//! with that reading, and a write whose caller's answer is due by then is not made.

use super::many::{self, Ladder, Planned};
use super::rows::{fetch, row};
use super::{SqliteDriver, interpret};
use crate::domain::StorageRefusal;
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::row::columns;
use crate::store::usage;
use crate::store::write::{RowWrite, WriteOutcome};
use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, Row as _};
use std::collections::HashMap;
use std::sync::OnceLock;
use tokio::time::Instant;

/// The rows named in `wanted`, each with its place there (`wanted`): its rows are the
/// place, tenant, namespace and key, repeated once per row.
const READ: &str = "WITH wanted (wanted, w_tenant, w_namespace, w_key) AS (VALUES ";

const READ_END: &str = concat!(
    ") SELECT wanted, ",
    columns!(),
    " FROM wanted JOIN receipts ON tenant_id = w_tenant AND namespace = w_namespace
        AND key = w_key"
);

/// The text of the read of `rows` rows (a power of two).
fn read_text(rows: usize) -> &'static str {
    static TEXTS: [OnceLock<String>; many::LADDER] = [const { OnceLock::new() }; many::LADDER];
    TEXTS[rows.trailing_zeros() as usize].get_or_init(|| {
        let rows = vec!["(?, ?, ?, ?)"; rows].join(", ");
        format!("{READ}{rows}{READ_END}")
    })
}

impl SqliteDriver {
    /// The rows, in the order of `keys`, each with the clock when it was read: one
    /// statement per run of the ladder (`many`), the clock read once they have all answered.
    pub(super) async fn read_rows(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        let mut found: Vec<Option<Row>> = keys.iter().map(|_| None).collect();
        let all: Vec<usize> = (0..keys.len()).collect();
        for run in Ladder(&all) {
            let mut arguments = SqliteArguments::default();
            arguments.reserve(run.len() * 4, 0);
            let mut query = sqlx::query_with(read_text(run.len()), arguments);
            for &i in run {
                let (tenant, id) = keys[i];
                // A batch holds at most --group-commit-size (4,096) jobs.
                let at = i64::try_from(i).expect("a batch's index fits in i64");
                query = query
                    .bind(at)
                    .bind(tenant)
                    .bind(&id.namespace)
                    .bind(&id.key);
            }
            for r in query.fetch_all(&mut *reader).await.map_err(interpret)? {
                let at: i64 = r.try_get("wanted").map_err(interpret)?;
                let slot = usize::try_from(at).ok().and_then(|i| found.get_mut(i));
                let slot = slot
                    .ok_or_else(|| StoreError::Corrupt("a read answered for other rows".into()))?;
                *slot = Some(row(&r)?);
            }
        }
        let now = self.clock.now();
        Ok(found.into_iter().map(|row| (now, row)).collect())
    }

    /// Makes every write that still applies, in one transaction; what became of each. How it
    /// ended is noted for health (`writable`).
    pub(super) async fn write_rows(
        &self,
        writes: &[RowWrite],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        let outcomes = self.writable.noted(self.write_in_one(writes).await)?;
        if outcomes
            .iter()
            .any(|o| matches!(o, WriteOutcome::Written(_)))
        {
            self.writable.wrote();
        }
        Ok(outcomes)
    }

    /// The writes that are not late, made in one transaction on the writer; a write that
    /// was not made reads its row as it is now.
    async fn write_in_one(&self, writes: &[RowWrite]) -> Result<Vec<WriteOutcome>, StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(interpret)?;
        let (had, now) = (Instant::now(), self.clock.now());
        // The write lock is this batch's alone: the tenants' figures cannot move under it.
        let refused = refusals(&mut tx, writes).await?;
        let made: Vec<usize> = (0..writes.len())
            .filter(|&i| refused[i].is_none() && writes[i].due.is_none_or(|due| had < due))
            .collect();
        let planned: Vec<Planned> = made
            .iter()
            .map(|&i| (&writes[i], writes[i].written(now)))
            .collect();
        let written = many::write(&mut tx, &planned).await.map_err(interpret)?;
        let mut outcomes: Vec<WriteOutcome> = (refused.into_iter())
            .map(|r| r.map_or(WriteOutcome::Late, WriteOutcome::OverQuota))
            .collect();
        for (&i, written) in made.iter().zip(written) {
            outcomes[i] = match written {
                true => WriteOutcome::Written(now),
                false => {
                    let current = fetch(&mut tx, &writes[i].tenant, &writes[i].next.id).await?;
                    WriteOutcome::Stale(now, current.map(Box::new))
                }
            };
        }
        tx.commit().await.map_err(interpret)?;
        Ok(outcomes)
    }
}

/// The figures of the tenants whose writes are checked against a storage limit.
const USAGE: &str =
    "SELECT receipts, stored_bytes FROM tenant_usage WHERE tenant_id = ? AND slot = 0";

/// Which of `writes` would take their tenant over a storage limit (`usage::admit`), on the
/// figures as `tx` (holding the write lock) reads them.
async fn refusals(
    tx: &mut sqlx::SqliteConnection,
    writes: &[RowWrite],
) -> Result<Vec<Option<StorageRefusal>>, StoreError> {
    let all: Vec<&RowWrite> = writes.iter().collect();
    let tenants = usage::tenants(&all);
    if tenants.is_empty() {
        return Ok(writes.iter().map(|_| None).collect());
    }
    let mut figures = HashMap::new();
    for tenant in tenants {
        let found: Option<(i64, i64)> = sqlx::query_as(USAGE)
            .bind(&tenant)
            .fetch_optional(&mut *tx)
            .await
            .map_err(interpret)?;
        figures.insert(tenant, found.unwrap_or((0, 0)));
    }
    Ok(usage::admit(&all, &figures))
}
