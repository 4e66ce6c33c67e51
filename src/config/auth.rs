//! The flags of the failed-authentication limit and of the background `last_used_at` flush
//! (docs/DESIGN.md §5.3), validated here; `--key-cache-ttl` and `--allow-unauthenticated`
//! are `ServeArgs`' own.

use super::defaults;
use super::duration::parse_duration;
use clap::Args;
use std::time::Duration;

/// `serve`'s authentication-flood flags.
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// Failed authentications allowed per peer address (IPv6: per /64) per
    /// `--auth-failure-window` (a token bucket); beyond it, its wrong keys get
    /// RESOURCE_EXHAUSTED without a lookup each, while correct keys are still served. 0: off.
    #[arg(long, env = "CLAIMD_AUTH_FAILURE_LIMIT", default_value_t = defaults::AUTH_FAILURE_LIMIT)]
    pub auth_failure_limit: u32,
    /// How long a peer address's `--auth-failure-limit` takes to refill.
    #[arg(long, env = "CLAIMD_AUTH_FAILURE_WINDOW", default_value = defaults::AUTH_FAILURE_WINDOW,
          value_parser = parse_duration)]
    pub auth_failure_window: Duration,
    /// How often the `last_used_at` of the API keys in use is written (at most once per
    /// interval per key, off the request path).
    #[arg(long, env = "CLAIMD_KEY_TOUCH_INTERVAL", default_value = defaults::KEY_TOUCH_INTERVAL,
          value_parser = parse_duration)]
    pub key_touch_interval: Duration,
}

impl AuthArgs {
    /// Refuses durations that would turn the limit or the flush into a busy loop.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.key_touch_interval.is_zero(),
            "--key-touch-interval must be longer than 0"
        );
        anyhow::ensure!(
            self.auth_failure_limit == 0 || !self.auth_failure_window.is_zero(),
            "--auth-failure-window must be longer than 0 (or turn the limit off with \
             --auth-failure-limit 0)"
        );
        Ok(())
    }
}
