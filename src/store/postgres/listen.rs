//! The one `LISTEN` connection of a claimd on PostgreSQL (docs/DESIGN.md §2.9). Every
//! write statement that takes receipts out of PROCESSING notifies their marks on
//! [`CHANNEL`] in its own transaction (`writes.rs`), so PostgreSQL delivers them at the
//! commit and never before; this task passes each to [`Settles`], which wakes only the
//! waiters of those receipts. The connection is its own (a pool of one beside the store's
//! pool), whoever many calls wait.
//!
//! A notification sent while the connection was down is lost. So whenever the listener
//! has (re)connected, every waiter is woken to read its receipt again; a waiter never
//! depends on a notification alone (it also wakes at its holder's lease end, and reads
//! once more when its wait ends).
//!
//! The connection also shows life and watches PostgreSQL's notification queue
//! ([`queue`]): a heartbeat on it reads the queue's usage (a query every
//! [`NotifyOptions::heartbeat`], given up after the store's bound, so a half-open
//! connection is noticed and made again), and while the queue is fuller than
//! `--notify-queue-max-usage` the listening connections of other claimd processes that
//! have shown no life for `--notify-listener-stale-after` are terminated, so a stopped or
//! wedged replica cannot hold the queue's tail.

mod queue;

pub(super) use queue::QueueWatch;
pub use queue::{NotifyOptions, USAGE_SETTING};

use crate::store::settles::{Mark, Settles};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use std::sync::Arc;
use std::time::Duration;

/// The channel settling writes notify on (the write statements name it literally).
pub const CHANNEL: &str = "claimd_settled";

/// The `application_name` of every claimd's listening connection: how one claimd finds
/// the others' in `pg_stat_activity` (`queue.rs`).
pub const APPLICATION_NAME: &str = "claimd-listen";

/// The longest pause between two attempts to connect again.
const MOST_BACKOFF: Duration = Duration::from_secs(5);

/// The listening task; stopped when the last clone of the store drops it.
#[derive(Debug)]
pub(super) struct Listener(tokio::task::JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Listener {
    /// Starts listening on a connection of its own made with `connect` (named
    /// [`APPLICATION_NAME`]), each attempt and each heartbeat given up after `bound`,
    /// passing what arrives to `settles` and what it sees of the queue to `queue`.
    pub(super) fn spawn(
        connect: PgConnectOptions,
        bound: Duration,
        settles: Arc<Settles>,
        queue: Arc<QueueWatch>,
    ) -> Listener {
        let connect = connect.application_name(APPLICATION_NAME);
        Listener(tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            let mut warned = false;
            loop {
                // A pool of one per attempt: a listener dropped with its connection still
                // in it (a heartbeat not answered) sends UNLISTEN on that connection in the
                // background, which on a half-open link would keep a shared pool's one
                // connection until the operating system gives the link up.
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .min_connections(0)
                    .max_lifetime(None)
                    .idle_timeout(None)
                    .acquire_timeout(bound)
                    .connect_lazy_with(connect.clone());
                match listen(&pool, &settles, &queue, bound).await {
                    // Connected and then lost: try again at once.
                    Ok(()) => (backoff, warned) = (Duration::from_millis(100), false),
                    Err(e) => {
                        // Once per outage: health and the store's errors report the rest.
                        if !warned {
                            tracing::warn!(error = %e, "cannot listen for settled receipts; \
                                waiting calls fall back to lease ends and their wait's end");
                            warned = true;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MOST_BACKOFF);
                    }
                }
            }
        }))
    }
}

/// Listens until the connection is lost (`Ok`), or cannot be made or stops answering its
/// heartbeat within `bound` (`Err`).
async fn listen(
    pool: &sqlx::PgPool,
    settles: &Settles,
    queue: &QueueWatch,
    bound: Duration,
) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnect only through this loop, which then wakes every waiter.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    tracing::debug!("listening for settled receipts");
    // Whatever settled while nobody listened.
    settles.wake_all();
    let mut beat = tokio::time::interval(queue.options().heartbeat());
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // `try_recv` is cancel-safe: a message is taken from the socket's buffer whole.
        let note = tokio::select! {
            note = listener.try_recv() => Some(note?),
            _ = beat.tick() => None,
        };
        match note {
            Some(Some(note)) => {
                for mark in note.payload().split(',').filter_map(Mark::parse) {
                    settles.settled(mark);
                }
            }
            Some(None) => {
                tracing::debug!("the listening connection was lost");
                return Ok(());
            }
            None => queue.heartbeat(&mut listener, bound).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_write_statements_that_update_notify_on_the_listened_channel_only_while_the_queue_has_room()
     {
        for statement in [
            &super::super::writes::UPDATE_MANY.sql,
            &super::super::writes::WRITE_MANY.sql,
        ] {
            assert!(statement.contains(&format!("pg_notify('{}'", super::CHANNEL)));
            assert!(statement.contains(&format!(
                "pg_notification_queue_usage()\n           < current_setting('{}', true)",
                super::USAGE_SETTING
            )));
        }
    }
}
