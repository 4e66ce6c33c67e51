//! Group commit: the calls that change rows (Claim, the holder calls, Redrive) queue here,
//! and a few lanes each take everything queued — up to a batch's size, several jobs of one
//! row too — and run it as one batch (`rounds`): one read and one write statement, one
//! transaction, for all of them.
//!
//! The wait to fill a batch is adaptive and never a timer: a lane starts as soon as a job
//! arrives while none runs, so a caller alone is never held back; jobs that arrive while a
//! lane is busy wait for it to come free and go together. Another lane starts, up to
//! `lanes`, only when more jobs wait than the running lanes' next batches can take
//! ([`Batcher::needs_lane`]): a batch's statement costs the database much the same for one
//! row as for dozens, so fewer, fuller batches beat more, smaller ones until one lane
//! cannot keep up (measured: docs/PERFORMANCE.md).
//! The caller that opens a lane runs it on its own task until its answer is in (no
//! hand-off for a caller alone: [`Batcher::lane_here`]); the rest of the lane, or all of it
//! if that caller goes away first, goes on in a task of its own, so a caller that goes away
//! does not cancel the statements of the others; its job is dropped before the next
//! statement when it is still queued. A lane holds its slot through a guard ([`Lane`]) that frees it however
//! the lane ends: a lane that panics answers its batch's jobs UNAVAILABLE (their replies
//! dropped: [`unanswered`]) and starts another lane for the jobs still queued, so no later
//! call waits for a slot that will never be free (with SQLite's one lane, every one would).

use super::StoreError;
use super::driver::Driver;
use super::recent::Recent;
use super::rounds::{self, Answer, Job, Op};
use crate::domain::ReceiptKey;
use futures_util::FutureExt;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

/// How batches are formed (`--group-commit-lanes`, `--group-commit-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Most batches in flight at once; `None`: the store's default.
    pub lanes: Option<usize>,
    /// Most jobs in one batch.
    pub size: usize,
}

/// A lane whose batch has run this long is taken to be stuck (a lock wait, a slow link)
/// rather than busy: it no longer counts as able to take the jobs that wait, so another
/// lane starts for them. A batch of a full `--group-commit-size` takes a few milliseconds.
const STALLED: Duration = Duration::from_millis(50);

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Job>,
    /// One slot per lane: when its current batch started, `None` while the slot is free.
    lanes: Vec<Option<Instant>>,
}

impl Queue {
    /// Takes a free slot for a new lane, its batch starting now.
    fn open_lane(&mut self) -> usize {
        let now = Some(Instant::now());
        match self.lanes.iter().position(Option::is_none) {
            Some(slot) => {
                self.lanes[slot] = now;
                slot
            }
            None => {
                self.lanes.push(now);
                self.lanes.len() - 1
            }
        }
    }
}

/// A test's fault: what the next batch's lane waits for, and whether it then panics.
#[cfg(test)]
type Fault = (oneshot::Receiver<()>, bool);

/// The queue and its lanes; one per store, shared by its clones.
#[derive(Debug, Clone)]
pub struct Batcher {
    queue: Arc<Mutex<Queue>>,
    recent: Arc<Recent>,
    lanes: usize,
    size: usize,
    /// Every batch holds the jobs of one tenant (on Citus, where a statement must stay on
    /// one tenant's shard: docs/DESIGN.md §4.6).
    one_tenant: bool,
    /// A test's fault: the next batch's lane waits for this to fire, then panics if it
    /// says so (`tests`).
    #[cfg(test)]
    fault: Arc<Mutex<Option<Fault>>>,
}

impl Batcher {
    /// An empty queue, with `default_lanes` unless `options` name how many.
    pub fn new(options: BatchOptions, default_lanes: usize) -> Batcher {
        Batcher {
            queue: Arc::default(),
            recent: Arc::default(),
            lanes: options.lanes.unwrap_or(default_lanes).max(1),
            size: options.size.max(1),
            one_tenant: false,
            #[cfg(test)]
            fault: Arc::default(),
        }
    }

