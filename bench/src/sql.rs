//! The SQL baseline: the claim table a team writes instead of running claimd, on the same
//! PostgreSQL database, driven from this process. Table `bench_receipts` (its own, one
//! tenant, no sealing, no attempt budget). Every statement is its own transaction
//! (autocommit) and prepared once per connection (sqlx's statement cache); the pool holds
//! min(callers, --pool-cap) connections, opened before the round.
//!
//! - claim, [`ClaimMode::InsertOnly`]: `INSERT … ON CONFLICT DO NOTHING RETURNING`, and on a
//!   conflict one `SELECT` that decides COMPLETED / IN_FLIGHT / RETRY_SCHEDULED / CONFLICT;
//! - claim, [`ClaimMode::Takeover`]: `INSERT … ON CONFLICT DO UPDATE … WHERE` the lease ran
//!   out or the retry is due (attempt + 1, new token), the same `SELECT` when it wrote
//!   nothing;
//! - complete and retry: one `UPDATE … WHERE key = $1 AND token = $2 AND state =
//!   'processing'` (fenced by the token), one row or an error.

use crate::side::{Answer, ClaimMode, Decision};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::Duration;
use uuid::Uuid;

/// The baseline's table, created if missing.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS bench_receipts (
    key              text PRIMARY KEY,
    fingerprint      bytea NOT NULL,
    token            uuid,
    state            text NOT NULL,
    attempt          integer NOT NULL,
    lease_expires_at timestamptz,
    next_attempt_at  timestamptz,
    response         bytea
)";

/// Claim without takeover: a row only for a new key; `attempt` back if inserted.
const CLAIM_INSERT: &str =
    "INSERT INTO bench_receipts (key, fingerprint, token, state, attempt, lease_expires_at)
VALUES ($1, $2, $3, 'processing', 1, now() + make_interval(secs => $4))
ON CONFLICT (key) DO NOTHING
RETURNING attempt";

/// Claim with takeover of an expired lease or a due retry (same fingerprint only).
const CLAIM_TAKEOVER: &str =
    "INSERT INTO bench_receipts AS r (key, fingerprint, token, state, attempt, lease_expires_at)
VALUES ($1, $2, $3, 'processing', 1, now() + make_interval(secs => $4))
ON CONFLICT (key) DO UPDATE
SET token = EXCLUDED.token, state = 'processing', attempt = r.attempt + 1,
    lease_expires_at = EXCLUDED.lease_expires_at, next_attempt_at = NULL
WHERE r.fingerprint = EXCLUDED.fingerprint
  AND ((r.state = 'processing' AND r.lease_expires_at <= now())
    OR (r.state = 'retry_wait' AND r.next_attempt_at <= now()))
RETURNING attempt";

/// What a claim that wrote nothing answers from.
const READ: &str =
    "SELECT fingerprint, state, attempt, response FROM bench_receipts WHERE key = $1";

/// Complete, fenced by the token; one row or none.
const COMPLETE: &str = "UPDATE bench_receipts
SET state = 'completed', response = $3, lease_expires_at = NULL
WHERE key = $1 AND token = $2 AND state = 'processing'";

/// Retry after `$3` seconds, fenced by the token; one row or none.
const RETRY: &str = "UPDATE bench_receipts
SET state = 'retry_wait', next_attempt_at = now() + make_interval(secs => $3),
    lease_expires_at = NULL
WHERE key = $1 AND token = $2 AND state = 'processing'";

/// The baseline's connection pool.
#[derive(Clone)]
pub struct SqlSide {
    pool: PgPool,
}

/// A failed statement as one line.
fn failed(what: &str, key: &str, e: &sqlx::Error) -> String {
    format!("{what} {key}: {e}")
}

impl SqlSide {
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
        Ok(SqlSide { pool })
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
        let decision = if stored_fp != fp {
            Decision::Conflict
        } else {
            match state.as_str() {
                "completed" => Decision::Completed,
                "processing" => Decision::InFlight,
                "retry_wait" => Decision::RetryScheduled,
                _ => Decision::Quarantined,
            }
        };
        Ok(Answer {
            decision,
            token: String::new(),
            attempt: u32::try_from(attempt).unwrap_or(0),
            response: response.unwrap_or_default(),
        })
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
