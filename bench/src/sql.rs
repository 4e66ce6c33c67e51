//! The SQL baseline: the claim table a team writes instead of running claimd, on the same
//! PostgreSQL database, driven from this process. Table `bench_receipts` (its own, one
//! tenant, no sealing, no attempt budget). Every statement is its own transaction
//! (autocommit).
//!
//! - claim, [`ClaimMode::InsertOnly`]: `INSERT … ON CONFLICT DO NOTHING RETURNING`, and on a
//!   conflict one `SELECT` that decides COMPLETED / IN_FLIGHT / RETRY_SCHEDULED / CONFLICT;
//! - claim, [`ClaimMode::Takeover`]: `INSERT … ON CONFLICT DO UPDATE … WHERE` the lease ran
//!   out or the retry is due (attempt + 1, new token), the same `SELECT` when it wrote
//!   nothing;
//! - complete and retry: one `UPDATE … WHERE key = $1 AND token = $2 AND state =
//!   'processing'` (fenced by the token), one row or an error.
//!
//! The client is the strongest a team has ([`SqlDriver::Lean`], the default): tokio-postgres,
//! one connection per caller up to `--pool-cap` (beyond it callers share connections
//! round-robin, and tokio-postgres pipelines their statements), every statement prepared
//! once per connection before the round, no pool and no ping — what pgx, asyncpg or a
//! HikariCP pool without a test query give a Go, Python or Java team: one round trip per
//! statement. The old pinged sqlx pool is [`SqlDriver::SqlxPinged`]
//! ([`crate::sql_pinged`]).

use crate::cli::SqlDriver;
use crate::side::{Answer, ClaimMode, Decision};
use crate::sql_pinged::PingedSide;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls, Statement};
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
pub const CLAIM_INSERT: &str =
    "INSERT INTO bench_receipts (key, fingerprint, token, state, attempt, lease_expires_at)
VALUES ($1, $2, $3, 'processing', 1, now() + make_interval(secs => $4))
ON CONFLICT (key) DO NOTHING
RETURNING attempt";

/// Claim with takeover of an expired lease or a due retry (same fingerprint only).
pub const CLAIM_TAKEOVER: &str =
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
pub const READ: &str =
    "SELECT fingerprint, state, attempt, response FROM bench_receipts WHERE key = $1";

/// Complete, fenced by the token; one row or none.
pub const COMPLETE: &str = "UPDATE bench_receipts
SET state = 'completed', response = $3, lease_expires_at = NULL
WHERE key = $1 AND token = $2 AND state = 'processing'";

/// Retry after `$3` seconds, fenced by the token; one row or none.
pub const RETRY: &str = "UPDATE bench_receipts
SET state = 'retry_wait', next_attempt_at = now() + make_interval(secs => $3),
    lease_expires_at = NULL
WHERE key = $1 AND token = $2 AND state = 'processing'";

/// The answer of a claim that wrote nothing, from the row [`READ`] found.
pub fn decide(
    fp: &[u8],
    stored_fp: &[u8],
    state: &str,
    attempt: i32,
    response: Option<Vec<u8>>,
) -> Answer {
    let decision = if stored_fp != fp {
        Decision::Conflict
    } else {
        match state {
            "completed" => Decision::Completed,
            "processing" => Decision::InFlight,
            "retry_wait" => Decision::RetryScheduled,
            _ => Decision::Quarantined,
        }
    };
    Answer {
        decision,
        token: String::new(),
        attempt: u32::try_from(attempt).unwrap_or(0),
        response: response.unwrap_or_default(),
    }
}

/// The SQL baseline through the driver `--sql-driver` chose; cheap to clone.
#[derive(Clone)]
pub enum SqlSide {
    /// tokio-postgres, a connection per caller, prepared statements, no ping.
    Lean(LeanSide),
    /// The old sqlx pool with its ping per acquire.
    Pinged(PingedSide),
}

impl SqlSide {
    /// `size` connections to `url` through `driver`, all opened (and, lean, every statement
    /// prepared) now.
    pub async fn connect(url: &str, size: usize, driver: SqlDriver) -> anyhow::Result<Self> {
        Ok(match driver {
            SqlDriver::Lean => SqlSide::Lean(LeanSide::connect(url, size).await?),
            SqlDriver::SqlxPinged => SqlSide::Pinged(PingedSide::connect(url, size).await?),
        })
    }

    /// Claim as [`ClaimMode`] says for caller number `caller`; the answer whatever the
    /// decision.
    pub async fn claim(
        &self,
        caller: usize,
        key: &str,
        fp: &[u8],
        lease: Duration,
        mode: ClaimMode,
    ) -> Result<Answer, String> {
        match self {
            SqlSide::Lean(s) => s.claim(caller, key, fp, lease, mode).await,
            SqlSide::Pinged(s) => s.claim(key, fp, lease, mode).await,
        }
    }

    /// The fenced Complete; an error unless exactly one row changed.
    pub async fn complete(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        response: &[u8],
    ) -> Result<(), String> {
        match self {
            SqlSide::Lean(s) => s.complete(caller, key, token, response).await,
            SqlSide::Pinged(s) => s.complete(key, token, response).await,
        }
    }

    /// The fenced Retry; an error unless exactly one row changed.
    pub async fn retry(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        after: Duration,
    ) -> Result<(), String> {
        match self {
            SqlSide::Lean(s) => s.retry(caller, key, token, after).await,
            SqlSide::Pinged(s) => s.retry(key, token, after).await,
        }
    }
}

/// One connection and its prepared statements.
struct Conn {
    client: Client,
    claim_insert: Statement,
    claim_takeover: Statement,
    read: Statement,
    complete: Statement,
    retry: Statement,
}

