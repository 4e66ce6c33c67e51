//! The flags that bound what reading request bodies may cost (docs/DESIGN.md §5.10,
//! issue 27): how long a body may take to arrive and the bytes all bodies, and those of one
//! source, may hold at once (→ [`BodyLimits`]).

use super::defaults;
use super::duration::parse_duration;
use crate::body_limit::{BodyLimits, KEPT_PER_BODY};
use clap::Args;
use std::time::Duration;

/// Request-body limits of `claimd serve`.
#[derive(Debug, Clone, Args)]
pub struct BodyArgs {
    /// A request body must arrive whole within this of its first read (after the call was
    /// authenticated), or the call is answered DEADLINE_EXCEEDED (Connect: HTTP 408) and
    /// its stream or HTTP/1.1 connection closed; the call's own deadline applies too, the
    /// smaller wins. A reflection stream must send something within each such period
    /// instead. 0 turns it off.
    #[arg(long, env = "CLAIMD_BODY_READ_TIMEOUT", default_value = defaults::BODY_READ_TIMEOUT,
          value_parser = parse_duration)]
    pub body_read_timeout: Duration,
    /// Bytes of request bodies all calls may hold at once while they are read (every
    /// protocol); a body that would pass it is answered RESOURCE_EXHAUSTED (Connect: 429).
    #[arg(long, env = "CLAIMD_MAX_BUFFERED_BODY_BYTES",
          default_value_t = defaults::MAX_BUFFERED_BODY_BYTES)]
    pub max_buffered_body_bytes: u64,
    /// The part of `--max-buffered-body-bytes` the calls of one source (an IPv4 address,
    /// an IPv6 /64) may hold at once. Behind a proxy every caller is one source.
    #[arg(long, env = "CLAIMD_MAX_BUFFERED_BODY_BYTES_PER_SOURCE",
          default_value_t = defaults::MAX_BUFFERED_BODY_BYTES_PER_SOURCE)]
    pub max_buffered_body_bytes_per_source: u64,
}

impl BodyArgs {
    /// The limits, or an error naming the flag: each budget must hold one body of the
    /// largest size, and a source's share no more than the whole.
    pub fn limits(&self) -> anyhow::Result<BodyLimits> {
        let least = KEPT_PER_BODY as u64;
        for (flag, value) in [
            ("--max-buffered-body-bytes", self.max_buffered_body_bytes),
            (
                "--max-buffered-body-bytes-per-source",
                self.max_buffered_body_bytes_per_source,
            ),
        ] {
            anyhow::ensure!(
                value >= least,
                "{flag} must be at least {least} (one request of the largest size, 256 KiB, \
                 and its 5-byte frame header)"
            );
        }
        anyhow::ensure!(
            self.max_buffered_body_bytes_per_source <= self.max_buffered_body_bytes,
            "--max-buffered-body-bytes-per-source must not be more than \
             --max-buffered-body-bytes"
        );
        let bytes = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Ok(BodyLimits {
            read_timeout: (!self.body_read_timeout.is_zero()).then_some(self.body_read_timeout),
            max_buffered: bytes(self.max_buffered_body_bytes),
            max_buffered_per_source: bytes(self.max_buffered_body_bytes_per_source),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Cli;
    use clap::Parser;
    use std::time::Duration;

    fn parse(args: &[&str]) -> anyhow::Result<crate::body_limit::BodyLimits> {
        let cli = Cli::try_parse_from([&["claimd"], args].concat())?;
        cli.serve.bodies.limits()
    }

    #[test]
    fn the_defaults_turn_every_body_limit_on() {
        use crate::config::{defaults, parse_duration};
        let limits = parse(&[]).unwrap();
        let timeout = parse_duration(defaults::BODY_READ_TIMEOUT).unwrap();
        assert_eq!(limits.read_timeout, Some(timeout));
        let total = defaults::MAX_BUFFERED_BODY_BYTES as usize;
        assert_eq!(limits.max_buffered, total);
        let share = defaults::MAX_BUFFERED_BODY_BYTES_PER_SOURCE as usize;
        assert_eq!(limits.max_buffered_per_source, share);
        assert!(share < total);
    }

    #[test]
    fn body_limits_read_their_flags_and_refuse_what_cannot_hold_one_body() {
        let limits = parse(&[
            "--body-read-timeout=2s",
            "--max-buffered-body-bytes=8388608",
            "--max-buffered-body-bytes-per-source=1048576",
        ])
        .unwrap();
        assert_eq!(limits.read_timeout, Some(Duration::from_secs(2)));
        assert_eq!(limits.max_buffered, 8 << 20);
        assert_eq!(limits.max_buffered_per_source, 1 << 20);
        let off = parse(&["--body-read-timeout", "0"]).unwrap();
        assert_eq!(off.read_timeout, None);
        for flag in [
            "--max-buffered-body-bytes",
            "--max-buffered-body-bytes-per-source",
        ] {
            let err = parse(&[flag, "1000"]).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
        }
        let err = parse(&["--max-buffered-body-bytes-per-source", "134217728"]).unwrap_err();
        assert!(err.to_string().contains("not be more than"), "{err}");
    }
}
