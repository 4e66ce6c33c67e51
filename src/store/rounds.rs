//! One group commit's work, written once over any [`Driver`]: the jobs of a batch (Claims,
//! holder calls, Redrives, operators' Quarantines of orphans; several may be on one row) go
//! through rounds of one read statement (`read`: each row once, however many jobs are on
//! it) and one write statement, each shared by every job that needs it. A row is written at
//! most once per statement: of the jobs that would write it, the first does, and the others
//! are decided again on the row as that write left it (not read again when it was made),
//! in the next round.
//!
//! A round reads the rows of the jobs that need a read (none for a Claim without a
//! payload of a row this process has not seen exist, which tries its insert first, nor
//! for a holder call on a row this process last wrote: [`super::recent`]), decides each
//! job with the domain's rules on its row (`decide_claim`, `apply`, `redrive`,
//! `quarantine_orphan`), seals what each write changes, and writes all of them at once,
//! each compare-and-set on the row as decided from ([`super::write`]). A job whose row
//! changed meanwhile is decided again on the row as the write found it, in the next round,
//! at most [`MAX_RACES`] times. A job is answered only after its write
//! committed; a job whose caller went away (cancelled) or whose answer is already due is
//! dropped before the next statement. When a statement fails for the whole batch, each of
//! its jobs runs once more alone (a few at a time, `unsure::ALONE_AT_ONCE`), so one bad job costs
//! the others one retry at most. A write statement that failed may still have committed
//! (claimd stopped waiting for an answer that was late, or lost with its connection): a
//! job that wrote in it reads its row first and, if the row is as its write made it,
//! answers as written (`unsure`) instead of deciding again on its own write.

mod read;
mod unsure;

use super::driver::{Driver, Row};
use super::recent::Recent;
use super::settles::Mark;
use super::usage;
use super::write::{Expect, RowWrite, Sealed, Version, WriteOutcome};
use super::{StoreError, StoredBlobs};
use crate::domain::{
    Action, ClaimInput, ClaimOutcome, Decision, NotQuarantined, Policy, Receipt, ReceiptKey, Seen,
    Timestamp, Write, apply, decide_claim,
};
use crate::seal::{Sealer, new_life};
use read::read;
use std::collections::HashSet;
use std::hash::BuildHasher;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;
use unsure::{Landed, alone};
use uuid::Uuid;

/// How often a job is decided again after its row changed under it.
pub const MAX_RACES: usize = 16;

/// What a job asks of its row.
#[derive(Debug, Clone)]
pub enum Op {
    /// A Claim.
    Claim {
        /// The validated request.
        input: ClaimInput,
        /// The namespace's policy.
        policy: Policy,
    },
    /// Complete, Heartbeat, Retry or Quarantine by the holder of `token`.
    Act {
        /// The caller's claim token.
        token: Uuid,
        /// What it asks for.
        action: Action,
        /// The namespace's policy.
        policy: Policy,
    },
    /// An operator's Redrive of a dead letter.
    Redrive,
    /// An operator's Quarantine of the orphan it saw (`domain::quarantine_orphan`).
    QuarantineOrphan {
        /// What the operator saw of the receipt.
        seen: Seen,
        /// Why: the new `last_error`.
        reason: String,
    },
}

/// A job's answer.
#[derive(Debug)]
pub enum Answer {
    /// A Claim's.
    Claim(ClaimOutcome),
    /// A holder call's, a Redrive's or an operator's Quarantine's: the receipt after it.
    Receipt(Receipt),
    /// An operator's Quarantine refused by the domain: nothing was written.
    NotQuarantined(NotQuarantined),
}

/// What a job knows of its row.
#[derive(Debug)]
enum Known {
    /// Nothing yet: read it.
    Unread,
    /// Assumed absent without a read: a Claim that seals nothing tries its insert.
    Assumed,
    /// Read at this clock reading: no row, or this one (opened) with its stored values.
    Read(Timestamp, Option<(Receipt, StoredBlobs)>),
    /// As this process last wrote it: only a write is decided from it; anything else is
    /// read first.
    Recent(Receipt, StoredBlobs),
}

