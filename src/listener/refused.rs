//! Connections closed at once by a limit: why ([`Refused`], the `reason` label of
//! `claimd_connections_refused_total`, never an address), counted in the metric and logged
//! as a warning at most once a minute per listener ([`Refusals`]).

use std::time::Duration;
use tokio::time::Instant;

/// `claimd_connections_refused_total{reason}`: connections closed as soon as they were
/// accepted, by the limit that closed them.
pub const CONNECTIONS_REFUSED: &str = "claimd_connections_refused_total";
/// Which limit closed a connection as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `--max-connections`: the listener is full.
    MaxConnections,
    /// `--max-connections-per-source`: its source holds as many as it may.
    PerSource,
    /// `--max-tls-handshakes`: as many TLS handshakes in progress as allowed.
    TlsHandshakes,
    /// `--max-tls-handshakes-per-source`: its source has as many handshakes in progress as
    /// it may.
    TlsHandshakesPerSource,
}

impl Refused {
    /// Every reason, for registering the series at zero.
    pub const ALL: [Refused; 4] = [
        Refused::MaxConnections,
        Refused::PerSource,
        Refused::TlsHandshakes,
        Refused::TlsHandshakesPerSource,
    ];

    /// The `reason` label.
    pub fn name(self) -> &'static str {
        match self {
            Refused::MaxConnections => "max_connections",
            Refused::PerSource => "per_source",
            Refused::TlsHandshakes => "tls_handshakes",
            Refused::TlsHandshakesPerSource => "tls_handshakes_per_source",
        }
    }

    /// The flag of the limit.
    fn flag(self) -> &'static str {
        match self {
            Refused::MaxConnections => "--max-connections",
            Refused::PerSource => "--max-connections-per-source",
            Refused::TlsHandshakes => "--max-tls-handshakes",
            Refused::TlsHandshakesPerSource => "--max-tls-handshakes-per-source",
        }
    }
}

/// The refusals of one listener since its last warning.
#[derive(Debug, Default)]
pub struct Refusals {
    since_warning: [u64; 4],
    warned_at: Option<Instant>,
}

impl Refusals {
    /// Counts one refusal for `why`; warns at most once a minute, with how many of each
    /// reason there were since the last warning.
    pub fn note(&mut self, why: Refused) {
        metrics::counter!(CONNECTIONS_REFUSED, "reason" => why.name()).increment(1);
        let i = Refused::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.since_warning[i] += 1;
        let now = Instant::now();
        if self
            .warned_at
            .is_some_and(|at| now.duration_since(at) < Duration::from_secs(60))
        {
            return;
        }
        let counts: Vec<String> = Refused::ALL
            .iter()
            .zip(self.since_warning)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{n} by {}", r.flag()))
            .collect();
        tracing::warn!(
            refused = counts.join(", "),
            "connection limits reached: closing new connections"
        );
        self.warned_at = Some(now);
        self.since_warning = [0; 4];
    }
}
