//! claimd behind a proxy or a service mesh (docs/DESIGN.md §5.14, issue 48): the peers
//! whose forwarding information is believed ([`TrustedProxies`]), whether they open with a
//! PROXY v2 header, and the mesh identities (SPIFFE IDs) that act for a tenant without an
//! API key ([`MeshIdentity`]). Read from the `[mesh]` table of `--config` at start
//! (`config::mesh`); nothing here is believed from any other peer.

pub mod cert;
pub mod forwarded;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An address block, `10.0.0.0/8` or `fd00::/8`; a bare address is its own /32 or /128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The block's first address (host bits cleared).
    network: IpAddr,
    /// The prefix length.
    prefix: u8,
}

/// Why a CIDR block was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    /// The part before `/` is not an IP address.
    #[error("{0:?} does not start with an IP address (write a block as 10.0.0.0/8 or fd00::/8)")]
    Address(String),
    /// The prefix length is not a number within the address's bits.
    #[error("{0:?} has no valid prefix length (0–32 for IPv4, 0–128 for IPv6)")]
    Prefix(String),
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Cidr, CidrError> {
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let ip: IpAddr = address
            .trim()
            .parse()
            .map_err(|_| CidrError::Address(text.to_owned()))?;
        let bits = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => bits,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= bits)
                .ok_or_else(|| CidrError::Prefix(text.to_owned()))?,
        };
        Ok(Cidr {
            network: mask(ip, prefix),
            prefix,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// `ip` with all but its first `prefix` bits cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let keep = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & keep).into())
        }
        IpAddr::V6(v6) => {
            let keep = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & keep).into())
        }
    }
}

impl Cidr {
    /// Whether `ip` (an IPv4-mapped IPv6 address as its IPv4 address) is in the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }
}

/// The peers whose PROXY headers and forwarding headers (`X-Forwarded-For`,
/// `x-forwarded-client-cert`, `l5d-client-id`) claimd believes; none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<Cidr>);

impl TrustedProxies {
    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// Whether no peer is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a mesh identity acts as: a tenant and, optionally, only some namespaces (as for
/// an API key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshIdentity {
    /// The tenant every call of this identity acts for.
    pub tenant: String,
    /// The namespaces it may use; empty: all.
    pub namespaces: Vec<String>,
}

/// The `[mesh]` table, validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeshOptions {
    /// Peers whose forwarding information is believed.
    pub trusted_proxies: TrustedProxies,
    /// Whether connections from trusted peers open with a PROXY v2 header.
    pub proxy_protocol: bool,
    /// SPIFFE IDs (`spiffe://trust-domain/path`) → what they act as.
    pub spiffe: HashMap<String, MeshIdentity>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_cidr_block_holds_its_addresses_and_a_bare_address_only_itself() {
        let block: Cidr = "10.1.2.3/8".parse().unwrap();
        assert_eq!(block.to_string(), "10.0.0.0/8");
        assert!(block.contains(ip("10.255.0.1")));
        assert!(block.contains(ip("::ffff:10.0.0.1")));
        assert!(!block.contains(ip("11.0.0.1")));
        let one: Cidr = "127.0.0.6".parse().unwrap();
        assert!(one.contains(ip("127.0.0.6")) && !one.contains(ip("127.0.0.7")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("192.0.2.1")) && !all.contains(ip("::1")));
    }

    #[test]
    fn a_cidr_block_that_is_not_one_is_refused_naming_the_part() {
        assert!(matches!(
            "10.0.0/8".parse::<Cidr>(),
            Err(CidrError::Address(_))
        ));
        assert!(matches!(
            "10.0.0.0/33".parse::<Cidr>(),
            Err(CidrError::Prefix(_))
        ));
        assert!(matches!(
            "::/129".parse::<Cidr>(),
            Err(CidrError::Prefix(_))
        ));
        assert!(matches!(
            "10.0.0.0/x".parse::<Cidr>(),
            Err(CidrError::Prefix(_))
        ));
    }
}
