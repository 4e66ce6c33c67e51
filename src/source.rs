//! Where a connection or a call comes from, as every per-source limit counts it: the
//! connection cap and the TLS handshakes per source (`listener`, `tls`), the
//! failed-authentication limit (`auth`) and the request-body budget (`body_limit`). An
//! IPv4 address is one source; an IPv6 address counts by its /64 prefix, since a single
//! host is routinely given a whole /64 and could otherwise open each connection from a new
//! address. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, what a dual-stack listener
//! reports) is the IPv4 source it maps.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One source of connections and calls: an IPv4 address or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// The upper 64 bits of an IPv6 address.
    V6Prefix(u64),
}

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Source {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Source::V4(v4),
            IpAddr::V6(v6) => Source::V6Prefix((u128::from(v6) >> 64) as u64),
        }
    }
}

impl fmt::Display for Source {
    /// The address, or the IPv6 prefix as `2001:db8:1:2::/64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::V4(v4) => write!(f, "{v4}"),
            Source::V6Prefix(prefix) => {
                write!(f, "{}/64", Ipv6Addr::from(u128::from(*prefix) << 64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source::from(text.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn ipv6_addresses_of_one_64_are_one_source_and_mapped_ipv4_is_ipv4() {
        let a = source("2001:db8:1:2::1");
        assert_eq!(a, source("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_ne!(a, source("2001:db8:1:3::1"));
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(source("::ffff:10.0.0.1"), source("10.0.0.1"));
        assert_ne!(source("10.0.0.1"), source("10.0.0.2"));
        assert_eq!(source("10.0.0.1").to_string(), "10.0.0.1");
    }
}