    /// This queue, with every batch holding the jobs of one tenant only: the first queued
    /// job's tenant, and that tenant's jobs queued behind it, in arrival order.
    pub fn one_tenant_per_batch(mut self) -> Batcher {
        self.one_tenant = true;
        self
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Every critical section below leaves the queue whole before it could panic.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `op` on `tenant`'s row `id` and waits for its answer, with the current call's
    /// deadline.
    pub async fn submit<D: Driver>(
        &self,
        driver: &D,
        tenant: &str,
        id: &ReceiptKey,
        op: Op,
    ) -> Result<Answer, StoreError> {
        let (reply, answer) = oneshot::channel();
        let due = crate::deadline::due();
        let mut job = Job::new(tenant, id, op, due, reply, &self.recent);
        if crate::spans::on() {
            job.call = Some(tracing::Span::current());
            job.wait = Some(tracing::info_span!(target: "claimd::store", "group_commit.wait"));
        }
        let slot = {
            let mut queue = self.queue();
            queue.waiting.push_back(job);
            self.open_lane_if_needed(&mut queue)
        };
        let answer = match slot {
            Some(slot) => self.lane_here(driver, slot, answer).await,
            // With one lane there is no other to start.
            None if self.lanes == 1 => answer.await,
            None => self.wait_watching_lanes(driver, answer).await,
        };
        answer.unwrap_or_else(|_| Err(unanswered()))
    }

    /// Runs the lane just opened in `slot` on the caller's own task until the caller's
    /// `answer` comes, so a caller alone hands its batch to no other task and is woken by
    /// none. What the lane's own task guaranteed still holds: once the answer is in, or if
    /// the caller goes away first (its future dropped: a cancelled call, a deadline), the
    /// rest of the lane — the statement in flight that other jobs may share, the batches
    /// queued since — goes on in a task of its own ([`Detached`]); a panic in the lane is
    /// caught here as its task would have caught it, so the caller is answered
    /// UNAVAILABLE and the slot freed ([`Lane`]).
    async fn lane_here<D: Driver, T>(
        &self,
        driver: &D,
        slot: usize,
        mut answer: oneshot::Receiver<T>,
    ) -> Result<T, oneshot::error::RecvError> {
        let lane = AssertUnwindSafe(self.clone().lane(driver.clone(), slot)).catch_unwind();
        let mut lane = Detached(Some(Box::pin(async move {
            // The panic was the lane's; `Lane` has answered and restarted for it.
            let _ = lane.await;
        })));
        tokio::select! {
            biased;
            answer = &mut answer => answer,
            () = lane.run() => answer.await,
        }
    }

    /// Waits for a queued job's `answer`, and every [`STALLED`] while it waits starts
    /// another lane if the running ones are stuck: otherwise a job queued behind a lane
    /// waiting on a lock would wait as long, unless another call happened to arrive.
    async fn wait_watching_lanes<D: Driver, T>(
        &self,
        driver: &D,
        mut answer: oneshot::Receiver<T>,
    ) -> Result<T, oneshot::error::RecvError> {
        loop {
            tokio::select! {
                answer = &mut answer => return answer,
                () = tokio::time::sleep(STALLED) => {
                    let slot = self.open_lane_if_needed(&mut self.queue());
                    if let Some(slot) = slot {
                        self.start_lane(driver, slot);
                    }
                }
            }
        }
    }

    /// A lane's slot, taken when [`Batcher::needs_lane`] says so; start the lane with
    /// [`Batcher::start_lane`] once the queue's lock is released (a lane spawned under it
    /// may start on another thread and wait for the lock at once).
    fn open_lane_if_needed(&self, queue: &mut Queue) -> Option<usize> {
        self.needs_lane(queue).then(|| queue.open_lane())
    }

    /// Runs a lane in `slot`, in a task of its own.
    fn start_lane<D: Driver>(&self, driver: &D, slot: usize) {
        tokio::spawn(self.clone().lane(driver.clone(), slot));
    }

    /// Whether `queue` needs another lane: fewer than `lanes` run, and more jobs wait than
    /// the next batch of every running lane that is not stuck ([`STALLED`]) takes — so the
    /// first lane starts at once, and the others only when one lane cannot keep up.
    fn needs_lane(&self, queue: &Queue) -> bool {
        let running = queue.lanes.iter().flatten();
        let able = running.clone().filter(|s| s.elapsed() < STALLED).count();
        running.count() < self.lanes && queue.waiting.len() > self.size * able
    }

    /// Runs batches until the queue is empty, in lane `slot`.
    async fn lane<D: Driver>(self, driver: D, slot: usize) {
        let mut lane = Lane {
            batcher: self,
            driver,
            slot,
            done: false,
        };
        loop {
            let mut batch = {
                let mut queue = lane.batcher.queue();
                if queue.waiting.is_empty() {
                    queue.lanes[slot] = None;
                    lane.done = true;
                    return;
                }
                queue.lanes[slot] = Some(Instant::now());
                take(
                    &mut queue.waiting,
                    lane.batcher.size,
                    lane.batcher.one_tenant,
                )
            };
            #[cfg(test)]
            lane.batcher.fault().await;
            let span = batch_span(&lane.driver, &mut batch);
            rounds::run(&lane.driver, &lane.batcher.recent, batch)
                .instrument(span)
                .await;
        }
    }

    /// Waits for a test's fault to fire, if one is armed, and panics if it says so.
    #[cfg(test)]
    async fn fault(&self) {
        let armed = self.fault.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((fire, panics)) = armed {
            let _ = fire.await;
            assert!(
                !panics,
                "a test's fault: the lane panics in the middle of its batch"
            );
        }
    }
}

/// A lane run on a caller's task ([`Batcher::lane_here`]): what is left of it when the
/// caller stops polling it goes on in a task of its own.
struct Detached(Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Detached {
    /// Polls the lane to its end.
    async fn run(&mut self) {
        if let Some(lane) = self.0.as_mut() {
            lane.await;
            self.0 = None;
        }
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        // Outside a runtime (it is gone) there is nothing to go on in; the lane's guard
        // answers its jobs as it is dropped.
        if let Some(lane) = self.0.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            tokio::spawn(lane);
        }
    }
}

/// A running lane's hold on its slot. A lane that ends normally frees the slot itself
/// (under the queue's lock, once it found the queue empty). One that stops in the middle of
/// a batch — a panic, which the runtime catches and then drops the lane's future, or the
/// runtime shutting down — frees it here and starts another lane if jobs are queued: with
/// one lane nothing else would serve them until another call arrived (a runtime that is
/// shutting down drops the new lane unstarted). The batch's own jobs were dropped with the
/// future, so their callers are answered [`unanswered`].
struct Lane<D: Driver> {
    batcher: Batcher,
    driver: D,
    slot: usize,
    /// The lane freed its slot itself.
    done: bool,
}

impl<D: Driver> Drop for Lane<D> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let next = {
            let mut queue = self.batcher.queue();
            queue.lanes[self.slot] = None;
            let runtime = tokio::runtime::Handle::try_current().is_ok();
            runtime
                .then(|| self.batcher.open_lane_if_needed(&mut queue))
                .flatten()
        };
        tracing::error!(
            restarted = next.is_some(),
            "a group-commit lane stopped in the middle of a batch (a panic, or the runtime \
             shutting down): its calls are answered UNAVAILABLE (their writes may or may not \
             have committed)"
        );
        if let Some(slot) = next {
            self.batcher.start_lane(&self.driver, slot);
        }
    }
}

