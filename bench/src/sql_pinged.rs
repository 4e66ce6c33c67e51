//! The old SQL baseline, kept for comparison with runs before issue 30
//! (`--sql-driver sqlx-pinged`): the statements of [`crate::sql`] through one sqlx
//! `PgPool` of min(callers, --pool-cap) connections with sqlx's defaults, so every
//! statement first acquires a connection from the pool and pings it
//! (`test_before_acquire`): four round trips per new cycle where a team's client makes two.
//! Labelled "against the pinged sqlx-pool baseline" in docs/PERFORMANCE.md.

use crate::side::{Answer, ClaimMode, Decision};
use crate::sql::{CLAIM_INSERT, CLAIM_TAKEOVER, COMPLETE, READ, RETRY, decide};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::Duration;
use uuid::Uuid;

/// The pinged pool.
#[derive(Clone)]
pub struct PingedSide {
    pool: PgPool,
}

/// A failed statement as one line.
fn failed(what: &str, key: &str, e: &sqlx::Error) -> String {
    format!("{what} {key}: {e}")
}

impl PingedSide {
    /// A pool of `size` connections to `url`, all opened now.
    pub async fn connect(url: &str, size: usize) -> anyhow::Result<Self> {
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        let pool = PgPoolOptions::new()
            .max_connections(size)
            .min_connections(size)
            .acquire_timeout(Duration::from_secs(60))
            .connect(url)
            .await?;
        // Open every connection before a round measures anything.
        let mut held = Vec::new();
        for _ in 0..size {
            held.push(pool.acquire().await?);
        }
        drop(held);
        Ok(PingedSide { pool })
    }

    /// Claim as [`ClaimMode`] says; the answer whatever the decision.
    pub async fn claim(
        &self,
        key: &str,
        fp: &[u8],
        lease: Duration,
        mode: ClaimMode,
    ) -> Result<Answer, String> {
        let statement = match mode {
            ClaimMode::InsertOnly => CLAIM_INSERT,
            ClaimMode::Takeover => CLAIM_TAKEOVER,
        };
        let token = Uuid::new_v4();
        let inserted: Option<i32> = sqlx::query_scalar(statement)
            .bind(key)
            .bind(fp)
            .bind(token)
            .bind(lease.as_secs_f64())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| failed("claim", key, &e))?;
        if let Some(attempt) = inserted {
            return Ok(Answer {
                decision: Decision::Claimed,
                token: token.to_string(),
                attempt: u32::try_from(attempt).unwrap_or(0),
                response: Vec::new(),
            });
        }
        let row = sqlx::query(READ)
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| failed("read", key, &e))?
            .ok_or_else(|| format!("read {key}: the conflicting row is gone"))?;
        let get = |e: sqlx::Error| failed("read", key, &e);
        let stored_fp: Vec<u8> = row.try_get("fingerprint").map_err(get)?;
        let state: String = row.try_get("state").map_err(get)?;
        let attempt: i32 = row.try_get("attempt").map_err(get)?;
        let response: Option<Vec<u8>> = row.try_get("response").map_err(get)?;
        Ok(decide(fp, &stored_fp, &state, attempt, response))
    }

    /// The fenced Complete; an error unless exactly one row changed.
    pub async fn complete(&self, key: &str, token: &str, response: &[u8]) -> Result<(), String> {
        let token = Uuid::parse_str(token).map_err(|e| format!("complete {key}: {e}"))?;
        let done = sqlx::query(COMPLETE)
            .bind(key)
            .bind(token)
            .bind(response)
            .execute(&self.pool)
            .await
            .map_err(|e| failed("complete", key, &e))?;
        match done.rows_affected() {
            1 => Ok(()),
            n => Err(format!("complete {key}: {n} rows changed, not 1")),
        }
    }

    /// The fenced Retry; an error unless exactly one row changed.
    pub async fn retry(&self, key: &str, token: &str, after: Duration) -> Result<(), String> {
        let token = Uuid::parse_str(token).map_err(|e| format!("retry {key}: {e}"))?;
        let done = sqlx::query(RETRY)
            .bind(key)
            .bind(token)
            .bind(after.as_secs_f64())
            .execute(&self.pool)
            .await
            .map_err(|e| failed("retry", key, &e))?;
        match done.rows_affected() {
            1 => Ok(()),
            n => Err(format!("retry {key}: {n} rows changed, not 1")),
        }
    }
}
