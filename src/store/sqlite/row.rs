//! SQLite's `receipts` rows: counts are `INTEGER`, times microseconds since the epoch.
//! Reading a receipt (opening its sealed fields) and writing one (sealing them).

use super::interpret;
use crate::domain::{Receipt, ReceiptKey, Timestamp};
use crate::seal::Sealer;
use crate::store::{StoreError, StoredBlobs};
use sqlx::FromRow;
use sqlx::sqlite::SqliteConnection;

pub(super) use crate::store::row::columns;

/// One `receipts` row as SQLite returns it.
pub(super) type ReceiptRow = crate::store::row::ReceiptRow<i64, i64>;

/// Microseconds since the epoch, as stored.
pub(super) fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = ?1 AND namespace = ?2 AND key = ?3"
);

const UPSERT: &str = "INSERT INTO receipts (tenant_id, namespace, key, state, attempt,
    free_attempts, fingerprint, claim_token, lease_expires_at, next_attempt_at, created_at,
    updated_at, completed_at, last_error, checkpoint, response, recovery_payload)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
    ON CONFLICT (tenant_id, namespace, key) DO UPDATE SET state = excluded.state,
    attempt = excluded.attempt, free_attempts = excluded.free_attempts,
    claim_token = excluded.claim_token, lease_expires_at = excluded.lease_expires_at,
    next_attempt_at = excluded.next_attempt_at, updated_at = excluded.updated_at,
    completed_at = excluded.completed_at, last_error = excluded.last_error,
    checkpoint = excluded.checkpoint, response = excluded.response,
    recovery_payload = excluded.recovery_payload";

/// The receipt, its sealed fields opened (or DATA_LOSS).
pub(super) async fn fetch(
    conn: &mut SqliteConnection,
    seal: &Sealer,
    tenant: &str,
    id: &ReceiptKey,
) -> Result<Option<Receipt>, StoreError> {
    let row = sqlx::query(GET)
        .bind(tenant)
        .bind(&id.namespace)
        .bind(&id.key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(interpret)?;
    row.map(|r| decode(seal, tenant, &r)).transpose()
}

/// A `receipts` row as a receipt of `tenant`, its sealed fields opened.
fn decode(
    seal: &Sealer,
    tenant: &str,
    row: &sqlx::sqlite::SqliteRow,
) -> Result<Receipt, StoreError> {
    let (mut receipt, blobs) = ReceiptRow::from_row(row).map_err(interpret)?.into_parts()?;
    blobs.open_into(seal, tenant, &mut receipt)?;
    Ok(receipt)
}

/// Writes `r`, its payload fields sealed for its row.
pub(super) async fn upsert(
    conn: &mut SqliteConnection,
    seal: &Sealer,
    tenant: &str,
    r: &Receipt,
) -> Result<(), StoreError> {
    let blobs = StoredBlobs::seal(seal, tenant, r);
    sqlx::query(UPSERT)
        .bind(tenant)
        .bind(&r.id.namespace)
        .bind(&r.id.key)
        .bind(r.state.as_str())
        .bind(i64::from(r.attempt))
        .bind(i64::from(r.free_attempts))
        .bind(&r.fingerprint)
        .bind(r.claim_token)
        .bind(r.lease_expires_at.map(micros))
        .bind(r.next_attempt_at.map(micros))
        .bind(micros(r.created_at))
        .bind(micros(r.updated_at))
        .bind(r.completed_at.map(micros))
        .bind(&blobs.last_error)
        .bind(&blobs.checkpoint)
        .bind(&blobs.response)
        .bind(&blobs.recovery_payload)
        .execute(&mut *conn)
        .await
        .map_err(interpret)?;
    Ok(())
}