/// What a job learns when its batch ended without answering it (its lane panicked or was
/// dropped): its write may or may not have committed, which is what UNAVAILABLE says, and
/// the caller may retry.
fn unanswered() -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "a group-commit batch ended without an answer",
    )))
}

/// The batch's span (a root: a batch serves many traces), linked both ways to each job's
/// call span; the job's wait span ends here, as the batch takes its job.
fn batch_span<D: Driver>(driver: &D, batch: &mut [Job]) -> tracing::Span {
    if !crate::spans::on() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(target: "claimd::store", parent: None, "group_commit.batch");
    crate::spans::database(&span, driver.system(), "batch", batch.len());
    for job in batch.iter_mut() {
        if let Some(call) = job.call.take() {
            crate::spans::link_both(&span, &call);
        }
        job.wait = None;
    }
    span
}

/// Up to `size` queued jobs, in arrival order. Several may be on one row (the duplicates
/// of a hot key): they share the batch's read, and `rounds` writes a row once per
/// statement, deciding a later job on the row as that write leaves it. With `one_tenant`,
/// only the first job's tenant's: the others keep their places in the queue.
fn take(waiting: &mut VecDeque<Job>, size: usize, one_tenant: bool) -> Vec<Job> {
    let Some(tenant) = one_tenant
        .then(|| waiting.front().map(|j| j.tenant.clone()))
        .flatten()
    else {
        let n = size.min(waiting.len());
        return waiting.drain(..n).collect();
    };
    let mut batch = Vec::new();
    let mut rest = VecDeque::with_capacity(waiting.len());
    for job in waiting.drain(..) {
        if batch.len() < size && job.tenant == tenant {
            batch.push(job);
        } else {
            rest.push_back(job);
        }
    }
    *waiting = rest;
    batch
}

#[cfg(test)]
mod tests;
