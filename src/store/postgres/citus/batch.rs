//! A batch's read and write on Citus (docs/DESIGN.md §4.6), one tenant per statement: the
//! batch holds one tenant's jobs (`Batcher::one_tenant_per_batch`), and a read or write
//! given several tenants anyway runs one statement (one transaction) per tenant. The write
//! is the transaction `writes/citus.rs` describes; the wake-up of waiting Claims is sent on
//! the coordinator once it has committed.

use super::super::arrays::Arrays;
use super::super::batch::found;
use super::super::{PgDriver, interpret, writes};
use crate::domain::{ReceiptKey, Timestamp};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::settles::Mark;
use crate::store::write::{Expect, RowWrite, WriteOutcome};
use sqlx::Row as _;
use sqlx::postgres::PgRow;

/// Most rows of one `INSERT … VALUES` (PostgreSQL takes at most 65,535 parameters).
const INSERT_ROWS: usize = 1000;

/// The positions of `tenants`' items, grouped by tenant in order of first appearance.
fn by_tenant<'a>(tenants: impl Iterator<Item = &'a str>) -> Vec<(&'a str, Vec<usize>)> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (n, tenant) in tenants.enumerate() {
        match groups.iter_mut().find(|(t, _)| *t == tenant) {
            Some((_, group)) => group.push(n),
            None => groups.push((tenant, vec![n])),
        }
    }
    groups
}