/// One caller's request, waiting for its answer.
#[derive(Debug)]
pub struct Job {
    /// The tenant of the row.
    pub tenant: String,
    /// The row.
    pub id: ReceiptKey,
    op: Op,
    due: Option<Instant>,
    reply: oneshot::Sender<Result<Answer, StoreError>>,
    known: Known,
    races: usize,
    landed: Option<Landed>,
    /// Whether the job already ran alone after a failed batch (it does at most once).
    alone: bool,
    /// The call's `group_commit.wait` span, open from the job's queueing until a batch
    /// takes it (`batch::lane`).
    pub wait: Option<tracing::Span>,
    /// The call's own span (the `rpc` span, current when the job was queued), which the
    /// batch links to and which links back to the batch.
    pub call: Option<tracing::Span>,
}

impl Job {
    /// A job for `op` on `tenant`'s row `id`, answered through `reply`, due by `due`.
    pub fn new(
        tenant: &str,
        id: &ReceiptKey,
        op: Op,
        due: Option<Instant>,
        reply: oneshot::Sender<Result<Answer, StoreError>>,
        recent: &Recent,
    ) -> Job {
        let known = match &op {
            Op::Claim { input, .. }
                if input.recovery_payload.is_none() && !recent.exists(tenant, id) =>
            {
                Known::Assumed
            }
            Op::Act { .. } => recent
                .get(tenant, id)
                .map_or(Known::Unread, |(r, b)| Known::Recent(r, b)),
            Op::Claim { .. } | Op::Redrive | Op::QuarantineOrphan { .. } => Known::Unread,
        };
        Job {
            tenant: tenant.to_owned(),
            id: id.clone(),
            op,
            due,
            reply,
            known,
            races: 0,
            landed: None,
            alone: false,
            wait: None,
            call: None,
        }
    }

    fn answer(self, answer: Result<Answer, StoreError>) {
        // The caller may have gone away; then nobody waits for the answer.
        let _ = self.reply.send(answer);
    }

    /// The job, to be read again before it is decided.
    fn unread(self) -> Job {
        Job {
            known: Known::Unread,
            ..self
        }
    }

    /// Whether `other` is a job on the same row.
    fn same_row(&self, other: &Job) -> bool {
        self.tenant == other.tenant && self.id == other.id
    }

    /// Whether the caller still waits and its answer is not yet due.
    fn still_wanted(&self) -> bool {
        !self.reply.is_closed() && self.due.is_none_or(|due| Instant::now() < due)
    }
}

/// What deciding a job came to.
// Short-lived, one per job and round: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Step {
    Done(Result<Answer, StoreError>),
    Reread,
    Write(RowWrite, Option<(Decision, Write)>),
}

