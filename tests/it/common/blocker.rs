//! A database lock held by the test, so that claimd's next write waits: a row lock in
//! PostgreSQL, the write lock in SQLite. Used to make calls slow on purpose.

use super::process::PATIENCE;
use sqlx::Connection;
use std::time::{Duration, Instant};

/// A lock the test holds so that claimd's next write on `key` waits for it.
pub enum Blocker {
    /// A transaction holding `SELECT … FOR UPDATE` on the row.
    Postgres(sqlx::PgConnection),
    /// A `BEGIN IMMEDIATE` transaction.
    Sqlite(sqlx::SqliteConnection),
}

impl Blocker {
    pub async fn hold(url: &str, key: &str) -> Blocker {
        if url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut conn)
                .await
                .unwrap();
            return Blocker::Sqlite(conn);
        }
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
        sqlx::query("SELECT 1 FROM receipts WHERE key = $1 FOR UPDATE")
            .bind(key)
            .execute(&mut conn)
            .await
            .unwrap();
        Blocker::Postgres(conn)
    }

    /// Waits until claimd's statement is really waiting on the lock (PostgreSQL shows it;
    /// SQLite does not, so there the call is given a moment to arrive). Only waiters in this
    /// test's own database count: the server is shared with every other test of the run.
    pub async fn wait_for_waiter(&mut self) {
        let Blocker::Postgres(conn) = self else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            return;
        };
        let deadline = Instant::now() + PATIENCE;
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            assert!(Instant::now() < deadline, "claimd never waited on the lock");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn release(self) {
        match self {
            Blocker::Postgres(mut c) => sqlx::query("ROLLBACK").execute(&mut c).await.map(drop),
            Blocker::Sqlite(mut c) => sqlx::query("ROLLBACK").execute(&mut c).await.map(drop),
        }
        .unwrap();
    }
}
