//! A batch's reads and writes in SQLite: the reads on one reader connection; the writes in
//! one `BEGIN IMMEDIATE` transaction on the single writer, so a batch costs one commit (one
//! fsync) however many writes it holds. Inside it the inserts and the updates are each a
//! few multi-row statements (`many`): an insert applies only while its row is absent
//! (`ON CONFLICT DO NOTHING`), an update only while its row is still at the version the
//! write was decided from; only a write that did not apply reads the row, to report it.
//! The clock is read once, when the write lock is had: every write of the batch is stamped
//! with that reading, and a write whose caller's answer is due by then is not made.

use super::many::{self, Planned};
use super::rows::fetch;
use super::{SqliteDriver, interpret};
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::write::{RowWrite, WriteOutcome};
use tokio::time::Instant;

impl SqliteDriver {
    /// The rows, in the order of `keys`, each with the clock when it was read.
    pub(super) async fn read_rows(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        let mut rows = Vec::with_capacity(keys.len());
        for (tenant, id) in keys {
            let row = fetch(&mut reader, tenant, id).await?;
            rows.push((self.clock.now(), row));
        }
        Ok(rows)
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
        let made: Vec<usize> = (0..writes.len())
            .filter(|&i| writes[i].due.is_none_or(|due| had < due))
            .collect();
        let planned: Vec<Planned> = made
            .iter()
            .map(|&i| (&writes[i], writes[i].written(now)))
            .collect();
        let written = many::write(&mut tx, &planned).await.map_err(interpret)?;
        let mut outcomes: Vec<WriteOutcome> = writes.iter().map(|_| WriteOutcome::Late).collect();
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
