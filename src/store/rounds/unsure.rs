//! A batch whose statement failed (docs/DESIGN.md §4.2): its jobs run again alone, a few
//! at a time, and a job whose write may have committed all the same (claimd stopped
//! waiting for an answer that came late, or was lost with its connection) recognises its
//! own write on the row it reads first.

use super::{Answer, Job, Known, run};
use crate::domain::{ClaimOutcome, Decision, Receipt, Write};
use crate::store::StoreError;
use crate::store::driver::Driver;
use crate::store::recent::Recent;
use crate::store::write::{Expect, RowWrite};

/// How many jobs of a failed batch run alone at once: each takes a connection, and a
/// batch is up to `--group-commit-size` jobs.
pub const ALONE_AT_ONCE: usize = 4;

/// A write of a statement that failed and may have committed: the receipt it makes, and
/// for a Claim the decision it carried.
#[derive(Debug)]
pub(super) struct Landed {
    next: Receipt,
    claim: Option<(Decision, Write)>,
}

impl Landed {
    /// Whether `row` is as this write made it: its state, counts and token. A Claim's
    /// token is minted for its call, so no other write makes it; a holder call's token is
    /// the holder's own, so the row is what that holder asked for either way.
    pub(super) fn made(&self, row: &Receipt) -> bool {
        let n = &self.next;
        (row.state, row.attempt, row.free_attempts, row.claim_token)
            == (n.state, n.attempt, n.free_attempts, n.claim_token)
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
    /// write in case it committed all the same. A write that changes no state, count or
    /// token (a Heartbeat) is not recognisable on the row, and is simply made again.
    pub(super) fn unsure_of(self, w: &RowWrite, claim: Option<(Decision, Write)>) -> Job {
        let changes = match &w.expect {
            Expect::Absent(_) => true,
            Expect::Row(v) => {
                (v.state, v.attempt, v.free_attempts, v.claim_token)
                    != (
                        w.next.state,
                        w.next.attempt,
                        w.next.free_attempts,
                        w.next.claim_token,
                    )
            }
        };
        let landed = changes.then(|| Landed {
            next: w.next.clone(),
            claim,
        });
        Job {
            known: Known::Unread,
            landed,
            ..self
        }
    }
}

/// After a statement failed for the whole batch: one job is answered with the error; more
/// run again, each alone and [`ALONE_AT_ONCE`] at a time, so the others are not failed by
/// one of them and the pool is not asked for a connection per job at once.
pub(super) async fn alone<D: Driver>(
    driver: &D,
    recent: &Recent,
    mut jobs: Vec<Job>,
    e: StoreError,
) {
    if jobs.len() == 1 {
        if let Some(job) = jobs.pop() {
            job.answer(Err(e));
        }
        return;
    }
    tracing::debug!(error = %e, jobs = jobs.len(), "batch failed; running its jobs alone");
    use futures_util::StreamExt;
    let each = jobs
        .into_iter()
        .map(|job| Box::pin(run(driver, recent, vec![job])));
    let alone = futures_util::stream::iter(each).buffer_unordered(ALONE_AT_ONCE);
    alone.collect::<Vec<()>>().await;
}
