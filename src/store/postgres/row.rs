//! Decoding PostgreSQL rows into domain receipts.

use crate::domain::{Receipt, ReceiptKey, State, Timestamp};
use crate::store::{StoreError, StoredBlobs};
use uuid::Uuid;

/// The `receipts` columns claimd reads (without `tenant_id` and `due_at`), as a literal for
/// `concat!`.
macro_rules! columns {
    () => {
        "namespace, key, state, attempt, free_attempts, fingerprint, claim_token, \
         lease_expires_at, next_attempt_at, created_at, updated_at, completed_at, last_error, \
         checkpoint, response, recovery_payload"
    };
}
pub(super) use columns;

/// One `receipts` row as PostgreSQL returns it.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ReceiptRow {
    namespace: String,
    key: String,
    state: String,
    attempt: i32,
    free_attempts: i32,
    fingerprint: Vec<u8>,
    claim_token: Option<Uuid>,
    lease_expires_at: Option<Timestamp>,
    next_attempt_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Option<Timestamp>,
    last_error: Option<Vec<u8>>,
    checkpoint: Option<Vec<u8>>,
    response: Option<Vec<u8>>,
    recovery_payload: Option<Vec<u8>>,
}

impl ReceiptRow {
    /// The receipt without its sealed fields, and those fields as stored.
    pub(super) fn into_parts(self) -> Result<(Receipt, StoredBlobs), StoreError> {
        let row = self;
        let state = State::parse(&row.state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown state {:?}", row.state)))?;
        let count = |n: i32, what: &str| {
            u32::try_from(n).map_err(|_| StoreError::Corrupt(format!("negative {what}")))
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
            lease_expires_at: row.lease_expires_at,
            next_attempt_at: row.next_attempt_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
            completed_at: row.completed_at,
            last_error: None,
            checkpoint: None,
            response: None,
            recovery_payload: None,
        };
        Ok((receipt, blobs))
    }
}
