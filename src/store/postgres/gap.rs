//! How far the database's clock is from claimd's, for the write statement's deadline check
//! (`batch.rs`). Each write statement returns the database's `clock_timestamp()` taken at
//! its end; claimd reads its own wall clock once the answer is in. The difference is never
//! more than the true gap (the database's reading was taken before claimd's), and short of
//! it by at most that statement's round trip. A deadline on claimd's clock plus this gap is
//! then a deadline on the database's clock that is never later than the caller's: a write
//! checked against it is not made after its caller stopped waiting, whatever the trip to
//! the database cost, and however far apart the two wall clocks are (docs/DESIGN.md §4.2.1).

use crate::domain::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Marks "no statement has answered yet".
const UNKNOWN: i64 = i64::MIN;

/// The last measured gap between the database's wall clock and claimd's, shared by the
/// driver's clones.
#[derive(Debug, Clone)]
pub(super) struct ClockGap(Arc<AtomicI64>);

impl ClockGap {
    /// A gap not yet measured.
    pub(super) fn new() -> ClockGap {
        ClockGap(Arc::new(AtomicI64::new(UNKNOWN)))
    }

    /// Records a statement's `clock_timestamp()`, read now that its answer is in.
    pub(super) fn observe(&self, db_wall: Timestamp) {
        let gap = db_wall - chrono::Utc::now();
        if let Some(micros) = gap.num_microseconds() {
            self.0.store(micros, Ordering::Relaxed);
        }
    }

    /// The database's wall clock now, as far as the last measurement tells (claimd's own
    /// before any): behind it by at most a round trip.
    pub(super) fn db_now(&self) -> Timestamp {
        let now = chrono::Utc::now();
        match self.0.load(Ordering::Relaxed) {
            UNKNOWN => now,
            gap => now
                .checked_add_signed(chrono::TimeDelta::microseconds(gap))
                .unwrap_or(now),
        }
    }

    /// `left` from now on the database's clock, if the gap has been measured.
    pub(super) fn db_clock_in(&self, left: std::time::Duration) -> Option<Timestamp> {
        let gap = self.0.load(Ordering::Relaxed);
        if gap == UNKNOWN {
            return None;
        }
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
}
