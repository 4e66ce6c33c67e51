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

use crate::store::settles::{Mark, Settles};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use std::sync::Arc;
use std::time::Duration;

/// The channel settling writes notify on (the write statements name it literally).
pub const CHANNEL: &str = "claimd_settled";

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
    /// Starts listening on a connection of its own made with `connect`, each attempt given
    /// up after `bound`, passing what arrives to `settles`.
    pub(super) fn spawn(
        connect: PgConnectOptions,
        bound: Duration,
        settles: Arc<Settles>,
    ) -> Listener {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .max_lifetime(None)
            .idle_timeout(None)
            .acquire_timeout(bound)
            .connect_lazy_with(connect);
        Listener(tokio::spawn(async move {
            let mut backoff = Duration::from_millis(100);
            let mut warned = false;
            loop {
                match listen(&pool, &settles).await {
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

/// Listens until the connection is lost (`Ok`) or cannot be made (`Err`).
async fn listen(pool: &sqlx::PgPool, settles: &Settles) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    // Reconnect only through this loop, which then wakes every waiter.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    tracing::debug!("listening for settled receipts");
    // Whatever settled while nobody listened.
    settles.wake_all();
    loop {
        match listener.try_recv().await? {
            Some(note) => {
                for mark in note.payload().split(',').filter_map(Mark::parse) {
                    settles.settled(mark);
                }
            }
            None => {
                tracing::debug!("the listening connection was lost");
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_write_statements_that_update_notify_on_the_listened_channel() {
        for statement in [
            super::super::writes::UPDATE_MANY,
            super::super::writes::WRITE_MANY,
        ] {
            assert!(statement.contains(&format!("pg_notify('{}'", super::CHANNEL)));
        }
    }
}
