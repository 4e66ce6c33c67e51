//! A batch whose statement failed (docs/DESIGN.md §4.2): its jobs run again alone, a few
//! at a time, and a job whose write may have committed all the same (claimd stopped
//! waiting for an answer that came late, or was lost with its connection) recognises its
//! own write on the row it reads first.

use super::{Answer, Job, Known, run};
use crate::domain::{ClaimOutcome, Decision, Receipt, Write};
use crate::store::StoreError;
use crate::store::StoredBlobs;
use crate::store::driver::Driver;
use crate::store::recent::Recent;
use crate::store::write::RowWrite;
use uuid::Uuid;

/// How many jobs of a failed batch run alone at once: each takes a connection, and a
/// batch is up to `--group-commit-size` jobs.
pub const ALONE_AT_ONCE: usize = 4;

/// A write of a statement that failed and may have committed: its id, and for a Claim
/// the decision it carried.
#[derive(Debug)]
pub(super) struct Landed {
    id: Uuid,
    claim: Option<(Decision, Write)>,
    /// The attempt the write grants, for a Claim answered CLAIMED by it.
    granted: Option<u32>,
}

impl Landed {
    /// Whether the row, stored as `blobs`, is as this write made it: it holds the write's
    /// id, minted for this write alone, so no other write — not even one by the same
    /// holder that makes the same state — is taken for it (docs/DESIGN.md §4.2.1).
    pub(super) fn made(&self, blobs: &StoredBlobs) -> bool {
        blobs.write_id == Some(self.id)
    }

    /// Whether answering `row` as written at `now` still tells the truth: a Claim's lease
    /// must not have run out meanwhile (then the Claim is decided again on the row, its own
    /// token on an ended lease: a takeover with a fresh lease), so a CLAIMED answer's lease
    /// never ends before the answer is sent.
    pub(super) fn still_holds(&self, row: &Receipt, now: crate::domain::Timestamp) -> bool {
        match self.claim {
            Some((Decision::Claimed, _)) => row.lease_expires_at.is_some_and(|t| t > now),
            _ => true,
        }
    }

    /// Whether `row`, not as this write made it, is past the attempt the write would have
    /// granted: someone took the receipt over since, maybe from this very write, so the
    /// call can be told neither that it was granted nor that it was not.
    pub(super) fn overtaken(&self, row: &Receipt) -> bool {
        self.granted.is_some_and(|n| row.attempt > n)
    }

    /// The error of a call whose write may have landed.
    pub(super) fn unsure(&self) -> StoreError {
        StoreError::Unsure(self.granted)
    }

    pub(super) fn answer(&self, row: &Receipt) -> Answer {
        match self.claim {
            Some((decision, write)) => Answer::Claim(ClaimOutcome {
                decision,
                receipt: row.clone(),
                write,
            }),
            None => Answer::Receipt(row.clone()),
        }
    }
}

impl Job {
    /// The job again after the statement carrying `w` failed: read first, and know the
    /// write in case it committed all the same.
    pub(super) fn unsure_of(self, w: &RowWrite, claim: Option<(Decision, Write)>) -> Job {
        Job {
            known: Known::Unread,
            landed: Some(Landed {
                id: w.id,
                claim,
                granted: claim
                    .filter(|(decision, _)| *decision == Decision::Claimed)
                    .map(|_| w.next.attempt),
            }),
            ..self
        }
    }
}

/// After a statement failed for the whole batch: the jobs run again, each alone and
/// [`ALONE_AT_ONCE`] at a time, so the others are not failed by one of them and the pool
/// is not asked for a connection per job at once. A job that already ran alone is answered
/// with the error ([`StoreError::Unsure`] for an unavailable database if its write may have
/// committed), and so is a job alone in its batch unless its write may have committed: that
/// one reads its row once more, so a write that landed is answered as written and not as
/// an error that says nothing changed (nor, for a Claim, decided again on its own lease).
pub(super) async fn alone<D: Driver>(
    driver: &D,
    recent: &Recent,
    mut jobs: Vec<Job>,
    e: StoreError,
) {
    if jobs.len() == 1 && jobs.iter().all(|j| j.alone || j.landed.is_none()) {
        if let Some(job) = jobs.pop() {
            // Only a lost answer leaves the outcome open: a full disk, a read-only server or
            // a deadline refused the write and say so.
            let e = match &job.landed {
                Some(landed) if matches!(e, StoreError::Unavailable(_)) => {
                    tracing::debug!(error = %e, "a write's outcome is not known");
                    landed.unsure()
                }
                _ => e,
            };
            job.answer(Err(e));
        }
        return;
    }
    for job in &mut jobs {
        job.alone = true;
    }
    tracing::debug!(error = %e, jobs = jobs.len(), "batch failed; running its jobs alone");
    use futures_util::StreamExt;
    let each = jobs
        .into_iter()
        .map(|job| Box::pin(run(driver, recent, vec![job])));
    let alone = futures_util::stream::iter(each).buffer_unordered(ALONE_AT_ONCE);
    alone.collect::<Vec<()>>().await;
}
