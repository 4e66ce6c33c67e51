//! The janitor (docs/DESIGN.md §3.7, "bounded growth"): a small background service that, every
//! `--janitor-interval`, deletes terminal receipts past their namespace's `retention` and
//! strips the response from COMPLETED receipts past `response_retention`, leaving a
//! tombstone that still answers COMPLETED.
//!
//! A pass takes the store's janitor lock (PostgreSQL: an advisory lock, so one replica
//! prunes at a time; a replica that does not get it skips the pass), reads the policies in
//! force, lists the namespaces that hold terminal receipts and prunes each with its own
//! policy (the default for namespaces without an override), in statements of at most
//! `--janitor-batch` rows, each its own short transaction, until one comes back short.
//! PROCESSING and RETRY_WAIT receipts are never touched. Ages are measured on the
//! database clock. Passes that did work are logged at info; every pruned receipt counts in
//! `claimd_receipts_pruned_total{kind="deleted"|"stripped"}`.

use crate::domain::PolicyHandle;
use crate::store::{PruneScope, PruneStep, Store, StoreError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often and in what batches the janitor prunes (`--janitor-interval`,
/// `--janitor-batch`; their defaults are in `config::defaults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JanitorOptions {
    /// Time between passes; zero turns the background janitor off.
    pub interval: Duration,
    /// Most rows one statement deletes or strips.
    pub batch: u32,
}

/// What one pass did.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    /// Receipts deleted (retention passed).
    pub deleted: u64,
    /// Responses stripped (response_retention passed).
    pub stripped: u64,
    /// Namespaces with terminal receipts that were looked at.
    pub namespaces: usize,
    /// Prune statements run.
    pub statements: u32,
    /// The most rows one statement deleted or stripped (never more than the batch).
    pub largest_statement: u64,
    /// How long the pass took.
    pub elapsed: Duration,
}

impl PassReport {
    fn record(&mut self, step: PruneStep, rows: u64) {
        match step {
            PruneStep::Delete => self.deleted += rows,
            PruneStep::StripResponse => self.stripped += rows,
        }
        self.statements += 1;
        self.largest_statement = self.largest_statement.max(rows);
    }
}

/// The outcome of one pass.
#[derive(Debug, Clone)]
pub enum Pass {
    /// This process held the lock and pruned.
    Ran(PassReport),
    /// Another process holds the janitor lock: nothing was done.
    Skipped,
}

/// Prunes one store under the policies in force.
#[derive(Clone)]
pub struct Janitor {
    store: Arc<dyn Store>,
    policies: PolicyHandle,
    batch: u32,
}

impl Janitor {
    /// A janitor for `store` that reads `policies` at every pass and prunes at most `batch`
    /// rows per statement.
    pub fn new(store: Arc<dyn Store>, policies: PolicyHandle, batch: u32) -> Janitor {
        Janitor {
            store,
            policies,
            batch: batch.max(1),
        }
    }

    /// One pass, now (what the background task runs at every interval; tests call it).
    pub async fn run_once(&self) -> Result<Pass, StoreError> {
        let (_never, stop) = watch::channel(false);
        self.pass(&stop).await
    }

    /// One pass that ends early, between statements, once `stop` turns true.
    async fn pass(&self, stop: &watch::Receiver<bool>) -> Result<Pass, StoreError> {
        let Some(lock) = self.store.try_lock_janitor().await? else {
            tracing::debug!("janitor: another replica holds the lock; skipping this pass");
            return Ok(Pass::Skipped);
        };
        let pruned = self.prune_all(stop).await;
        if let Err(error) = lock.release().await {
            tracing::warn!(%error, "janitor: releasing the lock failed (its session is closed)");
        }
        pruned.map(Pass::Ran)
    }

    async fn prune_all(&self, stop: &watch::Receiver<bool>) -> Result<PassReport, StoreError> {
        let started = Instant::now();
        let policies = self.policies.current();
        let namespaces = self.store.terminal_namespaces().await?;
        let mut report = PassReport {
            namespaces: namespaces.len(),
            ..PassReport::default()
        };
        'namespaces: for namespace in namespaces {
            let policy = policies.for_namespace(&namespace);
            let scope = PruneScope {
                namespace,
                retention: policy.retention,
                response_retention: policy.response_retention,
            };
            for step in [PruneStep::Delete, PruneStep::StripResponse] {
                // With equal retentions, deleting leaves no response to strip.
                if step == PruneStep::StripResponse && scope.response_retention >= scope.retention {
                    continue;
                }
                loop {
                    if *stop.borrow() {
                        break 'namespaces;
                    }
                    let rows = self.store.prune(&scope, step, self.batch).await?;
                    report.record(step, rows);
                    count_pruned(step, rows);
                    if rows < u64::from(self.batch) {
                        break;
                    }
                }
            }
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

/// The metrics hook: every pruned receipt, by kind (`deleted`, `stripped`).
fn count_pruned(step: PruneStep, rows: u64) {
    if rows > 0 {
        metrics::counter!(crate::telemetry::exporter::RECEIPTS_PRUNED, "kind" => step.as_str())
            .increment(rows);
    }
}

/// The janitor running in the background.
pub struct JanitorTask {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl JanitorTask {
    /// Runs a pass every `interval`, the first one interval after the start; `None` when
    /// `interval` is zero (the janitor is off).
    pub fn spawn(janitor: Janitor, interval: Duration) -> Option<JanitorTask> {
        if interval.is_zero() {
            tracing::info!("janitor off (--janitor-interval 0): nothing is pruned");
            return None;
        }
        let (stop, stopped) = watch::channel(false);
        let handle = tokio::spawn(run(janitor, interval, stopped));
        Some(JanitorTask { stop, handle })
    }

    /// Tells the janitor to stop after its current statement (a pass in progress ends
    /// early); the handle completes once it has. Aborting the handle instead ends the
    /// statement with its transaction (and, on PostgreSQL, the lock's session).
    pub fn stop(self) -> JoinHandle<()> {
        let _ = self.stop.send(true);
        self.handle
    }
}

async fn run(janitor: Janitor, interval: Duration, mut stop: watch::Receiver<bool>) {
    let start = tokio::time::Instant::now() + interval;
    let mut tick = tokio::time::interval_at(start, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        match janitor.pass(&stop).await {
            Ok(Pass::Ran(r)) if r.deleted + r.stripped > 0 => tracing::info!(
                deleted = r.deleted,
                stripped = r.stripped,
                namespaces = r.namespaces,
                statements = r.statements,
                elapsed_ms = r.elapsed.as_millis() as u64,
                "janitor pass"
            ),
            Ok(_) => tracing::debug!("janitor pass: nothing to prune"),
            Err(error) => tracing::warn!(%error, "janitor pass failed; trying again later"),
        }
        if *stop.borrow() {
            return;
        }
    }
}
