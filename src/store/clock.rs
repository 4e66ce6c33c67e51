//! The stores' view of time: the database's clock plus an offset. The offset is zero in
//! production; tests advance it to move time without sleeping, while every replica still
//! reads one clock. Model tests may also freeze the base time so that expected timestamps
//! are exact.

use crate::domain::Timestamp;
use chrono::{DateTime, TimeDelta, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Marks an unfrozen clock.
const NOT_FROZEN: i64 = i64::MIN;

#[derive(Debug)]
struct State {
    offset_micros: AtomicI64,
    frozen_micros: AtomicI64,
}

/// A shared, adjustable clock for the stores.
#[derive(Debug, Clone)]
pub struct Clock(Arc<State>);

impl Default for Clock {
    /// The database's own clock, unshifted.
    fn default() -> Self {
        Clock(Arc::new(State {
            offset_micros: AtomicI64::new(0),
            frozen_micros: AtomicI64::new(NOT_FROZEN),
        }))
    }
}

impl Clock {
    /// A clock that stands at `at` until advanced (for tests that compare exact times).
    pub fn frozen_at(at: Timestamp) -> Clock {
        let clock = Clock::default();
        clock
            .0
            .frozen_micros
            .store(at.timestamp_micros(), Ordering::SeqCst);
        clock
    }

    /// Moves time forward (or back, with a negative delta) for every store sharing this clock.
    pub fn advance(&self, by: TimeDelta) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.0.offset_micros.fetch_add(micros, Ordering::SeqCst);
    }

    /// The offset in microseconds added to the base time.
    pub fn offset_micros(&self) -> i64 {
        self.0.offset_micros.load(Ordering::SeqCst)
    }

    /// The frozen base time, if any; `None` means the database's clock.
    pub fn frozen(&self) -> Option<Timestamp> {
        match self.0.frozen_micros.load(Ordering::SeqCst) {
            NOT_FROZEN => None,
            micros => DateTime::from_timestamp_micros(micros),
        }
    }

    /// Now, given the database's (or process's) current time.
    pub fn now_from(&self, base: Timestamp) -> Timestamp {
        self.frozen().unwrap_or(base) + TimeDelta::microseconds(self.offset_micros())
    }

    /// Now, on this process's clock (for the embedded store, whose database is this process),
    /// at the microsecond precision the stores keep.
    pub fn now(&self) -> Timestamp {
        let base = Utc::now();
        let micros = DateTime::from_timestamp_micros(base.timestamp_micros()).unwrap_or(base);
        self.now_from(micros)
    }
}
