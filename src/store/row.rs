//! Decoding a `receipts` row of either store into a domain receipt: the columns claimd
//! reads, and one row type generic over how the driver stores counts (PostgreSQL
//! `integer`, SQLite `INTEGER`) and times (`timestamptz`, microseconds since the epoch).

use crate::domain::{Receipt, ReceiptKey, State, Timestamp};
use crate::store::{StoreError, StoredBlobs};
use chrono::DateTime;
use uuid::Uuid;

/// The `receipts` columns claimd reads (without `tenant_id` and `due_at`), as a literal for
/// `concat!`.
macro_rules! columns {
    () => {
        "namespace, key, state, attempt, free_attempts, fingerprint, claim_token, \
         lease_expires_at, next_attempt_at, created_at, updated_at, completed_at, last_error, \
         checkpoint, response, recovery_payload, response_pruned_at, life_id, write_id"
    };
}
pub(crate) use columns;

/// A time as a driver stores it.
pub(crate) trait StoredTime {
    /// The time, or [`StoreError::Corrupt`] if it is out of range.
    fn into_time(self) -> Result<Timestamp, StoreError>;
}

impl StoredTime for Timestamp {
    fn into_time(self) -> Result<Timestamp, StoreError> {
        Ok(self)
    }
}

/// Microseconds since the epoch (SQLite).
impl StoredTime for i64 {
    fn into_time(self) -> Result<Timestamp, StoreError> {
        DateTime::from_timestamp_micros(self)
            .ok_or_else(|| StoreError::Corrupt(format!("timestamp {self} out of range")))
    }
}

fn opt_time<T: StoredTime>(time: Option<T>) -> Result<Option<Timestamp>, StoreError> {
    time.map(StoredTime::into_time).transpose()
}

/// One `receipts` row as a driver returns it: counts as `N`, times as `T`.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ReceiptRow<N, T> {
    namespace: String,
    key: String,
    state: String,
    attempt: N,
    free_attempts: N,
    fingerprint: Vec<u8>,
    claim_token: Option<Uuid>,
    lease_expires_at: Option<T>,
    next_attempt_at: Option<T>,
    created_at: T,
    updated_at: T,
    completed_at: Option<T>,
    last_error: Option<Vec<u8>>,
    checkpoint: Option<Vec<u8>>,
    response: Option<Vec<u8>>,
    recovery_payload: Option<Vec<u8>>,
    response_pruned_at: Option<T>,
    life_id: Option<Vec<u8>>,
    write_id: Option<Uuid>,
}

impl<N: TryInto<u32>, T: StoredTime> ReceiptRow<N, T> {
    /// The receipt without its sealed fields, and those fields as stored.
    pub(crate) fn into_parts(self) -> Result<(Receipt, StoredBlobs), StoreError> {
        let row = self;
        let state = State::parse(&row.state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown state {:?}", row.state)))?;
        let count = |n: N, what: &str| {
            n.try_into()
                .map_err(|_| StoreError::Corrupt(format!("{what} out of range")))
        };
        let blobs = StoredBlobs {
            last_error: row.last_error,
            checkpoint: row.checkpoint,
            response: row.response,
            recovery_payload: row.recovery_payload,
            life_id: row.life_id,
            write_id: row.write_id,
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
            created_at: row.created_at.into_time()?,
            updated_at: row.updated_at.into_time()?,
            completed_at: opt_time(row.completed_at)?,
            last_error: None,
            checkpoint: None,
            response: None,
            recovery_payload: None,
            response_pruned_at: opt_time(row.response_pruned_at)?,
        };
        Ok((receipt, blobs))
    }
}
