//! PostgreSQL's `receipts` rows: counts are `integer`, times `timestamptz`.

pub(super) use crate::store::row::columns;

/// One `receipts` row as PostgreSQL returns it.
pub(super) type ReceiptRow = crate::store::row::ReceiptRow<i32, crate::domain::Timestamp>;
