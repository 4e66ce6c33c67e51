//! The flags that bound what one client can make claimd hold (docs/DESIGN.md §2.8):
//! connections, their first bytes, keepalive, age, streams and calls per connection
//! (→ [`ConnectionLimits`]) and the bytes of a List or ListOrphaned page. A duration of 0
//! turns its limit off.

use super::defaults;
use super::duration::parse_duration;
use crate::listener::ConnectionLimits;
use clap::Args;
use std::time::Duration;

/// Connection and page limits of `claimd serve`.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Most connections open at once (per listener); one more is closed as soon as it is
    /// accepted. Keep it below the open-file limit (`ulimit -n`).
    #[arg(long, env = "CLAIMD_MAX_CONNECTIONS", default_value_t = defaults::MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Most connections open at once from one source (per listener): an IPv4 address, or an
    /// IPv6 /64. One more from it is closed as soon as it is accepted, so one source cannot
    /// take every connection. Behind a proxy or NAT every client shares one source: raise it.
    #[arg(long, env = "CLAIMD_MAX_CONNECTIONS_PER_SOURCE",
          default_value_t = defaults::MAX_CONNECTIONS_PER_SOURCE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_source: u32,
    /// Most TLS handshakes in progress at once; a connection beyond it is closed before its
    /// handshake starts, so stalled handshakes cannot take every connection.
    #[arg(long, env = "CLAIMD_MAX_TLS_HANDSHAKES", default_value_t = defaults::MAX_TLS_HANDSHAKES,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tls_handshakes: u32,
    /// Most TLS handshakes in progress at once from one source (an IPv4 address, an IPv6
    /// /64); a connection beyond it is closed before its handshake starts.
    #[arg(long, env = "CLAIMD_MAX_TLS_HANDSHAKES_PER_SOURCE",
          default_value_t = defaults::MAX_TLS_HANDSHAKES_PER_SOURCE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tls_handshakes_per_source: u32,
    /// A connection that has not sent the HTTP/2 preface (over TLS: the handshake and then
    /// the first bytes of HTTP) within this is closed; 0 turns it off.
    #[arg(long, env = "CLAIMD_FIRST_BYTES_TIMEOUT", default_value = defaults::FIRST_BYTES_TIMEOUT,
          value_parser = parse_duration)]
    pub first_bytes_timeout: Duration,
    /// How often an HTTP/2 PING checks that a connection's peer is alive; 0 turns it off.
    #[arg(long, env = "CLAIMD_KEEPALIVE_INTERVAL", default_value = defaults::KEEPALIVE_INTERVAL,
          value_parser = parse_duration)]
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    #[arg(long, env = "CLAIMD_KEEPALIVE_TIMEOUT", default_value = defaults::KEEPALIVE_TIMEOUT,
          value_parser = parse_duration)]
    pub keepalive_timeout: Duration,
    /// After this a connection is told GOAWAY (clients reconnect, so load balancers can
    /// spread them again); 0 turns it off.
    #[arg(long, env = "CLAIMD_MAX_CONNECTION_AGE", default_value = defaults::MAX_CONNECTION_AGE,
          value_parser = parse_duration)]
    pub max_connection_age: Duration,
    /// How long calls in flight may run after that GOAWAY before the connection is closed.
    #[arg(long, env = "CLAIMD_MAX_CONNECTION_AGE_GRACE",
          default_value = defaults::MAX_CONNECTION_AGE_GRACE, value_parser = parse_duration)]
    pub max_connection_age_grace: Duration,
    /// Calls a client may have open at once on one connection (HTTP/2
    /// SETTINGS_MAX_CONCURRENT_STREAMS).
    #[arg(long, env = "CLAIMD_MAX_CONCURRENT_STREAMS",
          default_value_t = defaults::MAX_CONCURRENT_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_streams: u32,
    /// Calls served at once per connection; later ones wait in order.
    #[arg(long, env = "CLAIMD_MAX_CALLS_PER_CONNECTION",
          default_value_t = defaults::MAX_CALLS_PER_CONNECTION,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_calls_per_connection: u32,
    /// Bytes of receipts (payloads included) in one List or ListOrphaned page: a page stops
    /// early, with a page token, once the next receipt would pass this (it always holds at
    /// least one receipt).
    #[arg(long, env = "CLAIMD_LIST_PAGE_BYTES", default_value_t = defaults::LIST_PAGE_BYTES,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub list_page_bytes: u32,
    /// Claims with `wait` that may wait at once in this process; one more is answered
    /// IN_FLIGHT at once, as without `wait` (docs/DESIGN.md §2.9). 0 turns waiting off.
    #[arg(long, env = "CLAIMD_MAX_WAITING_CLAIMS",
          default_value_t = defaults::MAX_WAITING_CLAIMS)]
    pub max_waiting_claims: u32,
}

/// `Some(d)`, or `None` for 0 (off).
fn unless_zero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

