//! Rows in PostgreSQL: read one, read and write a batch's (the statements are in
//! `batch.rs`), and the reseal batch (rows locked in primary-key order, so a concurrent
//! holder action waits instead of being overwritten).

use super::{PgDriver, ReceiptRow, counted, interpret, size};
use crate::domain::{ReceiptKey, Timestamp};
use crate::seal::Sealer;
use crate::store::batch::Batcher;
use crate::store::driver::{Driver, Row};
use crate::store::reseal::ResealRow;
use crate::store::row::columns;
use crate::store::settles::Settles;
use crate::store::write::{RowWrite, WriteOutcome};
use crate::store::{ResealCursor, StoreError};
use async_trait::async_trait;
use sqlx::{FromRow, Postgres, Transaction};

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

const RESEAL_ROWS: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload, life_id, write_id FROM receipts
    WHERE $1::text IS NULL OR (tenant_id, namespace, key) > ($1, $2::text, $3::text)
    ORDER BY tenant_id, namespace, key
    LIMIT $4
    FOR UPDATE";

/// [`WRITE_SEALED`] without its count, for Citus, which routes no `INSERT` in a `WITH` to a
/// shard (storage quotas are not kept there yet).
const WRITE_SEALED_ROWS: &str = "UPDATE receipts SET last_error = $4, checkpoint = $5,
    response = $6, recovery_payload = $7 WHERE tenant_id = $1 AND namespace = $2 AND key = $3";

const WRITE_SEALED: &str = concat!(
    "WITH old AS (
    SELECT ",
    size!("r"),
    " AS bytes FROM receipts r WHERE tenant_id = $1 AND namespace = $2 AND key = $3),
w AS (
    UPDATE receipts SET last_error = $4, checkpoint = $5, response = $6, recovery_payload = $7
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3
    RETURNING tenant_id, ",
    size!("receipts"),
    " AS bytes),",
    counted!(
        "
        SELECT w.tenant_id, 0, w.bytes - old.bytes FROM w, old"
    ),
    "
SELECT count(*) FROM w"
);

/// A `receipts` row split into the receipt and its sealed fields as stored.
pub(super) fn row(row: &sqlx::postgres::PgRow) -> Result<Row, StoreError> {
    ReceiptRow::from_row(row).map_err(interpret)?.into_parts()
}

#[async_trait]
impl Driver for PgDriver {
    type Tx = Transaction<'static, Postgres>;

    fn system(&self) -> &'static str {
        "postgresql"
    }

    fn sealer(&self) -> &Sealer {
        &self.seal
    }

    fn batcher(&self) -> &Batcher {
        &self.batcher
    }

    fn settles(&self) -> &std::sync::Arc<Settles> {
        &self.settles
    }

    fn clock_estimate(&self) -> Timestamp {
        self.clock.now_from(self.gap.db_now())
    }

    async fn read(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Row>, StoreError> {
        let found = sqlx::query(GET)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .fetch_optional(&self.pool);
        let found = self
            .bounded(async { found.await.map_err(interpret) })
            .await?;
        found.as_ref().map(row).transpose()
    }

    async fn begin(&self) -> Result<Self::Tx, StoreError> {
        self.pool.begin().await.map_err(interpret)
    }

    async fn commit(&self, tx: Self::Tx) -> Result<(), StoreError> {
        crate::store::still_in_time()?;
        tx.commit().await.map_err(interpret)
    }

    async fn read_many(
        &self,
        keys: &[(&str, &ReceiptKey)],
    ) -> Result<Vec<(Timestamp, Option<Row>)>, StoreError> {
        if self.citus {
            return self.bounded(self.read_rows_citus(keys)).await;
        }
        self.bounded(self.read_rows(keys)).await
    }

    async fn write_many(&self, writes: &[RowWrite]) -> Result<Vec<WriteOutcome>, StoreError> {
        if self.citus {
            return self.bounded(self.write_rows_citus(writes)).await;
        }
        self.bounded(self.write_rows(writes)).await
    }

    async fn reseal_rows(
        &self,
        tx: &mut Self::Tx,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<Vec<ResealRow>, StoreError> {
        if self.citus {
            return self.reseal_rows_citus(tx, after, limit).await;
        }
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
        let sql = if self.citus {
            WRITE_SEALED_ROWS
        } else {
            WRITE_SEALED
        };
        sqlx::query(sql)
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
