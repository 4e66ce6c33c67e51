//! `claimd reseal` at the store boundary: batches of rows in primary-key order, each row
//! whose values are not all in the current format under the current key sealed again
//! (under the row's own life), and the counts an operator reads — also in a dry run, which
//! scans the same batches and writes nothing.

use super::StoreError;
use super::sealed::{StoredBlobs, binding};
use crate::seal::{Sealer, Standing};

/// What one `reseal` batch did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResealBatch {
    /// Rows looked at.
    pub scanned: u64,
    /// Rows sealed again under the current key (in a dry run: rows that would be).
    pub rewritten: u64,
    /// Rows left as they were because a field did not open (logged, without payloads).
    pub unreadable: u64,
    /// Values found in the old format (`0x01`, AES-256-GCM).
    pub old_format: u64,
    /// Values found in the current format under a key other than the current one.
    pub old_key: u64,
    /// Values found in plaintext.
    pub plaintext: u64,
    /// Where the next batch starts; `None` after the last row.
    pub next: Option<ResealCursor>,
}

impl ResealBatch {
    /// Logs these counts (never a payload) with `message`.
    pub fn log(&self, dry_run: bool, message: &str) {
        tracing::info!(
            scanned = self.scanned,
            rewritten = self.rewritten,
            unreadable = self.unreadable,
            old_format = self.old_format,
            old_key = self.old_key,
            plaintext = self.plaintext,
            dry_run,
            "{message}"
        );
    }

    /// Adds `batch`'s counts to these and moves on to its `next`.
    fn add(&mut self, batch: ResealBatch) {
        self.scanned += batch.scanned;
        self.rewritten += batch.rewritten;
        self.unreadable += batch.unreadable;
        self.old_format += batch.old_format;
        self.old_key += batch.old_key;
        self.plaintext += batch.plaintext;
        self.next = batch.next;
    }

    fn count(&mut self, standing: Standing) {
        match standing {
            Standing::OldFormat => self.old_format += 1,
            Standing::OldKey => self.old_key += 1,
            Standing::Plaintext => self.plaintext += 1,
            Standing::Current | Standing::Malformed => {}
        }
    }
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

/// One row as `reseal` reads it (`tenant_id, namespace, key`, the sealed columns and
/// `life_id`), from either driver's row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResealRow {
    /// Its primary key.
    #[sqlx(flatten)]
    pub id: ResealCursor,
    /// Its sealed columns and life.
    #[sqlx(flatten)]
    pub blobs: StoredBlobs,
}

/// One `reseal` batch of `rows`, read in primary-key order with `LIMIT limit`: the rows to
/// write again (their values sealed in the current format under the current key and their
/// own life) and what the batch did, `next` set unless these were the last rows. Rows
/// already current are skipped; rows whose fields do not open are logged, counted and left
/// as they are. A dry run opens the rows it would write but seals nothing and returns no
/// writes.
pub fn plan_reseal(
    sealer: &Sealer,
    rows: Vec<ResealRow>,
    limit: u32,
    dry_run: bool,
) -> (ResealBatch, Vec<ResealRow>) {
    let mut batch = ResealBatch {
        scanned: rows.len() as u64,
        ..ResealBatch::default()
    };
    let full = rows.len() >= limit as usize;
    let mut writes = Vec::new();
    for row in rows {
        batch.next = Some(row.id.clone());
        let standings = row.blobs.standings(sealer);
        if standings.iter().all(|s| *s == Standing::Current) {
            continue;
        }
        standings.into_iter().for_each(|s| batch.count(s));
        let id = &row.id;
        let at = binding(&id.tenant, &id.namespace, &id.key, row.blobs.life());
        let outcome = match dry_run {
            true => row.blobs.verify(sealer, at).map(|()| None),
            false => row.blobs.resealed(sealer, at).map(Some),
        };
        match outcome {
            Ok(blobs) => {
                batch.rewritten += 1;
                if let Some(blobs) = blobs {
                    writes.push(ResealRow { blobs, ..row });
                }
            }
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
    if !full {
        batch.next = None;
    }
    (batch, writes)
}

/// Reseals every row, `batch_size` rows per transaction, logging progress after each batch;
/// returns the totals (`next` is `None`). Rows already current are skipped, so running it
/// again after an interruption only redoes the rows it had not reached. With `dry_run` it
/// scans the same batches, writes nothing and returns what it would have done.
pub async fn reseal_all(
    store: &dyn super::Store,
    batch_size: u32,
    dry_run: bool,
) -> Result<ResealBatch, StoreError> {
    let mut total = ResealBatch::default();
    loop {
        let batch = store
            .reseal_batch(total.next.as_ref(), batch_size.max(1), dry_run)
            .await?;
        total.add(batch);
        total.log(dry_run, "reseal progress");
        if total.next.is_none() {
            return Ok(total);
        }
    }
}
