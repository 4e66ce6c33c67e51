//! What waiting Claims record (docs/DESIGN.md §2.9): how many wait right now
//! (`claimd_claim_waiting`), what woke them (`claimd_claim_wakeups_total{cause}`) and how
//! each wait ended (`claimd_claim_waits_total{ended}`). No label names a receipt.

use super::exporter::{CLAIM_WAITING, CLAIM_WAITS, CLAIM_WAKEUPS};

/// How a wait ended: the `ended` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The receipt settled: COMPLETED, RETRY_SCHEDULED, QUARANTINED (or CONFLICT).
    Settled,
    /// The holder's lease ran out and this call took the work over.
    Claimed,
    /// The wait (or the call's deadline) ran out first: IN_FLIGHT.
    TimedOut,
    /// claimd started draining: IN_FLIGHT at once.
    Drained,
    /// `--max-waiting-claims` were already waiting: IN_FLIGHT at once.
    Full,
    /// The caller went away, or the store failed, before an answer.
    Abandoned,
}

impl Ended {
    /// Every value, registered at zero.
    pub const ALL: [Ended; 6] = [
        Ended::Settled,
        Ended::Claimed,
        Ended::TimedOut,
        Ended::Drained,
        Ended::Full,
        Ended::Abandoned,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Ended::Settled => "settled",
            Ended::Claimed => "claimed",
            Ended::TimedOut => "timed_out",
            Ended::Drained => "drained",
            Ended::Full => "full",
            Ended::Abandoned => "abandoned",
        }
    }

    /// Counts one wait that ended so.
    pub fn count(self) {
        metrics::counter!(CLAIM_WAITS, "ended" => self.name()).increment(1);
    }
}

/// Counts one wake-up of a waiting Claim by `cause` (`settled`, `lease_end`).
pub fn woke(cause: &'static str) {
    metrics::counter!(CLAIM_WAKEUPS, "cause" => cause).increment(1);
}

/// One waiting call in `claimd_claim_waiting` for as long as it lives; counted as
/// [`Ended::Abandoned`] if dropped before [`Waiting::end`].
#[derive(Debug)]
pub struct Waiting {
    ended: bool,
}

impl Waiting {
    /// Counts a call that starts to wait.
    pub fn start() -> Waiting {
        metrics::gauge!(CLAIM_WAITING).increment(1.0);
        Waiting { ended: false }
    }

    /// The wait ended with an answer.
    pub fn end(&mut self, how: Ended) {
        how.count();
        self.ended = true;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!(CLAIM_WAITING).decrement(1.0);
        if !self.ended {
            Ended::Abandoned.count();
        }
    }
}
