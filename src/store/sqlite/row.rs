//! Decoding SQLite rows into domain receipts and binding receipts for the upsert.

use crate::domain::{Receipt, ReceiptKey, State, Timestamp};
use crate::store::{StoreError, StoredBlobs};
use chrono::DateTime;
use uuid::Uuid;

/// The `receipts` columns claimd reads, as a literal for `concat!`.
macro_rules! columns {
    () => {
        "namespace, key, state, attempt, free_attempts, fingerprint, claim_token, \
         lease_expires_at, next_attempt_at, created_at, updated_at, completed_at, last_error, \
         checkpoint, response, recovery_payload"
    };
}
pub(super) use columns;

/// One `receipts` row as SQLite returns it.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ReceiptRow {
    namespace: String,
    key: String,
    state: String,
    attempt: i64,
    free_attempts: i64,
    fingerprint: Vec<u8>,
    claim_token: Option<Uuid>,
    lease_expires_at: Option<i64>,
    next_attempt_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    completed_at: Option<i64>,
    last_error: Option<Vec<u8>>,
    checkpoint: Option<Vec<u8>>,
    response: Option<Vec<u8>>,
    recovery_payload: Option<Vec<u8>>,
}

/// Microseconds since the epoch, as stored.
pub(super) fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

fn time(micros: i64) -> Result<Timestamp, StoreError> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {micros} out of range")))
}

fn opt_time(micros: Option<i64>) -> Result<Option<Timestamp>, StoreError> {
    micros.map(time).transpose()
}

impl ReceiptRow {
    /// The receipt without its sealed fields, and those fields as stored.
    pub(super) fn into_parts(self) -> Result<(Receipt, StoredBlobs), StoreError> {
        let row = self;
        let state = State::parse(&row.state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown state {:?}", row.state)))?;
        let count = |n: i64, what: &str| {
            u32::try_from(n).map_err(|_| StoreError::Corrupt(format!("{what} out of range")))
        };
        let blobs = StoredBlobs {
            last_error: row.last_error,
            checkpoint: row.checkpoint,
            response: row.response,
            recovery_payload: row.recovery_payload,
        };
        let receipt = Receipt {
            id: ReceiptKey {
                namespace: row.namespace,
                key: row.key,
            },
            state,
            attempt: count(row.attempt, "attempt")?,
            free_attempts: count(row.free_attempts, "free_attempts")?,
            fingerprint: row.fingerprint,
            claim_token: row.claim_token,
            lease_expires_at: opt_time(row.lease_expires_at)?,
            next_attempt_at: opt_time(row.next_attempt_at)?,
            created_at: time(row.created_at)?,
            updated_at: time(row.updated_at)?,
            completed_at: opt_time(row.completed_at)?,
            last_error: None,
            checkpoint: None,
            response: None,
            recovery_payload: None,
        };
        Ok((receipt, blobs))
    }
}
