//! The closed loop of one timed round: N caller tasks, each with its own [`Recorder`]
//! (an HDR histogram of cycle latencies in microseconds, the cycle count, the wrong answers
//! apart), started together and joined; the round's elapsed time runs until the last caller
//! stops. Wrong answers never count as cycles. For a soak, a [`Pacer`] holds the callers to
//! a rate and a [`Tap`] copies every record into one shared period's [`Recorder`].

use hdrhistogram::Histogram;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Wrong answers kept verbatim per caller (the rest are only counted).
const KEEP_ERRORS: usize = 3;

/// Highest latency the histograms hold, in microseconds (larger ones are clamped).
const MAX_MICROS: u64 = 600_000_000;

/// A retry the mixed workload still owes: the event's key and when it is surely due.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The event's key.
    pub key: String,
    /// Before this the retry is surely not due yet (a Claim is RETRY_SCHEDULED).
    pub not_before: Instant,
    /// From this on the retry is surely due (a Claim takes it over).
    pub due: Instant,
}

/// What one caller measured.
pub struct Recorder {
    /// Latency of each successful cycle, microseconds.
    pub hist: Histogram<u64>,
    /// Successful cycles.
    pub cycles: u64,
    /// Wrong answers and failed calls.
    pub errors: u64,
    /// The first few of them.
    pub first_errors: Vec<String>,
    /// The mixed workload's retries not yet delivered again, oldest first.
    pub pending: Vec<Pending>,
    /// Set when a workload's prepared keys ran out before the deadline.
    pub ran_out: bool,
    /// Where every record is copied as well (a soak's current period).
    pub tap: Option<Tap>,
}

/// One record shared by every caller of a soak, taken (and replaced by an empty one) at
/// the end of each sample period.
pub type Tap = Arc<Mutex<Recorder>>;

/// An empty histogram with the bench's bounds.
pub fn histogram() -> Histogram<u64> {
    // Valid constant bounds: low 1, high well above 2 * low, 3 significant figures.
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            hist: histogram(),
            cycles: 0,
            errors: 0,
            first_errors: Vec::new(),
            pending: Vec::new(),
            ran_out: false,
            tap: None,
        }
    }
}

impl Recorder {
    /// An empty record whose records are copied into `tap` too.
    pub fn tapped(tap: Option<Tap>) -> Recorder {
        Recorder {
            tap,
            ..Recorder::default()
        }
    }

    /// Records one successful cycle that took `latency`.
    pub fn ok(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.hist.saturating_record(micros.clamp(1, MAX_MICROS));
        self.cycles += 1;
        if let Some(tap) = &self.tap {
            lock(tap).ok(latency);
        }
    }

    /// Records one wrong answer or failed call.
    pub fn error(&mut self, message: String) {
        if let Some(tap) = &self.tap {
            lock(tap).error(message.clone());
        }
        self.errors += 1;
        if self.first_errors.len() < KEEP_ERRORS {
            self.first_errors.push(message);
        }
    }
}

/// The tap's record, even if a caller panicked while holding it (a record stays valid).
pub fn lock(tap: &Tap) -> std::sync::MutexGuard<'_, Recorder> {
    tap.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Open-loop pacing: the n-th cycle of all callers together may start at `start + n / rate`
/// and not before. Slots are never skipped: when every caller is busy past its slot, the
/// cycles start late (see [`Pacer::behind`]) and catch up as soon as callers are free.
pub struct Pacer {
    start: Instant,
    interval: Duration,
    next: AtomicU64,
}

impl Pacer {
    /// `rate` cycles per second from now.
    pub fn new(rate: f64) -> Pacer {
        Pacer {
            start: Instant::now(),
            interval: Duration::from_secs_f64(1.0 / rate),
            next: AtomicU64::new(0),
        }
    }

    /// The start time of slot `n`.
    fn slot(&self, n: u64) -> Instant {
        self.start + self.interval.mul_f64(n as f64)
    }

    /// Waits for the next free slot.
    pub async fn wait(&self) {
        let slot = self.slot(self.next.fetch_add(1, Ordering::Relaxed));
        tokio::time::sleep_until(slot.into()).await;
    }

    /// How far the next free slot lies in the past now: zero while the callers keep up.
    pub fn behind(&self) -> Duration {
        let slot = self.slot(self.next.load(Ordering::Relaxed));
        Instant::now().saturating_duration_since(slot)
    }
}

/// Waits for `pacer`'s next slot, if there is one.
pub async fn pace(pacer: Option<&Pacer>) {
    if let Some(pacer) = pacer {
        pacer.wait().await;
    }
}

/// The callers' records merged.
pub struct Merged {
    /// Every successful cycle's latency.
    pub hist: Histogram<u64>,
    /// Successful cycles.
    pub cycles: u64,
    /// Wrong answers and failed calls.
    pub errors: u64,
    /// The first few of them, from all callers.
    pub first_errors: Vec<String>,
    /// Whether any caller ran out of prepared keys.
    pub ran_out: bool,
}

/// Merges the callers' records.
pub fn merge(recorders: &[Recorder]) -> Merged {
    let mut merged = Merged {
        hist: histogram(),
        cycles: 0,
        errors: 0,
        first_errors: Vec::new(),
        ran_out: false,
    };
    for r in recorders {
        // Same bounds on both sides: adding cannot fail.
        merged
            .hist
            .add(&r.hist)
            .expect("histograms with equal bounds");
        merged.cycles += r.cycles;
        merged.errors += r.errors;
        merged.ran_out |= r.ran_out;
        for e in &r.first_errors {
            if merged.first_errors.len() < 2 * KEEP_ERRORS {
                merged.first_errors.push(e.clone());
            }
        }
    }
    merged
}

/// Runs `callers` tasks `caller(i, deadline)` at once, each looping until `deadline`;
/// returns their records and the time from start until the last one stopped.
pub async fn closed_loop<F, Fut>(
    callers: usize,
    length: Duration,
    caller: F,
) -> anyhow::Result<(Vec<Recorder>, Duration)>
where
    F: Fn(usize, Instant) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let start = Instant::now();
    let deadline = start + length;
    let tasks: Vec<_> = (0..callers)
        .map(|i| tokio::spawn(caller(i, deadline)))
        .collect();
    let mut recorders = Vec::with_capacity(callers);
    for task in tasks {
        recorders.push(task.await?);
    }
    Ok((recorders, start.elapsed()))
}
