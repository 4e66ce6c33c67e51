//! The closed loop of one timed round: N caller tasks, each with its own [`Recorder`]
//! (an HDR histogram of cycle latencies in microseconds, the cycle count, the wrong answers
//! apart), started together and joined; the round's elapsed time runs until the last caller
//! stops. Wrong answers never count as cycles.

use hdrhistogram::Histogram;
use std::future::Future;
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
}

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
        }
    }
}

impl Recorder {
    /// Records one successful cycle that took `latency`.
    pub fn ok(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.hist.saturating_record(micros.clamp(1, MAX_MICROS));
        self.cycles += 1;
    }

    /// Records one wrong answer or failed call.
    pub fn error(&mut self, message: String) {
        self.errors += 1;
        if self.first_errors.len() < KEEP_ERRORS {
            self.first_errors.push(message);
        }
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
