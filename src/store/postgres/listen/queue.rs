//! PostgreSQL's notification queue, as the listening connection watches it
//! (docs/DESIGN.md §2.9). The queue (8 GB, one per cluster) is freed only up to the oldest
//! notification some listening session has not read; a session whose client stopped
//! reading (a SIGSTOPped or wedged replica: its backend blocks once the socket's buffers
//! are full) holds it, and once it is full every `pg_notify` fails at commit — with it every
//! write statement that settles receipts, on every replica.
//!
//! Three parts keep that from happening:
//! - the write statements notify only while [`USAGE_SETTING`] (the session's copy of
//!   `--notify-queue-max-usage`) is above `pg_notification_queue_usage()` (`writes.rs`), so
//!   a full queue costs the other replicas' waiters their early wake-up, never a write;
//! - every [`NotifyOptions::heartbeat`] the listening connection runs a query: its backend
//!   shows life (`state_change` in `pg_stat_activity` moves) and the usage is read for the
//!   gauge ([`QueueWatch::usage`]) and a warning when it crosses the threshold;
//! - while the usage is at or above the threshold, the listening connections of other
//!   claimd processes on this database ([`super::APPLICATION_NAME`]) that have shown no life
//!   for `--notify-listener-stale-after` are terminated (`pg_terminate_backend`: the same
//!   role, a superuser or `pg_signal_backend`), so the queue's tail moves on. The replica
//!   that owned one finds its connection gone when it runs again, connects again and
//!   wakes all its waiters, as after any lost connection.

use sqlx::postgres::PgListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The session setting that carries `--notify-queue-max-usage` to the write statements
/// (set on each pooled connection, `postgres::PgDriver::connect`).
pub const USAGE_SETTING: &str = "claimd.notify_queue_max_usage";

/// The heartbeat: the queue's usage, as a fraction of its size.
const USAGE: &str = "SELECT pg_notification_queue_usage()";

/// The listening connections of other claimd processes on this database that have shown
/// no life (no statement begun or ended) for `$2` milliseconds, terminated.
const TERMINATE_STALE: &str = "
SELECT pid, (extract(epoch FROM clock_timestamp() - state_change) * 1000)::int8 AS silent_ms,
       pg_terminate_backend(pid) AS terminated
FROM pg_stat_activity
WHERE application_name = $1 AND datname = current_database() AND pid <> pg_backend_pid()
  AND state_change < clock_timestamp() - $2::int8 * interval '1 millisecond'";

/// How the notification queue is guarded (`--notify-queue-max-usage`,
/// `--notify-listener-stale-after`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NotifyOptions {
    /// The queue's usage (0–1) from which settling writes stop notifying and silent
    /// listeners of other claimd processes are terminated.
    pub max_usage: f64,
    /// How long another claimd's listening connection may show no life before it is
    /// terminated while the queue is that full.
    pub stale_after: Duration,
}

