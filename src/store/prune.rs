//! What the janitor asks of a store: which namespaces hold terminal receipts, one bounded
//! prune statement at a time, and the lock that lets one replica at a time prune.

use super::StoreError;
use chrono::TimeDelta;

/// The retention of one namespace, as the janitor applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneScope {
    /// The namespace (of every tenant).
    pub namespace: String,
    /// Terminal receipts older than this are deleted (COMPLETED by `completed_at`,
    /// QUARANTINED by `updated_at`).
    pub retention: TimeDelta,
    /// COMPLETED receipts older than this lose their response (tombstones).
    pub response_retention: TimeDelta,
}

/// One kind of prune statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PruneStep {
    /// Delete terminal receipts past `retention`.
    Delete,
    /// Set `response` to NULL on COMPLETED receipts past `response_retention`, keeping the
    /// row (and `updated_at`).
    StripResponse,
}

impl PruneStep {
    /// A stable lower-case name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            PruneStep::Delete => "deleted",
            PruneStep::StripResponse => "stripped",
        }
    }
}

/// A lock a driver holds for the janitor; [`HeldLock::release`] gives it back.
#[async_trait::async_trait]
pub trait HeldLock: Send {
    /// Releases the lock.
    async fn release(self: Box<Self>) -> Result<(), StoreError>;
}

/// Held while one janitor pass runs. On PostgreSQL it is a dedicated session holding an
/// advisory lock; [`JanitorLock::release`] unlocks it, and dropping the guard closes the
/// session, which releases the lock too. The embedded store has one process, so its guard
/// holds nothing.
pub struct JanitorLock {
    held: Option<Box<dyn HeldLock>>,
}

impl std::fmt::Debug for JanitorLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.held {
            Some(_) => "held",
            None => "in-process",
        };
        f.debug_struct("JanitorLock").field("kind", &kind).finish()
    }
}

impl JanitorLock {
    /// The guard of a store that one process owns.
    pub(crate) fn in_process() -> JanitorLock {
        JanitorLock { held: None }
    }

    /// The guard of a lock a driver holds.
    pub(crate) fn held(lock: Box<dyn HeldLock>) -> JanitorLock {
        JanitorLock { held: Some(lock) }
    }

    /// Releases the lock.
    pub async fn release(self) -> Result<(), StoreError> {
        match self.held {
            Some(lock) => lock.release().await,
            None => Ok(()),
        }
    }
}
