//! The two implementations a round measures, behind one interface: claimd over gRPC
//! ([`crate::grpc::GrpcSide`]) and the hand-written SQL baseline
//! ([`crate::sql::SqlSide`]). Workloads are written once against [`Side`], so both get the
//! same requests and the same answer checks.

use crate::grpc::GrpcSide;
use crate::sql::SqlSide;
use std::time::Duration;

/// Which implementation a round measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SideKind {
    /// claimd over gRPC.
    Claimd,
    /// The SQL baseline, from this process.
    Sql,
}

impl SideKind {
    /// The name in the report and the CSV.
    pub fn label(self) -> &'static str {
        match self {
            SideKind::Claimd => "claimd",
            SideKind::Sql => "sql",
        }
    }
}

/// A Claim's decision, as either side reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The caller holds the lease.
    Claimed,
    /// Someone else holds an unexpired lease.
    InFlight,
    /// Done; the stored response comes back.
    Completed,
    /// A retry is due later.
    RetryScheduled,
    /// Dead letter.
    Quarantined,
    /// Same key, another fingerprint.
    Conflict,
    /// Anything else claimd sent (a number outside the enum, or UNSPECIFIED).
    Unknown(i32),
}

/// What a Claim answered.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The decision.
    pub decision: Decision,
    /// The claim token (only with [`Decision::Claimed`]).
    pub token: String,
    /// The receipt's attempt after the decision.
    pub attempt: u32,
    /// The stored response (with [`Decision::Completed`]).
    pub response: Vec<u8>,
}

/// Which claim the SQL baseline runs: the cheapest one that passes the workload's checks.
/// claimd has one Claim and ignores this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimMode {
    /// `INSERT … ON CONFLICT DO NOTHING RETURNING`, one `SELECT` on a conflict: no row is
    /// ever taken over (new, duplicate, inflight).
    InsertOnly,
    /// `INSERT … ON CONFLICT DO UPDATE … WHERE` the lease ran out or the retry is due, one
    /// `SELECT` when nothing was written (takeover, mixed).
    Takeover,
}

/// One implementation under test; cheap to clone (channels and pools are shared).
#[derive(Clone)]
pub enum Side {
    /// claimd over gRPC.
    Claimd(GrpcSide),
    /// The SQL baseline.
    Sql(SqlSide),
}

impl Side {
    /// Which one this is.
    pub fn kind(&self) -> SideKind {
        match self {
            Side::Claimd(_) => SideKind::Claimd,
            Side::Sql(_) => SideKind::Sql,
        }
    }

    /// Claims `key` with fingerprint `fp` and lease `lease` for caller number `caller`.
    pub async fn claim(
        &self,
        caller: usize,
        key: &str,
        fp: &[u8],
        lease: Duration,
        mode: ClaimMode,
    ) -> Result<Answer, String> {
        match self {
            Side::Claimd(s) => s.claim(caller, key, fp, lease).await,
            Side::Sql(s) => s.claim(caller, key, fp, lease, mode).await,
        }
    }

    /// Completes `key` under `token` with `response`; an error unless it succeeded.
    pub async fn complete(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        response: &[u8],
    ) -> Result<(), String> {
        match self {
            Side::Claimd(s) => s.complete(caller, key, token, response).await,
            Side::Sql(s) => s.complete(caller, key, token, response).await,
        }
    }

    /// Gives `key` back under `token`, due again after `after`; an error unless it became
    /// RETRY_WAIT.
    pub async fn retry(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        after: Duration,
    ) -> Result<(), String> {
        match self {
            Side::Claimd(s) => s.retry(caller, key, token, after).await,
            Side::Sql(s) => s.retry(caller, key, token, after).await,
        }
    }
}
