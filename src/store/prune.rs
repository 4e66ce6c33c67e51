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

/// Held while one janitor pass runs. On PostgreSQL it is a dedicated session holding the
/// advisory lock [`super::postgres::JANITOR_LOCK_KEY`]; [`JanitorLock::release`] unlocks
/// it, and dropping the guard closes the session, which releases the lock too. The
/// embedded store has one process, so its guard holds nothing.
pub struct JanitorLock {
    session: Option<sqlx::PgConnection>,
}

impl std::fmt::Debug for JanitorLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.session {
            Some(_) => "advisory",
            None => "in-process",
        };
        f.debug_struct("JanitorLock").field("kind", &kind).finish()
    }
}

impl JanitorLock {
    /// The guard of a store that one process owns.
    pub(crate) fn in_process() -> JanitorLock {
        JanitorLock { session: None }
    }

    /// The guard of a PostgreSQL session that holds the advisory lock.
    pub(crate) fn session(session: sqlx::PgConnection) -> JanitorLock {
        JanitorLock {
            session: Some(session),
        }
    }

    /// Releases the lock (and closes its session).
    pub async fn release(self) -> Result<(), StoreError> {
        match self.session {
            Some(session) => super::postgres::unlock_janitor(session).await,
            None => Ok(()),
        }
    }
}
