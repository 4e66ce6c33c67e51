//! Sealing at the row boundary: the four sealed columns as stored ([`StoredBlobs`]), sealed
//! when a store binds a receipt and opened when it decodes a row. The domain only ever sees
//! plaintext; the stores only ever write sealed values.

use super::StoreError;
use crate::domain::Receipt;
use crate::seal::{Binding, Field, SealError, Sealer};

/// The error text written when claimd quarantines a row whose sealed fields do not open.
pub const UNREADABLE: &str = "sealed data failed authentication";

/// The sealed columns of one row, exactly as stored (read by column name from either
/// driver's row).
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredBlobs {
    /// `last_error`.
    pub last_error: Option<Vec<u8>>,
    /// `checkpoint`.
    pub checkpoint: Option<Vec<u8>>,
    /// `response`.
    pub response: Option<Vec<u8>>,
    /// `recovery_payload`.
    pub recovery_payload: Option<Vec<u8>>,
}

/// The binding of (tenant, namespace, key) of `receipt`.
fn binding<'a>(tenant: &'a str, receipt: &'a Receipt) -> Binding<'a> {
    Binding {
        tenant,
        namespace: &receipt.id.namespace,
        key: &receipt.id.key,
    }
}

fn seal_opt(sealer: &Sealer, at: Binding<'_>, field: Field, v: Option<&[u8]>) -> Option<Vec<u8>> {
    v.map(|v| sealer.seal(at, field, v))
}

fn open_opt(
    sealer: &Sealer,
    at: Binding<'_>,
    field: Field,
    v: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, SealError> {
    v.map(|v| sealer.open(at, field, v)).transpose()
}

impl StoredBlobs {
    /// The sealed form of `receipt`'s payload fields.
    pub fn seal(sealer: &Sealer, tenant: &str, receipt: &Receipt) -> StoredBlobs {
        let at = binding(tenant, receipt);
        StoredBlobs {
            last_error: seal_opt(
                sealer,
                at,
                Field::LastError,
                receipt.last_error.as_deref().map(str::as_bytes),
            ),
            checkpoint: seal_opt(sealer, at, Field::Checkpoint, receipt.checkpoint.as_deref()),
            response: seal_opt(sealer, at, Field::Response, receipt.response.as_deref()),
            recovery_payload: seal_opt(
                sealer,
                at,
                Field::RecoveryPayload,
                receipt.recovery_payload.as_deref(),
            ),
        }
    }

    /// Opens every field into `receipt` (whose namespace and key name the row); fails
    /// closed, leaving `receipt` without plaintext, if any field does not verify.
    pub fn open_into(
        &self,
        sealer: &Sealer,
        tenant: &str,
        receipt: &mut Receipt,
    ) -> Result<(), StoreError> {
        let at = binding(tenant, receipt);
        let last_error = open_opt(sealer, at, Field::LastError, self.last_error.as_deref())?;
        let checkpoint = open_opt(sealer, at, Field::Checkpoint, self.checkpoint.as_deref())?;
        let response = open_opt(sealer, at, Field::Response, self.response.as_deref())?;
        let recovery_payload = open_opt(
            sealer,
            at,
            Field::RecoveryPayload,
            self.recovery_payload.as_deref(),
        )?;
        let last_error = last_error
            .map(String::from_utf8)
            .transpose()
            .map_err(|_| StoreError::Corrupt("last_error is not UTF-8".into()))?;
        receipt.last_error = last_error;
        receipt.checkpoint = checkpoint;
        receipt.response = response;
        receipt.recovery_payload = recovery_payload;
        Ok(())
    }

    /// Whether every present field is sealed under the sealer's current key.
    pub fn is_current(&self, sealer: &Sealer) -> bool {
        self.fields()
            .iter()
            .all(|(_, v)| v.is_none_or(|v| sealer.is_current(v)))
    }

    /// Every field opened and sealed again under the current key, for `claimd reseal`.
    pub fn resealed(&self, sealer: &Sealer, at: Binding<'_>) -> Result<StoredBlobs, SealError> {
        let again = |field: Field, v: Option<&[u8]>| -> Result<Option<Vec<u8>>, SealError> {
            let plain = open_opt(sealer, at, field, v)?;
            Ok(seal_opt(sealer, at, field, plain.as_deref()))
        };
        Ok(StoredBlobs {
            last_error: again(Field::LastError, self.last_error.as_deref())?,
            checkpoint: again(Field::Checkpoint, self.checkpoint.as_deref())?,
            response: again(Field::Response, self.response.as_deref())?,
            recovery_payload: again(Field::RecoveryPayload, self.recovery_payload.as_deref())?,
        })
    }

    fn fields(&self) -> [(Field, Option<&[u8]>); 4] {
        [
            (Field::LastError, self.last_error.as_deref()),
            (Field::Checkpoint, self.checkpoint.as_deref()),
            (Field::Response, self.response.as_deref()),
            (Field::RecoveryPayload, self.recovery_payload.as_deref()),
        ]
    }
}

/// What one `reseal` batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResealBatch {
    /// Rows looked at.
    pub scanned: u64,
    /// Rows sealed again under the current key.
    pub rewritten: u64,
    /// Rows left as they were because a field did not open (logged, without payloads).
    pub unreadable: u64,
    /// Where the next batch starts; `None` after the last row.
    pub next: Option<ResealCursor>,
}

