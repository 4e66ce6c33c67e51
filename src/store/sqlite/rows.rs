//! Rows in transactions, in SQLite. A write transaction is `BEGIN IMMEDIATE` on the single
//! writer connection: it holds SQLite's write lock from the start, so what it reads cannot
//! change before it writes, and "locking" a row is reading it inside one. Claim answers a
//! duplicate from a reader, without touching the writer or the sealer; only when a write is
//! due does it take the writer, read again, decide again, seal what that write stores and
//! upsert.

use super::{ReceiptRow, SqliteDriver, interpret, micros};
use crate::domain::{
    ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Timestamp, Write, decide_claim,
};
use crate::seal::{Sealer, new_life};
use crate::store::driver::{Driver, Row};
use crate::store::reseal::ResealRow;
use crate::store::row::columns;
use crate::store::{ResealCursor, StoreError, StoredBlobs};
use async_trait::async_trait;
use sqlx::sqlite::SqliteConnection;
use sqlx::{FromRow, Sqlite, Transaction};

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3"
);

/// Claim's write: a new row (with its new life), or every column a takeover may change (the
/// life stays as it is).
const UPSERT: &str = "INSERT INTO receipts (tenant_id, namespace, key, state, attempt,
    free_attempts, claim_token, lease_expires_at, next_attempt_at, updated_at, completed_at,
    last_error, checkpoint, response, recovery_payload, fingerprint, created_at, life_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET state = excluded.state,
    attempt = excluded.attempt, free_attempts = excluded.free_attempts,
    claim_token = excluded.claim_token, lease_expires_at = excluded.lease_expires_at,
    next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at,
    completed_at = excluded.completed_at, last_error = excluded.last_error,
    checkpoint = excluded.checkpoint, response = excluded.response,
    recovery_payload = excluded.recovery_payload";

/// Every column a holder action or redrive changes; the sealed ones follow in [`WRITE`].
macro_rules! set_holder_columns {
    () => {
        "UPDATE receipts SET state = ?4, attempt = ?5, free_attempts = ?6, claim_token = ?7,
        lease_expires_at = ?8, next_attempt_at = ?9, updated_at = ?10, completed_at = ?11"
    };
}

/// A holder action's write: the holder columns and every sealed column.
const WRITE: &str = concat!(
    set_holder_columns!(),
    ", last_error = ?12, checkpoint = ?13, response = ?14, recovery_payload = ?15
    WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3"
);

/// Redrive's write: the holder columns only, the sealed ones left as stored.
const WRITE_UNSEALED: &str = concat!(
    set_holder_columns!(),
    " WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3"
);

const RESEAL_ROWS: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload, life_id FROM receipts
    WHERE ?1 IS NULL OR (tenant_id, namespace, key) > (?1, ?2, ?3)
    ORDER BY tenant_id, namespace, key
    LIMIT ?4";

const WRITE_SEALED: &str = "UPDATE receipts SET last_error = ?4, checkpoint = ?5, response = ?6,
    recovery_payload = ?7 WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3";

/// A `receipts` row split into the receipt and its sealed fields as stored.
pub(super) fn row(row: &sqlx::sqlite::SqliteRow) -> Result<Row, StoreError> {
    ReceiptRow::from_row(row).map_err(interpret)?.into_parts()
}

