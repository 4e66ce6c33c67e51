//! How far the database's clock is from claimd's, for the write statement's deadline check
//! (`batch.rs`) and the store's clock estimate (a waiting Claim's wake-up at a lease's end,
//! §2.9). Each batch read and write statement returns the database's `clock_timestamp()`;
//! claimd reads its own wall clock once the answer is in. Each such sample is never more
//! than the true gap (the database's reading was taken before claimd's), and short of it by
//! the time between the two readings: the answer's trip, and for a write whatever its
//! commit waited for after the statement read the clock (a synchronous standby not
//! attached yet, issue 46) — seconds, at times. So the gap kept is the **largest** sample
//! of the last [`WINDOW`] or so: the one taken closest to its answer, still never more
//! than the true gap, so a deadline on claimd's clock plus this gap is a deadline on the
//! database's clock never later than the caller's: a write checked against it is not made
//! after its caller stopped waiting, whatever the trip to the database cost, and however far
//! apart the two wall clocks are (docs/DESIGN.md §4.2.1). Older samples are let go, so a
//! wall clock stepped back is followed within two windows.

use crate::domain::Timestamp;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a sample counts: the gap kept is the largest of the current window's and the
/// one before's samples.
const WINDOW: Duration = Duration::from_secs(5);

/// The samples of two windows.
#[derive(Debug)]
struct Samples {
    /// When the current window began, and its largest sample (microseconds).
    began: Instant,
    current: Option<i64>,
    /// The largest sample of the window before, if it ended less than a window ago.
    previous: Option<i64>,
}

/// The measured gap between the database's wall clock and claimd's, shared by the
/// driver's clones.
#[derive(Debug, Clone)]
pub(super) struct ClockGap(Arc<Mutex<Samples>>);

impl ClockGap {
    /// A gap not yet measured.
    pub(super) fn new() -> ClockGap {
        ClockGap(Arc::new(Mutex::new(Samples {
            began: Instant::now(),
            current: None,
            previous: None,
        })))
    }

    /// Records a statement's `clock_timestamp()`, read now that its answer is in.
    pub(super) fn observe(&self, db_wall: Timestamp) {
        let Some(sample) = (db_wall - chrono::Utc::now()).num_microseconds() else {
            return;
        };
        // Nothing panics while the lock is held; a poisoned one still holds valid samples.
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let age = s.began.elapsed();
        if age >= WINDOW {
            s.previous = if age < 2 * WINDOW { s.current } else { None };
            s.current = None;
            s.began = Instant::now();
        }
        s.current = Some(s.current.map_or(sample, |best| best.max(sample)));
    }

    /// The gap in microseconds: the largest recent sample; `None` before any.
    fn gap(&self) -> Option<i64> {
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match (s.current, s.previous) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The database's wall clock now, as far as the samples tell (claimd's own before
    /// any): never ahead of it.
    pub(super) fn db_now(&self) -> Timestamp {
        let now = chrono::Utc::now();
        match self.gap() {
            None => now,
            Some(gap) => now
                .checked_add_signed(chrono::TimeDelta::microseconds(gap))
                .unwrap_or(now),
        }
    }

    /// `left` from now on the database's clock, if the gap has been measured.
    pub(super) fn db_clock_in(&self, left: std::time::Duration) -> Option<Timestamp> {
        let gap = self.gap()?;
        let left = chrono::TimeDelta::from_std(left).ok()?;
        chrono::Utc::now()
            .checked_add_signed(chrono::TimeDelta::microseconds(gap))?
            .checked_add_signed(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_is_moved_by_the_measured_gap_and_unknown_before_any_measurement() {
        let gap = ClockGap::new();
        assert_eq!(gap.db_clock_in(Duration::from_secs(1)), None);
        // A database five minutes ahead of claimd.
        gap.observe(chrono::Utc::now() + chrono::TimeDelta::seconds(300));
        let due = gap.db_clock_in(Duration::from_secs(1)).expect("measured");
        let ahead = due - chrono::Utc::now();
        assert!(
            ahead > chrono::TimeDelta::seconds(300) && ahead <= chrono::TimeDelta::seconds(301),
            "{ahead}"
        );
    }

    #[test]
    fn a_sample_taken_after_a_commit_waited_does_not_pull_the_gap_back() {
        let gap = ClockGap::new();
        // Read 10 ms before its answer; then a write whose commit waited 1.8 s after its
        // statement read the clock.
        gap.observe(chrono::Utc::now() - chrono::TimeDelta::milliseconds(10));
        gap.observe(chrono::Utc::now() - chrono::TimeDelta::milliseconds(1800));
        let behind = chrono::Utc::now() - gap.db_now();
        assert!(behind < chrono::TimeDelta::milliseconds(100), "{behind}");
    }
}
