//! The store's behaviour, written once over any [`Driver`]: every [`Driver`] is a
//! [`Claims`], [`DeadLetters`] and [`Reseal`] store by the impls below. Everything composed
//! of row operations lives here — a holder action (lock the row, `domain::apply`, seal what
//! changed, write back), Redrive, Get, List and ListOrphaned pages (opening sealed fields), reseal
//! batches — so both backends behave the same by construction. The drivers only run
//! statements.
//!
//! Holder actions and Redrive lock the row (PostgreSQL `SELECT … FOR UPDATE`, SQLite
//! `BEGIN IMMEDIATE`), apply the domain rule and write back only when something changed;
//! Redrive writes no sealed column. List pages by (namespace, key), the primary key's
//! order after the tenant, so a receipt's place never changes; List and ListOrphaned fetch
//! a page in chunks until its budget of receipts and bytes is spent (`page`).

use super::driver::{Driver, Row};
use super::reseal::plan_reseal;
use super::{
    Claims, DeadLetters, ListPage, ListQuery, OrphanPage, OrphanQuery, Reseal, ResealBatch,
    ResealCursor, StoreError, same_sealed_fields,
};
use crate::domain::{
    Action, ClaimInput, ClaimOutcome, Policy, Receipt, ReceiptKey, Timestamp, apply,
};
use async_trait::async_trait;
use uuid::Uuid;

/// The row as a receipt of `tenant`, its sealed fields opened (or DATA_LOSS).
fn open<D: Driver>(driver: &D, tenant: &str, row: Row) -> Result<Receipt, StoreError> {
    let (mut receipt, blobs) = row;
    blobs.open_into(driver.sealer(), tenant, &mut receipt)?;
    Ok(receipt)
}

/// Locks the row, computes the next receipt from the current one at the store's clock,
/// and writes it back when it differs — sealing only the sealed fields whose plaintext
/// changed, under the row's own life, and keeping every other one exactly as stored — all
/// in one transaction.
async fn change<D: Driver>(
    driver: &D,
    tenant: &str,
    id: &ReceiptKey,
    next: impl FnOnce(&Receipt, Timestamp) -> Result<Receipt, StoreError> + Send,
) -> Result<Receipt, StoreError> {
    let mut tx = driver.begin().await?;
    let (now, (mut current, stored)) = driver
        .lock(&mut tx, tenant, id)
        .await?
        .ok_or(StoreError::NotFound)?;
    stored.open_into(driver.sealer(), tenant, &mut current)?;
    let next = next(&current, now)?;
    if next != current {
        let sealed = stored.changed(driver.sealer(), tenant, &current, &next);
        driver
            .write(&mut tx, tenant, &next, sealed.as_ref())
            .await?;
    }
    driver.commit(tx).await?;
    Ok(next)
}

#[async_trait]
impl<D: Driver> Claims for D {
    async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim_row(tenant, input, policy).await
    }

    async fn act(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        token: Uuid,
        action: &Action,
        policy: &Policy,
    ) -> Result<Receipt, StoreError> {
        change(self, tenant, id, |current, now| {
            Ok(apply(current, token, action, now, policy)?)
        })
        .await
    }

    async fn get(&self, tenant: &str, id: &ReceiptKey) -> Result<Option<Receipt>, StoreError> {
        let row = self.read(tenant, id).await?;
        row.map(|row| open(self, tenant, row)).transpose()
    }

    async fn list_orphaned(
        &self,
        tenant: &str,
        query: &OrphanQuery,
    ) -> Result<OrphanPage, StoreError> {
        super::orphans::list_orphans(self, tenant, query).await
    }
}

#[async_trait]
impl<D: Driver> DeadLetters for D {
    async fn list(&self, tenant: &str, query: &ListQuery) -> Result<ListPage, StoreError> {
        ListPage::fill(self.sealer(), tenant, query, |chunk| async move {
            self.list_rows(tenant, &chunk).await
        })
        .await
    }

    async fn redrive(&self, tenant: &str, id: &ReceiptKey) -> Result<Receipt, StoreError> {
        // Redrive changes no sealed field, so they are left exactly as stored.
        change(self, tenant, id, |current, now| {
            let next = crate::domain::redrive(current, now)?;
            debug_assert!(same_sealed_fields(current, &next), "redrive seals nothing");
            Ok(next)
        })
        .await
    }
}

#[async_trait]
impl<D: Driver> Reseal for D {
    async fn reseal_batch(
        &self,
        after: Option<&ResealCursor>,
        limit: u32,
        dry_run: bool,
    ) -> Result<ResealBatch, StoreError> {
        let mut tx = self.begin().await?;
        let rows = self.reseal_rows(&mut tx, after, limit).await?;
        let (batch, writes) = plan_reseal(self.sealer(), rows, limit, dry_run);
        if dry_run {
            // Nothing was written; dropping the transaction rolls it back.
            return Ok(batch);
        }
        for row in &writes {
            self.write_sealed(&mut tx, row).await?;
        }
        self.commit(tx).await?;
        Ok(batch)
    }
}