/// A position in primary-key order: the last row a `reseal` batch looked at.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ResealCursor {
    /// The row's tenant.
    #[sqlx(rename = "tenant_id")]
    pub tenant: String,
    /// The row's namespace.
    pub namespace: String,
    /// The row's key.
    pub key: String,
}

/// One row as `reseal` reads it (`tenant_id, namespace, key` and the sealed columns), from
/// either driver's row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResealRow {
    /// Its primary key.
    #[sqlx(flatten)]
    pub id: ResealCursor,
    /// Its sealed columns.
    #[sqlx(flatten)]
    pub blobs: StoredBlobs,
}

/// One `reseal` batch of `rows`, read in primary-key order with `LIMIT limit`: the rows to
/// write again (their values sealed under the current key) and what the batch did, `next`
/// set unless these were the last rows. Rows already current are skipped; rows whose
/// fields do not open are logged, counted and left as they are.
pub fn plan_reseal(
    sealer: &Sealer,
    rows: Vec<ResealRow>,
    limit: u32,
) -> (ResealBatch, Vec<ResealRow>) {
    let mut batch = ResealBatch {
        scanned: rows.len() as u64,
        ..ResealBatch::default()
    };
    let full = rows.len() >= limit as usize;
    let mut writes = Vec::new();
    for row in rows {
        batch.next = Some(row.id.clone());
        if row.blobs.is_current(sealer) {
            continue;
        }
        let at = Binding {
            tenant: &row.id.tenant,
            namespace: &row.id.namespace,
            key: &row.id.key,
        };
        match row.blobs.resealed(sealer, at) {
            Ok(blobs) => writes.push(ResealRow { blobs, ..row }),
            Err(error) => {
                batch.unreadable += 1;
                tracing::warn!(
                    tenant = %row.id.tenant,
                    namespace = %row.id.namespace,
                    key = %row.id.key,
                    %error,
                    "reseal: left a row whose sealed field does not open"
                );
            }
        }
    }
    batch.rewritten = writes.len() as u64;
    if !full {
        batch.next = None;
    }
    (batch, writes)
}

/// Reseals every row, `batch_size` rows per transaction, logging progress after each batch;
/// returns the totals (`next` is `None`). Rows already under the current key are skipped,
/// so running it again after an interruption only redoes the rows it had not reached.
pub async fn reseal_all(
    store: &dyn super::Store,
    batch_size: u32,
) -> Result<ResealBatch, StoreError> {
    let mut total = ResealBatch::default();
    loop {
        let batch = store
            .reseal_batch(total.next.as_ref(), batch_size.max(1))
            .await?;
        total.scanned += batch.scanned;
        total.rewritten += batch.rewritten;
        total.unreadable += batch.unreadable;
        total.next = batch.next;
        tracing::info!(
            scanned = total.scanned,
            rewritten = total.rewritten,
            unreadable = total.unreadable,
            "reseal progress"
        );
        if total.next.is_none() {
            return Ok(total);
        }
    }
}
