//! Group commit: the calls that change rows (Claim, the holder calls, Redrive) queue here,
//! and a few lanes each take everything queued — up to a batch's size, one job per row —
//! and run it as one batch (`rounds`): one read and one write statement, one transaction,
//! for all of them.
//!
//! The wait to fill a batch is adaptive and never a timer: a lane starts as soon as a job
//! arrives while fewer than `lanes` run, so a caller alone is never held back; jobs that
//! arrive while every lane is busy wait for the first lane to come free and go together.
//! The lane runs in a task of its own, so a caller that goes away does not cancel the
//! statements of the others; its job is dropped before the next statement when it is
//! still queued.

use super::StoreError;
use super::driver::Driver;
use super::recent::Recent;
use super::rounds::{self, Answer, Job, Op};
use crate::domain::ReceiptKey;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How batches are formed (`--group-commit-lanes`, `--group-commit-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Batches in flight at once; `None`: the store's default.
    pub lanes: Option<usize>,
    /// Most jobs in one batch.
    pub size: usize,
}

#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Job>,
    running: usize,
}

/// The queue and its lanes; one per store, shared by its clones.
#[derive(Debug, Clone)]
pub struct Batcher {
    queue: Arc<Mutex<Queue>>,
    recent: Arc<Recent>,
    lanes: usize,
    size: usize,
}

impl Batcher {
    /// An empty queue, with `default_lanes` unless `options` name how many.
    pub fn new(options: BatchOptions, default_lanes: usize) -> Batcher {
        Batcher {
            queue: Arc::default(),
            recent: Arc::default(),
            lanes: options.lanes.unwrap_or(default_lanes).max(1),
            size: options.size.max(1),
        }
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
        let job = Job::new(tenant, id, op, due, reply, &self.recent);
        let start = {
            let mut queue = self.queue();
            queue.waiting.push_back(job);
            let start = queue.running < self.lanes;
            queue.running += usize::from(start);
            start
        };
        if start {
            tokio::spawn(self.clone().lane(driver.clone()));
        }
        answer.await.unwrap_or(Err(StoreError::Corrupt(
            "a batch ended without an answer".into(),
        )))
    }

    /// Runs batches until the queue is empty.
    async fn lane<D: Driver>(self, driver: D) {
        loop {
            let batch = {
                let mut queue = self.queue();
                if queue.waiting.is_empty() {
                    queue.running -= 1;
                    return;
                }
                take(&mut queue.waiting, self.size)
            };
            rounds::run(&driver, &self.recent, batch).await;
        }
    }
}

/// Up to `size` queued jobs, in arrival order, at most one per row (a second job for a row
/// waits for the next batch, so no statement changes a row twice).
fn take(waiting: &mut VecDeque<Job>, size: usize) -> Vec<Job> {
    let mut batch = Vec::with_capacity(size.min(waiting.len()));
    let mut rows = HashSet::new();
    let mut later = VecDeque::new();
    while let Some(job) = waiting.pop_front() {
        if batch.len() == size {
            waiting.push_front(job);
            break;
        }
        if rows.insert((job.tenant.clone(), job.id.clone())) {
            batch.push(job);
        } else {
            later.push_back(job);
        }
    }
    later.append(waiting);
    *waiting = later;
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(tenant: &str, key: &str) -> Job {
        let id = ReceiptKey {
            namespace: "ns".into(),
            key: key.into(),
        };
        let (reply, _) = oneshot::channel();
        Job::new(tenant, &id, Op::Redrive, None, reply, &Recent::default())
    }

    fn names(jobs: &[Job]) -> Vec<String> {
        jobs.iter()
            .map(|j| format!("{}/{}", j.tenant, j.id.key))
            .collect()
    }

    #[test]
    fn a_batch_takes_one_job_per_row_in_arrival_order_and_leaves_the_rest_queued() {
        let mut waiting: VecDeque<Job> = [
            job("a", "1"),
            job("a", "2"),
            job("a", "1"),
            job("b", "1"),
            job("a", "3"),
            job("a", "2"),
        ]
        .into();
        let batch = take(&mut waiting, 3);
        assert_eq!(names(&batch), ["a/1", "a/2", "b/1"]);
        let rest: Vec<Job> = waiting.drain(..).collect();
        assert_eq!(names(&rest), ["a/1", "a/3", "a/2"]);
        let mut waiting: VecDeque<Job> = rest.into();
        assert_eq!(names(&take(&mut waiting, 8)), ["a/1", "a/3", "a/2"]);
        assert!(waiting.is_empty());
    }
}
