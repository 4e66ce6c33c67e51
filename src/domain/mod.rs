//! The pure rules of claimd: receipts, states, decisions, policies, tenant quotas, backoff and the
//! transition functions of docs/DESIGN.md §2. No I/O, no tonic, no sqlx: every store implements
//! these rules (in SQL where speed matters) and the model-based tests use them as the oracle:
//! `decide_claim` (claim), `apply` (action: the holder's calls), `redrive` and
//! `quarantine_orphan` (orphan: the console's compare-and-set Quarantine).

mod action;
mod backoff;
mod claim;
mod names;
mod orphan;
mod policy;
mod quota;
mod redrive;

pub use action::{Action, ActionError, apply};
pub use backoff::backoff_delay;
pub use claim::{ClaimInput, ClaimOutcome, Write, decide_claim};
pub use names::{MAX_NAMESPACE, MAX_TENANT, NAME_ALPHABET, NameError, check_name, is_name_char};
pub use orphan::{NotQuarantined, Seen, quarantine_orphan};
pub use policy::{MAX_DELAY, MIN_DELAY, Policies, Policy, PolicyHandle};
pub use quota::{Quota, Quotas, Rate, Storage, StorageLimit, StorageRefusal};
pub use redrive::redrive;

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A point in time on the database's clock, microsecond precision.
pub type Timestamp = DateTime<Utc>;

/// The error text stored when a receipt runs out of attempts.
pub const EXCEEDED_MAX_ATTEMPTS: &str = "exceeded max attempts";

/// The durable state of a receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// A holder works on it under a lease.
    Processing,
    /// Waiting for `next_attempt_at`, then claimable again.
    RetryWait,
    /// Done; terminal.
    Completed,
    /// Dead letter; terminal.
    Quarantined,
}

impl State {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Processing => "processing",
            State::RetryWait => "retry_wait",
            State::Completed => "completed",
            State::Quarantined => "quarantined",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "processing" => State::Processing,
            "retry_wait" => State::RetryWait,
            "completed" => State::Completed,
            "quarantined" => State::Quarantined,
            _ => return None,
        })
    }
}

/// The answer to a Claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The caller holds a new lease (first claim or takeover).
    Claimed,
    /// Somebody else holds an unexpired lease.
    InFlight,
    /// Done; the stored response is replayed.
    Completed,
    /// A retry is scheduled for later.
    RetryScheduled,
    /// Dead letter.
    Quarantined,
    /// Same key, another fingerprint.
    Conflict,
}

impl Decision {
    /// A stable lower-case name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Claimed => "claimed",
            Decision::InFlight => "in_flight",
            Decision::Completed => "completed",
            Decision::RetryScheduled => "retry_scheduled",
            Decision::Quarantined => "quarantined",
            Decision::Conflict => "conflict",
        }
    }
}

/// Names one receipt within a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReceiptKey {
    /// The caller-chosen group.
    pub namespace: String,
    /// The platform's event id.
    pub key: String,
}

/// The one durable record of (tenant, namespace, key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Namespace and key.
    pub id: ReceiptKey,
    /// Current state.
    pub state: State,
    /// The fencing number: 1 at the first claim, +1 at every later claim.
    pub attempt: u32,
    /// Attempts that did not spend the budget (`Retry` with `count_attempt = false`).
    pub free_attempts: u32,
    /// The caller's digest of the payload.
    pub fingerprint: Vec<u8>,
    /// The current holder's token (kept after Retry, Quarantine and Complete so the last
    /// holder gets precise answers; cleared when claimd itself quarantines).
    pub claim_token: Option<Uuid>,
    /// End of the lease (PROCESSING only).
    pub lease_expires_at: Option<Timestamp>,
    /// When a RETRY_WAIT receipt becomes claimable.
    pub next_attempt_at: Option<Timestamp>,
    /// First claim.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Completion time.
    pub completed_at: Option<Timestamp>,
    /// Error of the last Retry or Quarantine.
    pub last_error: Option<String>,
    /// Opaque progress bytes.
    pub checkpoint: Option<Vec<u8>>,
    /// The stored response, replayed to duplicates.
    pub response: Option<Vec<u8>>,
    /// Returned to whoever takes the work over.
    pub recovery_payload: Option<Vec<u8>>,
    /// When the janitor dropped the response of this COMPLETED receipt (a tombstone).
    pub response_pruned_at: Option<Timestamp>,
}

impl Receipt {
    /// Attempts that spent the budget so far.
    pub fn spent_attempts(&self) -> u32 {
        self.attempt.saturating_sub(self.free_attempts)
    }

    /// When somebody other than the holder may act on it: the lease end for PROCESSING, the
    /// retry time for RETRY_WAIT, never for terminal states.
    pub fn due_at(&self) -> Option<Timestamp> {
        match self.state {
            State::Processing => self.lease_expires_at,
            State::RetryWait => self.next_attempt_at,
            State::Completed | State::Quarantined => None,
        }
    }

    /// Whether nobody works on it although it is not done, at `now`: PROCESSING with a
    /// lease that has ended, or RETRY_WAIT that is due (what ListOrphaned lists).
    pub fn orphaned_at(&self, now: Timestamp) -> bool {
        self.due_at().is_some_and(|due| due <= now)
    }
}
