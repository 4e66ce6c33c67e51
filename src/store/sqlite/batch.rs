//! A batch's reads and writes in SQLite: the reads on one reader connection; the writes in
//! one `BEGIN IMMEDIATE` transaction on the single writer, so a batch costs one commit (one
//! fsync) however many writes it holds. Inside it each write is one statement that applies
//! only while the row is absent (an insert, `ON CONFLICT DO NOTHING`) or still at the
//! version the write was decided from (an update); only a write that did not apply reads
//! the row, to report it. The clock is read once the write lock is had; a write whose
//! caller's answer is due by then is not made.

use super::rows::fetch;
use super::{SqliteDriver, interpret, micros};
use crate::domain::{Receipt, ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::write::{Expect, RowWrite, WriteOutcome};
use sqlx::Sqlite;
use tokio::time::Instant;

/// A new row: the holder columns `?1`–`?11`, the sealed ones, fingerprint, creation, life,
/// the write's id.
const INSERT: &str = "INSERT INTO receipts (tenant_id, namespace, key, state, attempt,
    free_attempts, claim_token, lease_expires_at, next_attempt_at, updated_at, completed_at,
    last_error, checkpoint, response, recovery_payload, fingerprint, created_at, life_id,
    write_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING";

/// An update: the holder columns `?1`–`?11`, and each sealed column whose bit is set in
/// `?12` (last error, checkpoint, response, recovery payload) to `?13`–`?16`; only while the
/// row is at the version `?17`–`?23` (and, when `?24` is set, its sealed columns are
/// `?25`–`?28`); the write's id `?29`.
const UPDATE: &str = "UPDATE receipts SET state = ?4, attempt = ?5, free_attempts = ?6,
    claim_token = ?7, lease_expires_at = ?8, next_attempt_at = ?9, updated_at = ?10,
    completed_at = ?11,
    last_error = CASE WHEN ?12 & 1 THEN ?13 ELSE last_error END,
    checkpoint = CASE WHEN ?12 & 2 THEN ?14 ELSE checkpoint END,
    response = CASE WHEN ?12 & 4 THEN ?15 ELSE response END,
    recovery_payload = CASE WHEN ?12 & 8 THEN ?16 ELSE recovery_payload END,
    write_id = ?29
    WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3
      AND life_id IS ?17 AND claim_token IS ?18 AND state = ?19 AND attempt = ?20
      AND free_attempts = ?21 AND updated_at = ?22 AND lease_expires_at IS ?23
      AND (NOT ?24 OR (last_error IS ?25 AND checkpoint IS ?26 AND response IS ?27
                       AND recovery_payload IS ?28))";

/// Binds `r`'s holder columns (`?1`–`?11`) to `sql`.
fn holder_columns<'q>(
    sql: &'static str,
    tenant: &'q str,
    r: &'q Receipt,
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(sql)
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

    async fn write_in_one(&self, writes: &[RowWrite]) -> Result<Vec<WriteOutcome>, StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(interpret)?;
        let mut outcomes = Vec::with_capacity(writes.len());
        for w in writes {
            if w.due.is_some_and(|due| Instant::now() >= due) {
                outcomes.push(WriteOutcome::Late);
                continue;
            }
            let now = self.clock.now();
            let r = w.written(now);
            let s = &w.sealed;
            let query = match &w.expect {
                Expect::Absent(life) => holder_columns(INSERT, &w.tenant, &r)
                    .bind(0_i64)
                    .bind(s.last_error.clone().flatten())
                    .bind(s.checkpoint.clone().flatten())
                    .bind(s.response.clone().flatten())
                    .bind(s.recovery_payload.clone().flatten())
                    .bind(r.fingerprint.clone())
                    .bind(micros(r.created_at))
                    .bind(life.to_vec())
                    .bind(w.id),
                Expect::Row(v) => {
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
                    holder_columns(UPDATE, &w.tenant, &r)
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
            };
            let done = query.execute(&mut *tx).await.map_err(interpret)?;
            if done.rows_affected() == 1 {
                outcomes.push(WriteOutcome::Written(now));
            } else {
                let current = fetch(&mut tx, &w.tenant, &w.next.id).await?;
                outcomes.push(WriteOutcome::Stale(now, current.map(Box::new)));
            }
        }
        tx.commit().await.map_err(interpret)?;
        Ok(outcomes)
    }
}