impl NotifyOptions {
    /// How often the listening connection shows life: five times within `stale_after`,
    /// and at least every second.
    pub fn heartbeat(&self) -> Duration {
        (self.stale_after / 5).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// What the listening connection last saw of the queue, for the gauges, and its warnings'
/// state; one per store.
#[derive(Debug)]
pub(in crate::store::postgres) struct QueueWatch {
    options: NotifyOptions,
    /// The last usage read (`f64` bits; NaN before the first).
    usage: AtomicU64,
    /// Whether the last reading was at or above `max_usage`.
    full: AtomicBool,
    /// Whether a termination was refused (no privilege) during this full spell.
    refused: AtomicBool,
    /// Listening connections of other processes this one terminated.
    terminated: AtomicU64,
}

impl QueueWatch {
    /// Nothing seen yet.
    pub(in crate::store::postgres) fn new(options: NotifyOptions) -> QueueWatch {
        QueueWatch {
            options,
            usage: AtomicU64::new(f64::NAN.to_bits()),
            full: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            terminated: AtomicU64::new(0),
        }
    }

    /// The options it watches with.
    pub(in crate::store::postgres) fn options(&self) -> NotifyOptions {
        self.options
    }

    /// The queue's usage at the last heartbeat; `None` before the first.
    pub(in crate::store::postgres) fn usage(&self) -> Option<f64> {
        Some(f64::from_bits(self.usage.load(Ordering::Relaxed))).filter(|u| !u.is_nan())
    }

    /// How many listening connections of other processes this one terminated.
    pub(in crate::store::postgres) fn terminated(&self) -> u64 {
        self.terminated.load(Ordering::Relaxed)
    }

    /// One heartbeat on `listener`: reads the usage and, when the queue is too full,
    /// terminates the stale listeners of other processes. An error means the connection
    /// did not answer within `bound` or is lost; a refused termination is only logged.
    pub(super) async fn heartbeat(
        &self,
        listener: &mut PgListener,
        bound: Duration,
    ) -> Result<(), sqlx::Error> {
        let read = sqlx::query_scalar::<_, f64>(USAGE).fetch_one(&mut *listener);
        let usage = within(bound, read).await?;
        self.usage.store(usage.to_bits(), Ordering::Relaxed);
        let full = usage >= self.options.max_usage;
        if full != self.full.swap(full, Ordering::Relaxed) {
            self.crossed(usage, full);
        }
        if !full {
            return Ok(());
        }
        let stale_ms = i64::try_from(self.options.stale_after.as_millis()).unwrap_or(i64::MAX);
        let terminate = sqlx::query_as::<_, (i32, i64, bool)>(TERMINATE_STALE)
            .bind(super::APPLICATION_NAME)
            .bind(stale_ms)
            .fetch_all(&mut *listener);
        match within(bound, terminate).await {
            Ok(stale) => {
                for (pid, silent_ms, _) in stale.into_iter().filter(|s| s.2) {
                    self.terminated.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        pid,
                        silent_ms,
                        "terminated another claimd's \
                        listening connection: it showed no life while the notification queue \
                        filled"
                    );
                }
                Ok(())
            }
            // Not allowed to (another role's backend): the connection itself is fine.
            Err(sqlx::Error::Database(e)) => {
                if !self.refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "cannot terminate a stale listening connection \
                        of another claimd (run every replica as the same role, or grant \
                        pg_signal_backend)");
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Logs the usage crossing `max_usage`, up (`full`) or down.
    fn crossed(&self, usage: f64, full: bool) {
        let max_usage = self.options.max_usage;
        if full {
            tracing::warn!(
                usage,
                max_usage,
                "the notification queue is fuller than \
                --notify-queue-max-usage: settling writes no longer notify other replicas \
                (their waiters fall back to lease ends and their wait's end) until it drains; \
                a listening session that stopped reading holds it"
            );
        } else {
            self.refused.store(false, Ordering::Relaxed);
            tracing::info!(
                usage,
                max_usage,
                "the notification queue has room again: \
                settling writes notify other replicas"
            );
        }
    }
}

/// `query`, or a timeout error once `bound` has passed (the connection is then given up).
async fn within<T>(
    bound: Duration,
    query: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    match tokio::time::timeout(bound, query).await {
        Ok(answer) => answer,
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the listening connection did not answer its heartbeat within --db-timeout",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_comes_five_times_within_the_stale_bound_and_at_least_every_second() {
        let every = |stale_after| {
            NotifyOptions {
                max_usage: 0.5,
                stale_after,
            }
            .heartbeat()
        };
        assert_eq!(every(Duration::from_secs(2)), Duration::from_millis(400));
        assert_eq!(every(Duration::from_secs(30)), Duration::from_secs(1));
    }

    #[test]
    fn the_usage_is_unknown_until_read() {
        let watch = QueueWatch::new(NotifyOptions {
            max_usage: 0.5,
            stale_after: Duration::from_secs(30),
        });
        assert_eq!(watch.usage(), None);
        watch.usage.store(0.25f64.to_bits(), Ordering::Relaxed);
        assert_eq!(watch.usage(), Some(0.25));
    }
}
