//! `X-Forwarded-For` from a trusted proxy (issue 48): the caller a request is attributed
//! to for the per-call limits (the body budget, the failed-authentication limit) is the
//! rightmost address of the header that is not itself a trusted proxy — what nginx's
//! `real_ip_recursive` and Envoy's trusted hops do. Addresses further left were written by
//! the caller and prove nothing. From an untrusted peer the header changes nothing.

use super::TrustedProxies;
use http::HeaderMap;
use std::net::{IpAddr, SocketAddr};

/// What a request that came through a trusted proxy carries in its extensions: the proxy's
/// own address (the connection's peer), so that identity headers are believed only then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViaTrustedProxy {
    /// The trusted proxy's address.
    pub proxy: SocketAddr,
}

/// The caller of a request that came from the trusted proxy `peer`: the rightmost
/// untrusted address of `X-Forwarded-For` (every occurrence, in order), or `peer` itself
/// when there is none or an element before it is not an address.
pub fn caller(headers: &HeaderMap, peer: IpAddr, trusted: &TrustedProxies) -> IpAddr {
    let mut elements: Vec<&str> = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            return peer;
        };
        elements.extend(text.split(','));
    }
    for element in elements.iter().rev() {
        let Some(ip) = parse(element.trim()) else {
            return peer;
        };
        if !trusted.contains(ip) {
            return ip;
        }
    }
    peer
}

/// An address as proxies write it: `10.0.0.1`, `2001:db8::1`, `10.0.0.1:443` or
/// `[2001:db8::1]:443`.
fn parse(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse() {
        return Some(ip);
    }
    text.parse::<SocketAddr>().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted() -> TrustedProxies {
        TrustedProxies(vec!["10.0.0.0/8".parse().unwrap()])
    }

    fn caller_of(values: &[&str]) -> String {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        caller(&headers, "10.0.0.1".parse().unwrap(), &trusted()).to_string()
    }

    #[test]
    fn the_caller_is_the_rightmost_address_that_is_not_a_trusted_proxy() {
        assert_eq!(caller_of(&["192.0.2.7"]), "192.0.2.7");
        assert_eq!(caller_of(&["6.6.6.6, 192.0.2.7, 10.1.1.1"]), "192.0.2.7");
        assert_eq!(
            caller_of(&["6.6.6.6", "192.0.2.7:5000, 10.1.1.1"]),
            "192.0.2.7"
        );
        assert_eq!(caller_of(&["[2001:db8::7]:443"]), "2001:db8::7");
    }

    #[test]
    fn without_a_usable_header_the_proxy_is_the_caller() {
        assert_eq!(caller_of(&[]), "10.0.0.1");
        assert_eq!(caller_of(&["10.2.2.2, 10.3.3.3"]), "10.0.0.1");
        assert_eq!(caller_of(&["192.0.2.7, unknown"]), "10.0.0.1");
    }
}