impl LimitArgs {
    /// The limits of each gRPC listener.
    pub fn connections(&self) -> anyhow::Result<ConnectionLimits> {
        if self.keepalive_timeout.is_zero() {
            anyhow::bail!("--keepalive-timeout (CLAIMD_KEEPALIVE_TIMEOUT) must be more than 0");
        }
        Ok(ConnectionLimits {
            max_connections: self.max_connections as usize,
            max_connections_per_source: self.max_connections_per_source as usize,
            max_tls_handshakes: self.max_tls_handshakes as usize,
            max_tls_handshakes_per_source: self.max_tls_handshakes_per_source as usize,
            first_bytes_timeout: unless_zero(self.first_bytes_timeout),
            keepalive_interval: unless_zero(self.keepalive_interval),
            keepalive_timeout: self.keepalive_timeout,
            max_connection_age: unless_zero(self.max_connection_age),
            max_connection_age_grace: self.max_connection_age_grace,
            max_concurrent_streams: self.max_concurrent_streams,
            max_calls_per_connection: self.max_calls_per_connection as usize,
            // From the `[mesh]` table (`Config::from_args`).
            trusted_proxies: Default::default(),
            proxy_protocol: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Cli;
    use clap::Parser;
    use std::time::Duration;

    fn parse(args: &[&str]) -> anyhow::Result<crate::listener::ConnectionLimits> {
        let cli = Cli::try_parse_from([&["claimd"], args].concat())?;
        cli.serve.limits.connections()
    }

    #[test]
    fn the_defaults_turn_every_limit_on() {
        use crate::config::{defaults, parse_duration};
        let d = |text: &str| parse_duration(text).unwrap();
        let limits = parse(&[]).unwrap();
        assert_eq!(limits.max_connections, defaults::MAX_CONNECTIONS as usize);
        let per_source = defaults::MAX_CONNECTIONS_PER_SOURCE as usize;
        assert_eq!(limits.max_connections_per_source, per_source);
        assert!(per_source < limits.max_connections);
        let handshakes = defaults::MAX_TLS_HANDSHAKES as usize;
        assert_eq!(limits.max_tls_handshakes, handshakes);
        assert!(handshakes < limits.max_connections);
        let handshakes_per_source = defaults::MAX_TLS_HANDSHAKES_PER_SOURCE as usize;
        assert_eq!(limits.max_tls_handshakes_per_source, handshakes_per_source);
        assert!(handshakes_per_source < per_source && handshakes_per_source < handshakes);
        let first_bytes = Some(d(defaults::FIRST_BYTES_TIMEOUT));
        assert_eq!(limits.first_bytes_timeout, first_bytes);
        let keepalive = Some(d(defaults::KEEPALIVE_INTERVAL));
        assert_eq!(limits.keepalive_interval, keepalive);
        assert_eq!(limits.keepalive_timeout, d(defaults::KEEPALIVE_TIMEOUT));
        let age = Some(d(defaults::MAX_CONNECTION_AGE));
        assert_eq!(limits.max_connection_age, age);
        let grace = d(defaults::MAX_CONNECTION_AGE_GRACE);
        assert_eq!(limits.max_connection_age_grace, grace);
        assert!(first_bytes.is_some_and(|t| !t.is_zero()) && age.is_some_and(|t| !t.is_zero()));
        assert_eq!(
            limits.max_concurrent_streams,
            defaults::MAX_CONCURRENT_STREAMS
        );
        let calls = defaults::MAX_CALLS_PER_CONNECTION as usize;
        assert_eq!(limits.max_calls_per_connection, calls);
    }

    #[test]
    fn zero_turns_a_timeout_off_and_zero_counts_are_refused() {
        let off = parse(&[
            "--first-bytes-timeout",
            "0",
            "--keepalive-interval",
            "0",
            "--max-connection-age",
            "0",
        ])
        .unwrap();
        assert_eq!(off.first_bytes_timeout, None);
        assert_eq!(off.keepalive_interval, None);
        assert_eq!(off.max_connection_age, None);
        for flag in [
            "--max-connections",
            "--max-connections-per-source",
            "--max-tls-handshakes",
            "--max-tls-handshakes-per-source",
            "--max-concurrent-streams",
            "--max-calls-per-connection",
            "--list-page-bytes",
        ] {
            assert!(parse(&[flag, "0"]).is_err(), "{flag} 0 was accepted");
        }
        let err = parse(&["--keepalive-timeout", "0"]).unwrap_err();
        assert!(err.to_string().contains("--keepalive-timeout"), "{err}");
    }

    #[test]
    fn limits_read_their_flags() {
        let limits = parse(&[
            "--max-connections=8",
            "--max-connections-per-source=3",
            "--max-tls-handshakes=5",
            "--max-tls-handshakes-per-source=2",
            "--first-bytes-timeout=1s",
            "--keepalive-interval=2s",
            "--keepalive-timeout=500ms",
            "--max-connection-age=5m",
            "--max-connection-age-grace=3s",
            "--max-concurrent-streams=4",
            "--max-calls-per-connection=2",
        ])
        .unwrap();
        assert_eq!(limits.max_connections, 8);
        assert_eq!(limits.max_connections_per_source, 3);
        assert_eq!(limits.max_tls_handshakes, 5);
        assert_eq!(limits.max_tls_handshakes_per_source, 2);
        assert_eq!(limits.first_bytes_timeout, Some(Duration::from_secs(1)));
        assert_eq!(limits.keepalive_interval, Some(Duration::from_secs(2)));
        assert_eq!(limits.keepalive_timeout, Duration::from_millis(500));
        assert_eq!(limits.max_connection_age, Some(Duration::from_secs(300)));
        assert_eq!(limits.max_connection_age_grace, Duration::from_secs(3));
        assert_eq!(limits.max_concurrent_streams, 4);
        assert_eq!(limits.max_calls_per_connection, 2);
    }
}