fn idx(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl PgDriver {
    /// The rows, in the order of `keys`, one statement per tenant.
    pub(in crate::store::postgres) async fn read_rows_citus(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        let mut out: Vec<Option<(Timestamp, Option<Row>)>> =
            (0..keys.len()).map(|_| None).collect();
        for (tenant, group) in by_tenant(keys.iter().map(|(t, _)| *t)) {
            let rows = self.read_tenant(&self.pool, tenant, &group, keys).await?;
            for (n, row) in group.into_iter().zip(rows) {
                out[n] = Some(row);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// `tenant`'s rows at positions `group` of `keys`, through `conn`.
    async fn read_tenant<'c, E: sqlx::PgExecutor<'c>>(
        &self,
        conn: E,
        tenant: &str,
        group: &[usize],
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        let rows = sqlx::query(writes::READ_TENANT)
            .bind((0..group.len()).map(idx).collect::<Vec<_>>())
            .bind(tenant)
            .bind(
                group
                    .iter()
                    .map(|&n| keys[n].1.namespace.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                group
                    .iter()
                    .map(|&n| keys[n].1.key.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(self.offset())
            .bind(self.frozen())
            .fetch_all(conn)
            .await
            .map_err(interpret)?;
        if let Some(row) = rows.last() {
            self.gap.observe(row.try_get("db_wall").map_err(interpret)?);
        }
        rows.iter()
            .map(|row| Ok((row.try_get("db_now").map_err(interpret)?, found(row)?)))
            .collect()
    }

    /// Makes every write it can, one transaction per tenant; what became of each, in order.
    pub(in crate::store::postgres) async fn write_rows_citus(
        &self,
        writes: &[RowWrite],
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        // `tenant_usage` is not kept on Citus yet (no `INSERT` in a routed `WITH`): a
        // storage limit there would count nothing, so a write it would check is refused.
        if writes.iter().any(crate::store::usage::checked) {
            return Err(StoreError::Unsupported(
                "max_receipts and max_stored_bytes are not supported on Citus yet: remove them \
                 from the policy file's [tenants] sections; nothing was written",
            ));
        }
        let mut out: Vec<Option<WriteOutcome>> = (0..writes.len()).map(|_| None).collect();
        for (_, group) in by_tenant(writes.iter().map(|w| w.tenant.as_str())) {
            let picked: Vec<RowWrite> = group.iter().map(|&n| writes[n].clone()).collect();
            let outcomes = self.write_tenant(&picked).await?;
            for (n, outcome) in group.into_iter().zip(outcomes) {
                out[n] = Some(outcome);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// One tenant's writes: statements 1–3 of `writes/citus.rs` in one transaction, then
    /// the wake-up on the coordinator.
    async fn write_tenant(&self, writes: &[RowWrite]) -> Result<Vec<WriteOutcome>, StoreError> {
        let tenant = writes[0].tenant.as_str();
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by(|&a, &b| {
            let key = |w: &RowWrite| (w.next.id.namespace.clone(), w.next.id.key.clone());
            key(&writes[a]).cmp(&key(&writes[b]))
        });
        let mut conn = self.pool.acquire().await.map_err(interpret)?;
        let mut arrays = Arrays::default();
        for &n in &order {
            arrays.push(n, &writes[n], &self.gap);
        }
        let statement = &*writes::LOCK;
        let query = sqlx::query(statement.sql.as_str())
            .bind(self.offset())
            .bind(self.frozen());
        let query = (statement.cols.iter()).fold(query, |q, &col| arrays.bind(q, col));
        let done = async {
            // A transaction sqlx knows of: dropped unfinished (the bound ran out), it is
            // rolled back before the connection serves again.
            let mut tx = sqlx::Connection::begin(&mut *conn)
                .await
                .map_err(interpret)?;
            let rows = query.bind(tenant).fetch_all(&mut *tx).await;
            let rows = rows.map_err(interpret)?;
            let mut outcomes: Vec<Option<WriteOutcome>> = (0..writes.len()).map(|_| None).collect();
            let (mut go, mut put) = (Vec::new(), Vec::new());
            for row in &rows {
                let n: i32 = row.try_get("idx").map_err(interpret)?;
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                outcomes[n] = Some(outcome(row, &mut go, &mut put, n)?);
            }
            if let Some(row) = rows.last() {
                self.gap.observe(row.try_get("db_wall").map_err(interpret)?);
            }
            self.update(&mut tx, writes, &go, &mut outcomes).await?;
            self.insert(&mut tx, writes, &put, &mut outcomes).await?;
            tx.commit().await.map_err(interpret)?;
            Ok::<_, StoreError>(outcomes)
        };
        let outcomes = match done.await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                if let StoreError::ReadOnly(_) = &e {
                    self.read_only.seen();
                    conn.close_on_drop();
                }
                return Err(e);
            }
        };
        let outcomes: Vec<WriteOutcome> = outcomes.into_iter().flatten().collect();
        self.wake(&mut conn, writes, &outcomes).await;
        Ok(outcomes)
    }

    /// Statement 2: the updates `go` (position, the clock after the locks), each answered
    /// `Written`; one that found no row (it was locked: this does not happen) is answered
    /// `Stale` with the row as read again.
    async fn update(
        &self,
        conn: &mut sqlx::PgConnection,
        writes: &[RowWrite],
        go: &[(usize, Timestamp)],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<(), StoreError> {
        if go.is_empty() {
            return Ok(());
        }
        let tenant = writes[go[0].0].tenant.as_str();
        let col = |f: &dyn Fn(&RowWrite, Timestamp) -> Option<Timestamp>| -> Vec<_> {
            go.iter().map(|&(n, now)| f(&writes[n], now)).collect()
        };
        let of = |n: usize| &writes[n];
        let ws = || go.iter().map(|&(n, _)| of(n));
        let count = |c: u32| i32::try_from(c).unwrap_or(i32::MAX);
        let blob = |bit: usize| -> Vec<Option<Vec<u8>>> {
            ws().map(|w| w.sealed.columns()[bit].clone().flatten())
                .collect()
        };
        let made = sqlx::query(writes::UPDATE_ROWS)
            .bind(tenant)
            .bind(
                ws().map(|w| w.next.id.namespace.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(ws().map(|w| w.next.id.key.as_str()).collect::<Vec<_>>())
            .bind(ws().map(|w| w.next.state.as_str()).collect::<Vec<_>>())
            .bind(ws().map(|w| count(w.next.attempt)).collect::<Vec<_>>())
            .bind(
                ws().map(|w| count(w.next.free_attempts))
                    .collect::<Vec<_>>(),
            )
            .bind(ws().map(|w| w.next.claim_token).collect::<Vec<_>>())
            .bind(col(&|w, now| w.lease_expires_at.resolve(now)))
            .bind(col(&|w, now| w.next_attempt_at.resolve(now)))
            .bind(col(&|w, now| w.completed_at.resolve(now)))
            .bind(col(&|_, now| Some(now)))
            .bind(ws().map(|w| w.sealed.mask()).collect::<Vec<_>>())
            .bind(blob(0))
            .bind(blob(1))
            .bind(blob(2))
            .bind(blob(3))
            .bind(ws().map(|w| w.id).collect::<Vec<_>>())
            .fetch_all(&mut *conn)
            .await
            .map_err(interpret)?;
        self.settle(conn, writes, go, &made, outcomes).await
    }

    /// What became of the writes `done` (position, clock) that a statement answered `made`
    /// (the namespace and key of each row it wrote): `Written`, or, for one it did not
    /// write (an insert whose row exists), `Stale` with the row as read again.
    async fn settle(
        &self,
        conn: &mut sqlx::PgConnection,
        writes: &[RowWrite],
        done: &[(usize, Timestamp)],
        made: &[PgRow],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<(), StoreError> {
        let mut made: Vec<(String, String)> = (made.iter())
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(interpret)?;
        made.sort();
        let mut found = Vec::new();
        for &(n, now) in done {
            let id = &writes[n].next.id;
            match made.binary_search(&(id.namespace.clone(), id.key.clone())) {
                Ok(_) => outcomes[n] = Some(WriteOutcome::Written(now)),
                Err(_) => found.push(n),
            }
        }
        if let Some(&first) = found.first() {
            let keys: Vec<(&str, &crate::domain::ReceiptKey)> = (writes.iter())
                .map(|w| (w.tenant.as_str(), &w.next.id))
                .collect();
            let tenant = writes[first].tenant.as_str();
            let rows = self.read_tenant(&mut *conn, tenant, &found, &keys).await?;
            for (n, (now, row)) in found.into_iter().zip(rows) {
                outcomes[n] = Some(WriteOutcome::Stale(now, row.map(Box::new)));
            }
        }
        Ok(())
    }

    /// Statement 3 and 4: the inserts `put` (position, the clock after the locks), each
    /// answered `Written` or, when its row exists, `Stale` with the row.
    async fn insert(
        &self,
        conn: &mut sqlx::PgConnection,
        writes: &[RowWrite],
        put: &[(usize, Timestamp)],
        outcomes: &mut [Option<WriteOutcome>],
    ) -> Result<(), StoreError> {
        for chunk in put.chunks(INSERT_ROWS) {
            let sql = writes::insert(chunk.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
            for &(n, now) in chunk {
                let w = &writes[n];
                let life = match &w.expect {
                    Expect::Absent(life) => Some(life.to_vec()),
                    Expect::Row(v) => v.life_id.clone(),
                };
                query = query
                    .bind(w.tenant.clone())
                    .bind(w.next.id.namespace.clone())
                    .bind(w.next.id.key.clone())
                    .bind(w.next.state.as_str())
                    .bind(i32::try_from(w.next.attempt).unwrap_or(i32::MAX))
                    .bind(i32::try_from(w.next.free_attempts).unwrap_or(i32::MAX))
                    .bind(w.next.fingerprint.clone())
                    .bind(w.next.claim_token)
                    .bind(w.lease_expires_at.resolve(now))
                    .bind(w.next_attempt_at.resolve(now))
                    .bind(now)
                    .bind(now)
                    .bind(w.completed_at.resolve(now))
                    .bind(w.sealed.last_error.clone().flatten())
                    .bind(w.sealed.checkpoint.clone().flatten())
                    .bind(w.sealed.response.clone().flatten())
                    .bind(w.sealed.recovery_payload.clone().flatten())
                    .bind(life)
                    .bind(w.id);
            }
            let made = query.fetch_all(&mut *conn).await.map_err(interpret)?;
            self.settle(conn, writes, chunk, &made, outcomes).await?;
        }
        Ok(())
    }

    /// Wakes the Claims waiting on the receipts these writes settled, on the coordinator
    /// (the connection is back out of its transaction). A wake-up that fails is only
    /// logged: a waiter also wakes at its holder's lease end and at its wait's end.
    async fn wake(
        &self,
        conn: &mut sqlx::PgConnection,
        writes: &[RowWrite],
        outcomes: &[WriteOutcome],
    ) {
        let marks: Vec<String> = (writes.iter().zip(outcomes))
            .filter(|(w, o)| w.settles() && matches!(o, WriteOutcome::Written(_)))
            .map(|(w, _)| Mark::of(&w.tenant, &w.next.id).to_hex())
            .collect();
        for part in marks.chunks(400) {
            let sent = sqlx::query(writes::NOTIFY)
                .bind(part.join(","))
                .execute(&mut *conn)
                .await;
            if let Err(error) = sent {
                tracing::debug!(%error, "could not notify settled receipts on the coordinator");
            }
        }
    }
}

/// What statement 1 says of one write; an update (`go`) or insert (`put`) to make is noted
/// with its clock.
fn outcome(
    row: &PgRow,
    go: &mut Vec<(usize, Timestamp)>,
    put: &mut Vec<(usize, Timestamp)>,
    n: usize,
) -> Result<WriteOutcome, StoreError> {
    let src: &str = row.try_get("src").map_err(interpret)?;
    let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
    Ok(match src {
        "go" => {
            go.push((n, now));
            // Answered by statement 2.
            WriteOutcome::Late
        }
        "late" => WriteOutcome::Late,
        "put" => {
            put.push((n, now));
            // Answered by statement 2 or 3.
            WriteOutcome::Late
        }
        _ => WriteOutcome::Stale(now, found(row)?.map(Box::new)),
    })
}
