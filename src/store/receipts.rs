//! The store's behaviour, written once over any [`Driver`]: every [`Driver`] is a
//! [`Claims`], [`DeadLetters`] and [`Reseal`] store by the impls below. Claim, the holder
//! calls, Redrive and an operator's Quarantine of an orphan queue for the group commit
//! (`batch`, `rounds`: read, decide with the domain's rules, seal what changed,
//! compare-and-set); Get, List and ListOrphaned pages
//! (opening sealed fields) and reseal batches are composed here of the driver's reads, so
//! both backends behave the same by construction. The drivers only run statements.
//!
//! List pages by (namespace, key), the primary key's order after the tenant, so a
//! receipt's place never changes; List and ListOrphaned fetch a page in chunks until its
//! budget of receipts and bytes is spent (`page`).

use super::driver::{Driver, Row};
use super::reseal::plan_reseal;
use super::rounds::{Answer, Op};
use super::{
    Claims, DeadLetters, ListPage, ListQuery, OrphanPage, OrphanQuery, Reseal, ResealBatch,
    ResealCursor, StoreError,
};
use crate::domain::{
    Action, ClaimInput, ClaimOutcome, NotQuarantined, Policy, Receipt, ReceiptKey, Seen,
};
use async_trait::async_trait;
use uuid::Uuid;

/// The row as a receipt of `tenant`, its sealed fields opened (or DATA_LOSS).
fn open<D: Driver>(driver: &D, tenant: &str, row: Row) -> Result<Receipt, StoreError> {
    let (mut receipt, blobs) = row;
    blobs.open_into(driver.sealer(), tenant, &mut receipt)?;
    Ok(receipt)
}

/// A Claim's answer, from the group commit.
fn claimed(answer: Answer) -> Result<ClaimOutcome, StoreError> {
    match answer {
        Answer::Claim(outcome) => Ok(outcome),
        Answer::Receipt(_) | Answer::NotQuarantined(_) => Err(StoreError::Corrupt(
            "a Claim answered as another kind of job".into(),
        )),
    }
}

/// A holder call's or Redrive's answer, from the group commit.
fn receipt(answer: Answer) -> Result<Receipt, StoreError> {
    match answer {
        Answer::Receipt(receipt) => Ok(receipt),
        Answer::Claim(_) | Answer::NotQuarantined(_) => Err(StoreError::Corrupt(
            "a holder call answered as another kind of job".into(),
        )),
    }
}

#[async_trait]
impl<D: Driver> Claims for D {
    async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        let op = Op::Claim {
            input: input.clone(),
            policy: *policy,
        };
        claimed(self.batcher().submit(self, tenant, &input.id, op).await?)
    }

    fn settles(&self) -> std::sync::Arc<super::settles::Settles> {
        std::sync::Arc::clone(Driver::settles(self))
    }

    fn clock_estimate(&self) -> crate::domain::Timestamp {
        Driver::clock_estimate(self)
    }

    async fn act(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        token: Uuid,
        action: &Action,
        policy: &Policy,
    ) -> Result<Receipt, StoreError> {
        let op = Op::Act {
            token,
            action: action.clone(),
            policy: *policy,
        };
        receipt(self.batcher().submit(self, tenant, id, op).await?)
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
        // Redrive changes no sealed field, so the write leaves them exactly as stored.
        receipt(self.batcher().submit(self, tenant, id, Op::Redrive).await?)
    }

    async fn quarantine_orphan(
        &self,
        tenant: &str,
        id: &ReceiptKey,
        seen: &Seen,
        reason: &str,
    ) -> Result<Result<Receipt, NotQuarantined>, StoreError> {
        let op = Op::QuarantineOrphan {
            seen: *seen,
            reason: reason.to_owned(),
        };
        match self.batcher().submit(self, tenant, id, op).await? {
            Answer::NotQuarantined(why) => Ok(Err(why)),
            answer => receipt(answer).map(Ok),
        }
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
