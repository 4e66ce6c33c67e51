//! `--metrics-listen`: an address for the Prometheus listener, or `off`.

use std::net::SocketAddr;

/// `--metrics-listen`: an address, or `None` for `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsListen(pub Option<SocketAddr>);

/// Parses `off` or a socket address.
pub fn parse_metrics_listen(s: &str) -> Result<MetricsListen, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(MetricsListen(None));
    }
    s.parse()
        .map(|addr| MetricsListen(Some(addr)))
        .map_err(|_| format!("{s:?} is neither an address like 127.0.0.1:9464 nor `off`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_disables_and_an_address_is_an_address() {
        assert_eq!(parse_metrics_listen("off"), Ok(MetricsListen(None)));
        assert_eq!(parse_metrics_listen("OFF"), Ok(MetricsListen(None)));
        let addr = SocketAddr::from(([0, 0, 0, 0], 9464));
        assert_eq!(
            parse_metrics_listen("0.0.0.0:9464"),
            Ok(MetricsListen(Some(addr)))
        );
        assert!(parse_metrics_listen("9464").unwrap_err().contains("off"));
    }
}
