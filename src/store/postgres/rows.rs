//! Rows in transactions, in PostgreSQL: read, lock (`SELECT … FOR UPDATE`, with the clock),
//! write back, and the reseal batch (rows locked in primary-key order, so a concurrent
//! holder action waits instead of being overwritten).

use super::{PgDriver, ReceiptRow, clock, interpret};
use crate::domain::{ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Timestamp};
use crate::seal::Sealer;
use crate::store::driver::{Driver, Row};
use crate::store::reseal::ResealRow;
use crate::store::row::columns;
use crate::store::{ResealCursor, StoreError, StoredBlobs};
use async_trait::async_trait;
use sqlx::{FromRow, Postgres, Transaction};

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

/// Locks the row, then reads the clock: the outer SELECT is evaluated only once the
/// materialized CTE has the lock, so a holder's new lease runs from when the row was had,
/// not from when the call started waiting for it.
const LOCK: &str = concat!(
    "WITH locked AS MATERIALIZED (SELECT ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3 FOR UPDATE)
    SELECT ",
    clock!(after_lock: "$5", "$4"),
    " AS db_now, locked.* FROM locked"
);

/// Every column a holder action or redrive changes; the sealed ones follow in [`WRITE`].
macro_rules! set_holder_columns {
    () => {
        "UPDATE receipts SET state = $4, attempt = $5, free_attempts = $6, claim_token = $7,
        lease_expires_at = $8, next_attempt_at = $9, updated_at = $10, completed_at = $11"
    };
}

/// A holder action's write: the holder columns and every sealed column.
const WRITE: &str = concat!(
    set_holder_columns!(),
    ", last_error = $12, checkpoint = $13, response = $14, recovery_payload = $15
    WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

/// Redrive's write: the holder columns only, the sealed ones left as stored.
const WRITE_UNSEALED: &str = concat!(
    set_holder_columns!(),
    " WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

const RESEAL_ROWS: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload, life_id FROM receipts
    WHERE $1::text IS NULL OR (tenant_id, namespace, key) > ($1, $2::text, $3::text)
    ORDER BY tenant_id, namespace, key
    LIMIT $4
    FOR UPDATE";

const WRITE_SEALED: &str = "UPDATE receipts SET last_error = $4, checkpoint = $5, response = $6,
    recovery_payload = $7 WHERE tenant_id = $1 AND namespace = $2 AND key = $3";

/// A `receipts` row split into the receipt and its sealed fields as stored.
pub(super) fn row(row: &sqlx::postgres::PgRow) -> Result<Row, StoreError> {
    ReceiptRow::from_row(row).map_err(interpret)?.into_parts()
}

fn count(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[async_trait]
impl Driver for PgDriver {
    type Tx = Transaction<'static, Postgres>;

    fn sealer(&self) -> &Sealer {
        &self.seal
    }

    async fn claim_row(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim(tenant, input, policy).await
    }

    async fn read(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Row>, StoreError> {
        let found = sqlx::query(GET)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret)?;
        found.as_ref().map(row).transpose()
    }

    async fn begin(&self) -> Result<Self::Tx, StoreError> {
        self.pool.begin().await.map_err(interpret)
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
        let found = sqlx::query(LOCK)
            .bind(tenant)
            .bind(&id.namespace)
            .bind(&id.key)
            .bind(self.offset())
            .bind(self.frozen())
            .fetch_optional(&mut **tx)
            .await
            .map_err(interpret)?;
        let Some(found) = found else { return Ok(None) };
        let now = sqlx::Row::try_get(&found, "db_now").map_err(interpret)?;
        Ok(Some((now, row(&found)?)))
    }

    async fn write(
        &self,
        tx: &mut Self::Tx,
        tenant: &str,
        r: &Receipt,
        sealed: Option<&StoredBlobs>,
    ) -> Result<(), StoreError> {
        let query = sqlx::query(match sealed {
            Some(_) => WRITE,
            None => WRITE_UNSEALED,
        })
        .bind(tenant)
        .bind(&r.id.namespace)
        .bind(&r.id.key)
        .bind(r.state.as_str())
        .bind(count(r.attempt))
        .bind(count(r.free_attempts))
        .bind(r.claim_token)
        .bind(r.lease_expires_at)
        .bind(r.next_attempt_at)
        .bind(r.updated_at)
        .bind(r.completed_at);
        let query = match sealed {
            Some(blobs) => query
                .bind(&blobs.last_error)
                .bind(&blobs.checkpoint)
                .bind(&blobs.response)
                .bind(&blobs.recovery_payload),
            None => query,
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