/// The lean baseline: caller `i` uses connection `i % connections`.
#[derive(Clone)]
pub struct LeanSide {
    conns: Arc<Vec<Conn>>,
}

/// A failed statement as one line.
fn failed(what: &str, key: &str, e: &tokio_postgres::Error) -> String {
    format!("{what} {key}: {e}")
}

/// `url` as tokio-postgres connects to it, read as libpq and sqlx read it: a `host=`
/// parameter naming a socket directory replaces the URL's host (tokio-postgres would try
/// the URL's TCP host first and the socket second, so the baseline might reach PostgreSQL
/// by TCP while claimd, through sqlx, uses the socket).
pub fn lean_config(url: &str) -> anyhow::Result<Config> {
    let parsed: Config = url
        .parse()
        .with_context(|| "tokio-postgres cannot parse --database-url")?;
    let sockets: Vec<&Host> = parsed
        .get_hosts()
        .iter()
        .filter(|h| matches!(h, Host::Unix(_)))
        .collect();
    if sockets.is_empty() {
        return Ok(parsed);
    }
    let mut config = Config::new();
    for host in sockets {
        if let Host::Unix(dir) = host {
            config.host_path(dir);
        }
    }
    if let Some(port) = parsed.get_ports().first() {
        config.port(*port);
    }
    if let Some(user) = parsed.get_user() {
        config.user(user);
    }
    if let Some(password) = parsed.get_password() {
        config.password(password);
    }
    if let Some(db) = parsed.get_dbname() {
        config.dbname(db);
    }
    if let Some(name) = parsed.get_application_name() {
        config.application_name(name);
    }
    if let Some(timeout) = parsed.get_connect_timeout() {
        config.connect_timeout(*timeout);
    }
    Ok(config)
}

impl LeanSide {
    /// `size` connections to `url`, each with every statement prepared.
    pub async fn connect(url: &str, size: usize) -> anyhow::Result<Self> {
        let config = lean_config(url)?;
        let mut conns = Vec::with_capacity(size.max(1));
        for _ in 0..size.max(1) {
            let (client, connection) = config
                .connect(NoTls)
                .await
                .context("the lean SQL baseline cannot connect")?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!("SQL baseline connection: {e}");
                }
            });
            conns.push(Conn {
                claim_insert: client.prepare(CLAIM_INSERT).await?,
                claim_takeover: client.prepare(CLAIM_TAKEOVER).await?,
                read: client.prepare(READ).await?,
                complete: client.prepare(COMPLETE).await?,
                retry: client.prepare(RETRY).await?,
                client,
            });
        }
        Ok(LeanSide {
            conns: Arc::new(conns),
        })
    }

    /// Caller `caller`'s connection.
    fn conn(&self, caller: usize) -> &Conn {
        &self.conns[caller % self.conns.len()]
    }

    /// Claim as [`ClaimMode`] says; the answer whatever the decision.
    pub async fn claim(
        &self,
        caller: usize,
        key: &str,
        fp: &[u8],
        lease: Duration,
        mode: ClaimMode,
    ) -> Result<Answer, String> {
        let c = self.conn(caller);
        let statement = match mode {
            ClaimMode::InsertOnly => &c.claim_insert,
            ClaimMode::Takeover => &c.claim_takeover,
        };
        let token = Uuid::new_v4();
        let secs = lease.as_secs_f64();
        let inserted = c
            .client
            .query_opt(statement, &[&key, &fp, &token, &secs])
            .await
            .map_err(|e| failed("claim", key, &e))?;
        if let Some(row) = inserted {
            let attempt: i32 = row.try_get(0).map_err(|e| failed("claim", key, &e))?;
            return Ok(Answer {
                decision: Decision::Claimed,
                token: token.to_string(),
                attempt: u32::try_from(attempt).unwrap_or(0),
                response: Vec::new(),
            });
        }
        let row = c
            .client
            .query_opt(&c.read, &[&key])
            .await
            .map_err(|e| failed("read", key, &e))?
            .ok_or_else(|| format!("read {key}: the conflicting row is gone"))?;
        let get = |e: tokio_postgres::Error| failed("read", key, &e);
        let stored_fp: Vec<u8> = row.try_get(0).map_err(get)?;
        let state: String = row.try_get(1).map_err(get)?;
        let attempt: i32 = row.try_get(2).map_err(get)?;
        let response: Option<Vec<u8>> = row.try_get(3).map_err(get)?;
        Ok(decide(fp, &stored_fp, &state, attempt, response))
    }

    /// The fenced Complete; an error unless exactly one row changed.
    pub async fn complete(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        response: &[u8],
    ) -> Result<(), String> {
        let token = Uuid::parse_str(token).map_err(|e| format!("complete {key}: {e}"))?;
        let c = self.conn(caller);
        let n = c
            .client
            .execute(&c.complete, &[&key, &token, &response])
            .await
            .map_err(|e| failed("complete", key, &e))?;
        match n {
            1 => Ok(()),
            n => Err(format!("complete {key}: {n} rows changed, not 1")),
        }
    }

    /// The fenced Retry; an error unless exactly one row changed.
    pub async fn retry(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        after: Duration,
    ) -> Result<(), String> {
        let token = Uuid::parse_str(token).map_err(|e| format!("retry {key}: {e}"))?;
        let c = self.conn(caller);
        let secs = after.as_secs_f64();
        let n = c
            .client
            .execute(&c.retry, &[&key, &token, &secs])
            .await
            .map_err(|e| failed("retry", key, &e))?;
        match n {
            1 => Ok(()),
            n => Err(format!("retry {key}: {n} rows changed, not 1")),
        }
    }
}