/// Decides `job` on what it knows of its row.
fn decide(sealer: &Sealer, job: &Job) -> Step {
    let (now, current, recent) = match &job.known {
        Known::Unread => return Step::Reread,
        Known::Assumed => (chrono::Utc::now(), None, false),
        Known::Read(now, row) => (*now, row.as_ref().map(|(r, b)| (r, b)), false),
        Known::Recent(r, b) => (chrono::Utc::now(), Some((r, b)), true),
    };
    let current = current.map(|(r, b)| (r.clone(), b.clone()));
    let refused = |e: StoreError| match recent {
        true => Step::Reread,
        false => Step::Done(Err(e)),
    };
    let write = |next: Receipt, claim: Option<(Decision, Write)>| {
        let (expect, sealed) = match &current {
            None => {
                let life = new_life();
                let blobs = StoredBlobs::insert(sealer, &job.tenant, &next, life);
                (Expect::Absent(life), (Sealed::all(blobs.clone()), blobs))
            }
            Some((r, b)) => {
                let changes = b.changes(sealer, &job.tenant, r, &next);
                let stored = changes.over(b);
                let version = Version {
                    sealed: recent.then(|| b.clone()),
                    ..Version::of(r, b)
                };
                (Expect::Row(version), (changes, stored))
            }
        };
        let before = current.as_ref().map(|(r, _)| r);
        let mut w = RowWrite::new(&job.tenant, expect, before, next, now, sealed, job.due);
        if let Some((_, b)) = &current {
            w.growth.bytes = usage::size(&w.stored) - usage::size(b);
        }
        // The tenant's storage limits are the caller's (Claim, holder calls); an
        // operator's Redrive or Quarantine adds no receipt and is not refused for room.
        if let Op::Claim { policy, .. } | Op::Act { policy, .. } = &job.op {
            w.storage = policy.storage;
        }
        Step::Write(w, claim)
    };
    let before = current.as_ref().map(|(r, _)| r);
    if let (Some(landed), Known::Read(..), Some((row, blobs))) =
        (&job.landed, &job.known, current.as_ref())
    {
        if landed.made(blobs) && landed.still_holds(row, now) {
            return Step::Done(Ok(landed.answer(row)));
        }
        // Past the attempt its write would have granted (so not as it made it).
        if landed.overtaken(row) {
            return Step::Done(Err(landed.unsure()));
        }
    }
    match &job.op {
        Op::Claim { input, policy } => {
            let outcome = decide_claim(before, input, now, policy);
            match outcome.write {
                Write::None if recent => Step::Reread,
                Write::None => Step::Done(Ok(Answer::Claim(outcome))),
                w => write(outcome.receipt, Some((outcome.decision, w))),
            }
        }
        Op::Act {
            token,
            action,
            policy,
        } => match before {
            None => refused(StoreError::NotFound),
            Some(r) => match apply(r, *token, action, now, policy) {
                Err(e) => refused(StoreError::Refused(e)),
                Ok(next) if next == *r && recent => Step::Reread,
                Ok(next) if next == *r => Step::Done(Ok(Answer::Receipt(next))),
                Ok(next) => write(next, None),
            },
        },
        Op::Redrive => match before {
            None => refused(StoreError::NotFound),
            Some(r) => match crate::domain::redrive(r, now) {
                Err(e) => refused(StoreError::Refused(e)),
                Ok(next) => {
                    debug_assert!(super::same_sealed_fields(r, &next), "redrive seals nothing");
                    write(next, None)
                }
            },
        },
        // Its answer says "nothing changed": after a write of its own that may have landed
        // (and was changed since), that is not known, so it is Unsure instead.
        Op::QuarantineOrphan { seen, reason } => match before {
            None if job.landed.is_some() => Step::Done(Err(StoreError::Unsure(None))),
            None => Step::Done(Err(StoreError::NotFound)),
            Some(r) => match crate::domain::quarantine_orphan(r, seen, reason, now) {
                Err(_) if job.landed.is_some() => Step::Done(Err(StoreError::Unsure(None))),
                Err(refused) => Step::Done(Ok(Answer::NotQuarantined(refused))),
                Ok(next) => write(next, None),
            },
        },
    }
}

/// Opens a row read for `job`, or answers it DATA_LOSS.
fn known(
    sealer: &Sealer,
    job: &Job,
    now: Timestamp,
    row: Option<Row>,
) -> Result<Known, StoreError> {
    let opened = row
        .map(|(mut receipt, blobs)| {
            blobs.open_into(sealer, &job.tenant, &mut receipt)?;
            Ok::<_, StoreError>((receipt, blobs))
        })
        .transpose()?;
    Ok(Known::Read(now, opened))
}

