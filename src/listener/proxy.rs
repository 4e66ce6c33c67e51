//! PROXY protocol v2 (issue 48): a connection from a trusted proxy (`[mesh]`
//! `trusted_proxies` with `proxy_protocol = "v2"`) opens with a binary header naming the
//! caller's address; that address is then the connection's source for every per-source
//! limit, log and metric. The header is read straight from the socket, before any byte
//! reaches TLS or HTTP, within the first-bytes timeout; one missing, malformed or longer
//! than [`MAX_HEADER_BYTES`] closes the connection. A `LOCAL` header (the proxy's own
//! health checks) leaves the proxy as the source.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The 12 bytes every v2 header starts with.
pub const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The most a header may take after its 16 fixed bytes: addresses and TLVs (HAProxy sends
/// tens of bytes; AWS and GCP add a few TLVs).
pub const MAX_HEADER_BYTES: usize = 1024;

/// Why a PROXY header was refused (logged at debug level; the connection is closed).
#[derive(Debug, thiserror::Error)]
pub enum ProxyHeaderError {
    /// The connection ended or failed before the header was whole.
    #[error("the connection ended before its PROXY header: {0}")]
    Io(#[from] std::io::Error),
    /// The first 12 bytes are not the v2 signature (no header, or v1's text form).
    #[error("no PROXY v2 header (the connection must start with one)")]
    Signature,
    /// The version is not 2 or the command neither LOCAL nor PROXY.
    #[error("PROXY header version/command byte {0:#04x} is not v2 LOCAL or PROXY")]
    Command(u8),
    /// The declared length is over [`MAX_HEADER_BYTES`] or too short for its addresses.
    #[error("PROXY header length {0} does not fit its address family or the limit")]
    Length(usize),
    /// A PROXY command over a family other than TCP over IPv4 or IPv6.
    #[error("PROXY header family {0:#04x} is not TCP over IPv4 or IPv6")]
    Family(u8),
}

/// Reads one v2 header from `io`: the caller's address, or `None` for a LOCAL header.
/// Reads exactly the header's bytes, nothing of what follows; the caller bounds the time.
pub async fn read_header(
    io: &mut (impl AsyncRead + Unpin),
) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let mut fixed = [0u8; 16];
    io.read_exact(&mut fixed[..12]).await?;
    if fixed[..12] != SIGNATURE {
        return Err(ProxyHeaderError::Signature);
    }
    io.read_exact(&mut fixed[12..]).await?;
    let command = fixed[12];
    let family = fixed[13];
    let len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    if len > MAX_HEADER_BYTES {
        return Err(ProxyHeaderError::Length(len));
    }
    let mut rest = vec![0u8; len];
    io.read_exact(&mut rest).await?;
    match command {
        0x20 => Ok(None),
        0x21 => source_of(family, &rest).map(Some),
        other => Err(ProxyHeaderError::Command(other)),
    }
}

/// The source address of a PROXY command's address block.
fn source_of(family: u8, block: &[u8]) -> Result<SocketAddr, ProxyHeaderError> {
    let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
    match family {
        0x11 => {
            if block.len() < 12 {
                return Err(ProxyHeaderError::Length(block.len()));
            }
            let ip = Ipv4Addr::new(block[0], block[1], block[2], block[3]);
            Ok(SocketAddr::new(IpAddr::V4(ip), port(8)))
        }
        0x21 => {
            if block.len() < 36 {
                return Err(ProxyHeaderError::Length(block.len()));
            }
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&block[..16]);
            Ok(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(octets)),
                port(32),
            ))
        }
        other => Err(ProxyHeaderError::Family(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(command: u8, family: u8, block: &[u8]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        out.extend([command, family]);
        out.extend((block.len() as u16).to_be_bytes());
        out.extend(block);
        out
    }

    async fn read(bytes: &[u8]) -> Result<Option<SocketAddr>, ProxyHeaderError> {
        read_header(&mut &bytes[..]).await
    }

    #[tokio::test]
    async fn a_v4_or_v6_proxy_header_names_the_caller_and_leaves_what_follows() {
        let mut v4 = header(0x21, 0x11, &[127, 0, 0, 2, 127, 0, 0, 1, 0x30, 0x39, 0, 80]);
        v4.extend(b"PRI * HTTP/2.0");
        let mut io = &v4[..];
        let addr = read_header(&mut io).await.unwrap();
        assert_eq!(addr, Some("127.0.0.2:12345".parse().unwrap()));
        assert_eq!(io, b"PRI * HTTP/2.0");
        let mut block = vec![0u8; 36];
        block[..16].copy_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        block[32..34].copy_from_slice(&443u16.to_be_bytes());
        block.extend([0x04, 0, 1, 0]); // a TLV, skipped
        let addr = read(&header(0x21, 0x21, &block)).await.unwrap();
        assert_eq!(addr, Some("[2001:db8::7]:443".parse().unwrap()));
        assert_eq!(read(&header(0x20, 0x00, &[])).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_missing_short_or_malformed_header_is_refused() {
        let http = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        assert!(matches!(read(http).await, Err(ProxyHeaderError::Signature)));
        let v1 = b"PROXY TCP4 127.0.0.2 127.0.0.1 1 2\r\n";
        assert!(matches!(read(v1).await, Err(ProxyHeaderError::Signature)));
        let cut = header(0x21, 0x11, &[127, 0, 0, 2]);
        assert!(matches!(read(&cut).await, Err(ProxyHeaderError::Length(4))));
        let short = &header(0x21, 0x11, &[0; 12])[..20];
        assert!(matches!(read(short).await, Err(ProxyHeaderError::Io(_))));
        let v1_cmd = header(0x11, 0x11, &[0; 12]);
        assert!(matches!(
            read(&v1_cmd).await,
            Err(ProxyHeaderError::Command(0x11))
        ));
        let udp = header(0x21, 0x12, &[0; 12]);
        assert!(matches!(
            read(&udp).await,
            Err(ProxyHeaderError::Family(0x12))
        ));
        let mut huge = SIGNATURE.to_vec();
        huge.extend([0x21, 0x11, 0xff, 0xff]);
        assert!(matches!(
            read(&huge).await,
            Err(ProxyHeaderError::Length(65535))
        ));
    }
}
