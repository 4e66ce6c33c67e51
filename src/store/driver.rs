//! The driver boundary, River-style: the row operations a database backend provides. A
//! driver only runs statements and turns its errors into [`StoreError`] through its one
//! `interpret` function; it never decides anything. What is composed of these operations —
//! lock a row, apply the domain rule, seal, write back; open pages; reseal batches — is
//! written once, over any driver, in [`super::receipts`].
//!
//! A driver implements [`Driver`] (rows: one read, a batch's read and compare-and-set
//! writes, reseal transactions) and [`Pages`] (paged reads), and the roles that are its
//! statements alone: [`super::Retention`], [`super::Gauges`], [`super::Lifecycle`] and
//! [`KeyStore`]. Rows cross the boundary as a receipt without its sealed fields plus those
//! fields as stored ([`Row`]); only the common code opens or seals them. Every change of a
//! row goes through [`Driver::write_many`], which the group commit (`batch`, `rounds`)
//! calls with the writes of many callers at once.

use super::batch::Batcher;
use super::keys::KeyStore;
use super::settles::Settles;
use super::write::{RowWrite, WriteOutcome};
use super::{
    Gauges, Lifecycle, ListQuery, OrphanCursor, OrphanQuery, ResealCursor, Retention, StoreError,
    StoredBlobs, reseal::ResealRow,
};
use crate::domain::{Receipt, ReceiptKey, Timestamp};
use crate::seal::Sealer;
use async_trait::async_trait;
use std::sync::Arc;

/// A `receipts` row: the receipt without its sealed fields, and those fields as stored.
pub type Row = (Receipt, StoredBlobs);

/// The statements of one database backend. Every method is one statement (or one short
/// transaction the driver cannot split), scoped by tenant where a tenant is named, with
/// every time taken from the store's clock.
#[async_trait]
pub trait Driver: Pages + Retention + Gauges + Lifecycle + KeyStore + Clone + 'static {
    /// A write transaction (reseal's): rows it locked stay locked until
    /// [`Driver::commit`]; dropping it rolls back.
    type Tx: Send;

    /// The database, by the OpenTelemetry name of its system: `postgresql`, `sqlite`.
    fn system(&self) -> &'static str;

    /// The sealer of this store's payload columns.
    fn sealer(&self) -> &Sealer;

    /// The store's group commit (its clones share it).
    fn batcher(&self) -> &Batcher;

    /// The receipts waiting calls watch (its clones share them): woken by `rounds` once a
    /// settling write committed, and on PostgreSQL by other replicas' notifications.
    fn settles(&self) -> &Arc<Settles>;

    /// The store's clock now, as this process can tell without a statement: never ahead
    /// of it, and behind it by at most a round trip to the database.
    fn clock_estimate(&self) -> Timestamp;

    /// The row, read without a lock.
    async fn read(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Row>, StoreError>;

    /// Starts a write transaction.
    async fn begin(&self) -> Result<Self::Tx, StoreError>;

    /// Commits `tx`, unless the current call's deadline has passed
    /// ([`super::still_in_time`]): then `tx` rolls back and the call learns
    /// [`StoreError::DeadlinePassed`].
    async fn commit(&self, tx: Self::Tx) -> Result<(), StoreError>;

    /// The rows `keys` name (tenant, namespace and key), in their order, each with the
    /// store's clock when it was read; one statement (or one read transaction).
    async fn read_many(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError>;

    /// Makes each write that still applies (`super::write`), all in one transaction that
    /// has committed when this returns; what became of each, in order. The rows are
    /// distinct.
    async fn write_many(&self, writes: &[RowWrite]) -> Result<Vec<WriteOutcome>, StoreError>;

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
