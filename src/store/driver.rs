//! The driver boundary, River-style: the row operations a database backend provides. A
//! driver only runs statements and turns its errors into [`StoreError`] through its one
//! `interpret` function; it never decides anything. What is composed of these operations —
//! lock a row, apply the domain rule, seal, write back; open pages; reseal batches — is
//! written once, over any driver, in [`super::receipts`].
//!
//! A driver implements [`Driver`] (rows in transactions) and [`Pages`] (paged reads), and
//! the roles that are its statements alone: [`super::Retention`], [`super::Gauges`],
//! [`super::Lifecycle`] and [`KeyStore`]. Rows cross the boundary as a receipt without its
//! sealed fields plus those fields as stored ([`Row`]); only [`super::receipts`] opens or
//! seals them. The exception is [`Driver::claim_row`], the hot path: each backend decides a
//! Claim its own way (PostgreSQL with a read and, when a write is due, one statement;
//! SQLite with a read and, when a write is due, its single writer), with the sealer it
//! holds, sealing only what that write stores.

use super::keys::KeyStore;
use super::{
    Gauges, Lifecycle, ListQuery, OrphanCursor, OrphanQuery, ResealCursor, Retention, StoreError,
    StoredBlobs, reseal::ResealRow,
};
use crate::domain::{ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Timestamp};
use crate::seal::Sealer;
use async_trait::async_trait;

/// A `receipts` row: the receipt without its sealed fields, and those fields as stored.
pub type Row = (Receipt, StoredBlobs);

/// The statements of one database backend. Every method is one statement (or one short
/// transaction the driver cannot split), scoped by tenant where a tenant is named, with
/// every time taken from the store's clock.
#[async_trait]
pub trait Driver: Pages + Retention + Gauges + Lifecycle + KeyStore + 'static {
    /// A write transaction: rows it locked stay locked until [`Driver::commit`]; dropping
    /// it rolls back.
    type Tx: Send;

    /// The sealer of this store's payload columns.
    fn sealer(&self) -> &Sealer;

    /// Decides and records a Claim (`docs/DESIGN.md` §2): a duplicate writes nothing.
    async fn claim_row(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError>;

    /// The row, read without a lock.
    async fn read(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Row>, StoreError>;

    /// Starts a write transaction.
    async fn begin(&self) -> Result<Self::Tx, StoreError>;

    /// Commits `tx`, unless the current call's deadline has passed
    /// ([`super::still_in_time`]): then `tx` rolls back and the call learns
    /// [`StoreError::DeadlinePassed`].
    async fn commit(&self, tx: Self::Tx) -> Result<(), StoreError>;

    /// Locks the row for the rest of `tx` and reads it, with the store's clock.
    async fn lock(
        &self,
        tx: &mut Self::Tx,
        tenant: &str,
        id: &ReceiptKey,
    ) -> Result<Option<(Timestamp, Row)>, StoreError>;

    /// Writes `receipt` over its locked row: every column a holder action or redrive may
    /// change, and the sealed columns as `sealed` (`None` leaves them exactly as stored).
    /// Never changes the row's `life_id`.
    async fn write(
        &self,
        tx: &mut Self::Tx,
        tenant: &str,
        receipt: &Receipt,
        sealed: Option<&StoredBlobs>,
    ) -> Result<(), StoreError>;

    /// Up to `limit` rows of every tenant after `after` in primary-key order, locked for
    /// the rest of `tx`, with their sealed columns and life ids.
    async fn reseal_rows(
        &self,
        tx: &mut Self::Tx,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<Vec<ResealRow>, StoreError>;

    /// Writes the sealed columns of `row`.
    async fn write_sealed(&self, tx: &mut Self::Tx, row: &ResealRow) -> Result<(), StoreError>;
}

/// The paged reads of one backend (and the one write ListOrphaned may make).
#[async_trait]
pub trait Pages: Send + Sync {
    /// Up to `query.limit + 1` of the tenant's receipts in (namespace, key) order.
    async fn list_rows(&self, tenant: &str, query: &ListQuery) -> Result<Vec<Row>, StoreError>;

    /// Up to `limit` of the tenant's receipts due by the query (its namespace,
    /// `overdue_by`), after `after`, in (due_at, namespace, key) order.
    async fn orphan_rows(
        &self,
        tenant: &str,
        query: &OrphanQuery,
        after: Option<&OrphanCursor>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError>;

    /// Quarantines `receipt` with `error` (sealed) as its last error, only if the row is
    /// still as it was read (`blobs` and the holder columns), leaving its other sealed
    /// fields as they are.
    async fn quarantine_unreadable(
        &self,
        tenant: &str,
        receipt: &Receipt,
        blobs: &StoredBlobs,
        error: &[u8],
    ) -> Result<(), StoreError>;
}
