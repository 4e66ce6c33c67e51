//! A server that accepts no writes (docs/DESIGN.md §4.3): a standby a DNS name, a virtual IP
//! or a pooler still points at after a failover, or a primary still being promoted. Health
//! asks the server ([`PROBE`]) and reports NOT_SERVING while it is read-only; a write it
//! refuses (SQLSTATE 25006) is UNAVAILABLE. Either way the pool forgets the connections it
//! made before ([`Seen`]), so claimd follows the leader to whichever server the address
//! reaches next, without a restart.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// True when the server accepts no writes: in recovery (a standby), or read-only by
/// setting (`default_transaction_read_only`, which `transaction_read_only` reflects).
pub(super) const PROBE: &str =
    "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean";

/// Why health says NOT_SERVING on a read-only server.
pub(super) const REFUSES_WRITES: &str =
    "the server is in recovery or read-only (a standby, or a primary still being promoted)";

/// When the server was last found read-only.
#[derive(Debug, Default)]
pub(super) struct Seen {
    at: Mutex<Option<Instant>>,
}

impl Seen {
    /// The server was found read-only now.
    pub(super) fn seen(&self) {
        *self.at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Whether a connection of `age` was made before the server was last found read-only
    /// (so it may be a connection to that server).
    pub(super) fn made_before(&self, age: Duration) -> bool {
        let at = *self.at.lock().unwrap_or_else(|p| p.into_inner());
        at.is_some_and(|at| age > at.elapsed())
    }
}
