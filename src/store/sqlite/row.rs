//! SQLite's `receipts` rows: counts are `INTEGER`, times microseconds since the epoch.

use crate::domain::Timestamp;
pub(super) use crate::store::row::columns;

/// One `receipts` row as SQLite returns it.
pub(super) type ReceiptRow = crate::store::row::ReceiptRow<i64, i64>;

/// Microseconds since the epoch, as stored.
pub(super) fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}