/// Runs `jobs` to their answers.
pub async fn run<D: Driver>(driver: &D, recent: &Recent, mut jobs: Vec<Job>) {
    let sealer = driver.sealer();
    loop {
        jobs.retain(Job::still_wanted);
        // Jobs dropped here are answered DEADLINE_EXCEEDED by their callers' own timers.
        if jobs.is_empty() {
            return;
        }
        if jobs.iter().any(|j| matches!(j.known, Known::Unread)) {
            jobs = match read(driver, recent, jobs).await {
                Ok(jobs) => jobs,
                Err((jobs, e)) => return alone(driver, recent, jobs, e).await,
            };
        }
        let mut writing = Vec::new();
        let mut writes = Vec::new();
        let mut again = Vec::new();
        // Jobs that would write a row an earlier job of the round writes, with its position.
        let mut behind: Vec<(Job, usize)> = Vec::new();
        // The rows this round's statement writes: one write per row, the first job's; a
        // later job of the batch that would write the same row is decided again on the row
        // as that write leaves it, in the next round (as if it had queued behind it),
        // without reading it again when the write was made.
        let mut written = HashSet::new();
        let hasher = std::hash::RandomState::new();
        for job in jobs.drain(..) {
            match decide(sealer, &job) {
                Step::Done(answer) => job.answer(answer),
                Step::Reread => again.push(Job {
                    known: Known::Unread,
                    ..job
                }),
                Step::Write(..)
                    if written.contains(&hasher.hash_one((&job.tenant, &job.id)))
                        && let Some(ahead) = writing
                            .iter()
                            .position(|(j, _): &(Job, _)| j.same_row(&job)) =>
                {
                    behind.push((job, ahead))
                }
                Step::Write(w, claim) => {
                    written.insert(hasher.hash_one((&job.tenant, &job.id)));
                    writes.push(w);
                    writing.push((job, claim));
                }
            }
        }
        if !writes.is_empty() {
            let write = crate::spans::statement("db.write");
            crate::spans::database(&write, driver.system(), "write", writes.len());
            let outcomes = match driver.write_many(&writes).instrument(write).await {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    let unsure = writing.into_iter().zip(&writes);
                    let mut all: Vec<Job> = unsure
                        .map(|((job, claim), w)| job.unsure_of(w, claim))
                        .collect();
                    all.append(&mut again);
                    all.extend(behind.into_iter().map(|(job, _)| job.unread()));
                    return alone(driver, recent, all, e).await;
                }
            };
            // The rows as the statement's writes left them, for the jobs behind them.
            let mut made: Vec<Option<Row>> = Vec::with_capacity(writes.len());
            for (((mut job, claim), w), outcome) in writing.into_iter().zip(&writes).zip(outcomes) {
                made.push(match &outcome {
                    WriteOutcome::Written(now) => Some((w.written(*now), w.stored.clone())),
                    _ => None,
                });
                match outcome {
                    WriteOutcome::Written(now) => {
                        let receipt = w.written(now);
                        recent.wrote(&job.tenant, &receipt, &w.stored);
                        if w.settles() {
                            driver.settles().settled(Mark::of(&job.tenant, &job.id));
                        }
                        job.answer(Ok(match claim {
                            Some((decision, write)) => Answer::Claim(ClaimOutcome {
                                decision,
                                receipt,
                                write,
                            }),
                            None => Answer::Receipt(receipt),
                        }));
                    }
                    WriteOutcome::Late => job.answer(Err(StoreError::DeadlinePassed)),
                    WriteOutcome::OverQuota(refusal) => job.answer(Err(refusal.into())),
                    WriteOutcome::Stale(now, row) => {
                        recent.forget(&job.tenant, &job.id);
                        recent.saw(&job.tenant, &job.id, row.is_some());
                        job.races += 1;
                        if job.races >= MAX_RACES {
                            job.answer(Err(StoreError::Contended));
                            continue;
                        }
                        // Found as it was decided from: the row changed after the
                        // statement's snapshot (a write that committed while this one
                        // waited for its lock), so read it as committed now.
                        if w.found_as_expected(row.as_deref()) {
                            job.known = Known::Unread;
                            again.push(job);
                            continue;
                        }
                        match known(sealer, &job, now, row.map(|r| *r)) {
                            Ok(k) => {
                                job.known = k;
                                again.push(job);
                            }
                            Err(e) => job.answer(Err(e)),
                        }
                    }
                }
            }
            for (job, ahead) in behind.drain(..) {
                again.push(match made.get(ahead).cloned().flatten() {
                    Some((receipt, stored)) => Job {
                        known: Known::Recent(receipt, stored),
                        ..job
                    },
                    None => job.unread(),
                });
            }
        }
        again.extend(behind.into_iter().map(|(job, _)| job.unread()));
        jobs = again;
    }
}