async fn fetch(
    conn: &mut SqliteConnection,
    tenant: &str,
    id: &ReceiptKey,
) -> Result<Option<Row>, StoreError> {
    let found = sqlx::query(GET)
        .bind(tenant)
        .bind(&id.namespace)
        .bind(&id.key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(interpret)?;
    found.as_ref().map(row).transpose()
}

/// The receipt, its sealed fields opened (or DATA_LOSS), and those fields as stored.
async fn fetch_open(
    conn: &mut SqliteConnection,
    seal: &Sealer,
    tenant: &str,
    id: &ReceiptKey,
) -> Result<Option<Row>, StoreError> {
    let Some((mut receipt, blobs)) = fetch(conn, tenant, id).await? else {
        return Ok(None);
    };
    blobs.open_into(seal, tenant, &mut receipt)?;
    Ok(Some((receipt, blobs)))
}

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

#[async_trait]
impl Driver for SqliteDriver {
    type Tx = Transaction<'static, Sqlite>;

    fn sealer(&self) -> &Sealer {
        &self.seal
    }

    async fn claim_row(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        let current = fetch_open(&mut reader, &self.seal, tenant, &input.id).await?;
        drop(reader);
        let outcome = decide_claim(
            current.map(|c| c.0).as_ref(),
            input,
            self.clock.now(),
            policy,
        );
        if outcome.write == Write::None {
            return Ok(outcome);
        }
        let mut tx = self.begin().await?;
        let current = fetch_open(&mut tx, &self.seal, tenant, &input.id).await?;
        let now = self.clock.now();
        let outcome = decide_claim(current.as_ref().map(|c| &c.0), input, now, policy);
        let r = &outcome.receipt;
        // Only what this write stores is sealed: a new row's values under its new life; a
        // takeover or budget quarantine seals only the fields it changes.
        let blobs = match (&outcome.write, &current) {
            (Write::None, _) => None,
            (Write::Insert, _) => Some(StoredBlobs::insert(&self.seal, tenant, r, new_life())),
            (Write::Update, Some((before, stored))) => Some(
                stored
                    .changed(&self.seal, tenant, before, r)
                    .unwrap_or_else(|| stored.clone()),
            ),
            (Write::Update, None) => {
                return Err(StoreError::Corrupt(
                    "an update decided without a row".into(),
                ));
            }
        };
        if let Some(blobs) = blobs {
            holder_columns(UPSERT, tenant, r)
                .bind(&blobs.last_error)
                .bind(&blobs.checkpoint)
                .bind(&blobs.response)
                .bind(&blobs.recovery_payload)
                .bind(&r.fingerprint)
                .bind(micros(r.created_at))
                .bind(&blobs.life_id)
                .execute(&mut *tx)
                .await
                .map_err(interpret)?;
        }
        self.commit(tx).await?;
        Ok(outcome)
    }

    async fn read(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Row>, StoreError> {
        let mut reader = self.reader.acquire().await.map_err(interpret)?;
        fetch(&mut reader, tenant, id).await
    }

    async fn begin(&self) -> Result<Self::Tx, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(interpret)
    }

    async fn commit(&self, tx: Self::Tx) -> Result<(), StoreError> {
        crate::store::still_in_time()?;
        tx.commit().await.map_err(interpret)
    }

    async fn lock(
        &self,
        tx: &mut Self::Tx,
        tenant: &str,
        id: &ReceiptKey,
    ) -> Result<Option<(Timestamp, Row)>, StoreError> {
        let found = fetch(tx, tenant, id).await?;
        Ok(found.map(|row| (self.clock.now(), row)))
    }

    async fn write(
        &self,
        tx: &mut Self::Tx,
        tenant: &str,
        r: &Receipt,
        sealed: Option<&StoredBlobs>,
    ) -> Result<(), StoreError> {
        let query = match sealed {
            Some(blobs) => holder_columns(WRITE, tenant, r)
                .bind(&blobs.last_error)
                .bind(&blobs.checkpoint)
                .bind(&blobs.response)
                .bind(&blobs.recovery_payload),
            None => holder_columns(WRITE_UNSEALED, tenant, r),
        };
        query.execute(&mut **tx).await.map_err(interpret)?;
        Ok(())
    }

    async fn reseal_rows(
        &self,
        tx: &mut Self::Tx,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<Vec<ResealRow>, StoreError> {
        let rows = sqlx::query(RESEAL_ROWS)
            .bind(after.map(|c| c.tenant.as_str()))
            .bind(after.map(|c| c.namespace.as_str()))
            .bind(after.map(|c| c.key.as_str()))
            .bind(i64::from(limit))
            .fetch_all(&mut **tx)
            .await
            .map_err(interpret)?;
        let rows = rows.iter().map(ResealRow::from_row);
        rows.collect::<Result<_, _>>().map_err(interpret)
    }

    async fn write_sealed(&self, tx: &mut Self::Tx, row: &ResealRow) -> Result<(), StoreError> {
        sqlx::query(WRITE_SEALED)
            .bind(&row.id.tenant)
            .bind(&row.id.namespace)
            .bind(&row.id.key)
            .bind(&row.blobs.last_error)
            .bind(&row.blobs.checkpoint)
            .bind(&row.blobs.response)
            .bind(&row.blobs.recovery_payload)
            .execute(&mut **tx)
            .await
            .map_err(interpret)?;
        Ok(())
    }
}
