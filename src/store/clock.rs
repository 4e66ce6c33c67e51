//! The offset the stores add to the database's clock. It is zero in production; tests
//! advance it to move time without sleeping, while every replica still reads one clock.

use chrono::TimeDelta;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A shared, adjustable offset in microseconds added to the database's `now()`.
#[derive(Debug, Clone, Default)]
pub struct Clock(Arc<AtomicI64>);

impl Clock {
    /// Moves time forward (or back, with a negative delta) for every store sharing this clock.
    pub fn advance(&self, by: TimeDelta) {
        let micros = by.num_microseconds().unwrap_or(i64::MAX);
        self.0.fetch_add(micros, Ordering::SeqCst);
    }

    /// The current offset in microseconds.
    pub fn offset_micros(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
