//! Binding a listener at start: [`bind`] and its error, [`BindError`], which names the
//! address, the flag that set it and what to do — an address in use, a port below 1024
//! without the privilege, an address this machine does not have.

use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Why a listener could not be bound; the text names the address, the flag and the fix.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} ({flag}): {}", advice(flag, *addr, error))]
pub struct BindError {
    /// The flag that set the address, e.g. `--listen`.
    pub flag: &'static str,
    /// The address.
    pub addr: SocketAddr,
    /// What the operating system said.
    pub error: std::io::Error,
}

/// Binds `addr`, set by `flag`.
pub async fn bind(flag: &'static str, addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| BindError { flag, addr, error })
}

/// What went wrong, in words, and what to do about it.
fn advice(flag: &str, addr: SocketAddr, error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::AddrInUse => {
            format!("the address is in use — stop the other process or pass another {flag}")
        }
        ErrorKind::PermissionDenied if addr.port() < 1024 => format!(
            "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE — pass \
             {flag} with a port from 1024 up, or grant claimd the capability"
        ),
        ErrorKind::AddrNotAvailable => format!(
            "{} is not an address of this machine — pass {flag} with one of its addresses, \
             or 0.0.0.0 / [::] for all of them",
            addr.ip()
        ),
        _ => format!("{error} — check {flag}"),
    }
}
