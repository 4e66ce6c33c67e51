//! What the PostgreSQL rows do to claimd's writes: row locks held by connections of the
//! test's own, inserts held uncommitted ahead of the hot set, a count of claimd's
//! statements seen waiting, and answers lost (through the proxy) once the locks go.

use super::{LOST_FOR, ms};
use crate::common::proxy::Proxy;
use crate::faults::SECOND;
use crate::history::workload::{self, NS, Workload};
use sqlx::Connection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Which PROCESSING receipts [`hold_rows`] locks.
#[derive(Clone, Copy)]
pub(super) enum Rows {
    /// The newest: their holders' Completes and Heartbeats come next.
    Newest,
    /// Those whose lease ends first: the takeovers (of waiting Claims too) come next.
    Due,
}

/// Until `end`: locks up to three PROCESSING receipts for `hold` (a random number of
/// milliseconds in the range), then lets them go for a moment.
pub(super) async fn hold_rows(url: &str, end: Instant, rows: Rows, hold: (u64, u64)) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let lock = match rows {
        Rows::Newest => {
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY updated_at DESC LIMIT 3 FOR UPDATE SKIP LOCKED"
        }
        Rows::Due => {
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY lease_expires_at LIMIT 3 FOR UPDATE SKIP LOCKED"
        }
    };
    while Instant::now() < end {
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(lock)
            .bind(NS)
            .execute(&mut *tx)
            .await
            .expect("lock rows");
        tokio::time::sleep(ms(hold.0, hold.1)).await;
        tx.rollback().await.expect("rollback");
        tokio::time::sleep(ms(100, 400)).await;
    }
}

/// Until `end`: just before each hot set becomes hot, inserts half its keys uncommitted,
/// holds them 0.3–2.5 s into the epoch and rolls them back — as another claimd's batch
/// does that holds its inserts while it waits on a lock: it first takes each key's
/// advisory lock, in hash order, as every claimd batch does before it inserts
/// (docs/DESIGN.md §4.2; receipts are written only by claimd, and a foreign transaction
/// that inserts a receipt without that lock is outside the contract).
pub(super) async fn insert_ahead(url: &str, began: Instant, load: &Workload, end: Instant) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    for epoch in 1.. {
        let boundary = began + load.epoch * epoch;
        if boundary > end {
            break;
        }
        tokio::time::sleep_until((boundary - Duration::from_millis(300)).into()).await;
        let mut keys: Vec<String> = (0..load.hot / 2)
            .map(|pick| workload::key(u128::from(epoch), pick))
            .collect();
        keys.sort();
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(
            "SELECT pg_advisory_xact_lock(1668047209, k.h) FROM ( \
                 SELECT DISTINCT hashtext('default' || '/' || $1 || '/' || k) AS h \
                 FROM unnest($2::text[]) AS k ORDER BY 1) k",
        )
        .bind(NS)
        .bind(&keys)
        .execute(&mut *tx)
        .await
        .expect("the keys' advisory locks");
        sqlx::query(
            "INSERT INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint, \
                                   created_at, updated_at) \
             SELECT 'default', $1, k, 'processing', 1, '\\x00'::bytea, now(), now() \
             FROM unnest($2::text[]) AS k ORDER BY k ON CONFLICT DO NOTHING",
        )
        .bind(NS)
        .bind(&keys)
        .execute(&mut *tx)
        .await
        .expect("insert ahead");
        tokio::time::sleep_until((boundary + ms(300, 2_500)).into()).await;
        tx.rollback().await.expect("rollback");
    }
}

/// Until `end`: counts the samples (every 50 ms) in which one of claimd's statements waited
/// on a lock in this test's database.
pub(super) async fn watch_waits(url: &str, end: Instant, waits: &AtomicUsize) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    while Instant::now() < end {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(&mut conn)
        .await
        .expect("pg_stat_activity");
        if waiting > 0 {
            waits.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Until `end`, again and again: locks the receipts whose leases end first, waits (up to
/// 1.5 s) until one of claimd's statements waits on them, blackholes the link between claimd
/// and the database, releases the locks — the waiting statements commit, their answers
/// held — and restores the link once claimd has given them up. Returns how often a
/// statement was caught so.
pub(super) async fn lose_answers_after_lock_waits(url: &str, proxy: &Proxy, end: Instant) -> usize {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let mut watch = sqlx::PgConnection::connect(url).await.expect("connect");
    let mut caught = 0;
    while Instant::now() < end {
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query(
            "SELECT key FROM receipts WHERE namespace = $1 AND state = 'processing' \
             ORDER BY lease_expires_at LIMIT 6 FOR UPDATE SKIP LOCKED",
        )
        .bind(NS)
        .execute(&mut *tx)
        .await
        .expect("lock rows");
        let waiting_until = Instant::now() + 3 * SECOND / 2;
        let mut waiting = false;
        while !waiting && Instant::now() < waiting_until {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .fetch_one(&mut watch)
            .await
            .expect("pg_stat_activity");
            waiting = n > 0;
        }
        if waiting {
            caught += 1;
            proxy.blackhole();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tx.rollback().await.expect("rollback");
        if waiting {
            tokio::time::sleep(LOST_FOR).await;
            proxy.normal();
        }
        tokio::time::sleep(ms(300, 800)).await;
    }
    caught
}
