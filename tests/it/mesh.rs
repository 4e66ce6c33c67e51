//! claimd behind a proxy or a mesh (issue 48), through real proxies: Debian's `haproxy` in
//! TCP mode with `send-proxy-v2` (`mesh/haproxy.rs`): callers behind it are told apart by
//! the PROXY header's address and limited each by their own. The `[mesh]` table's parsing
//! is in `src/config/mesh` and `startup_errors/mesh.rs`.

mod haproxy;
mod identity;
mod mtls;
mod nginx;

use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// The program `name`, or a panic naming the Debian package that installs it.
pub fn program(name: &str, package: &str) -> std::path::PathBuf {
    for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let path = std::path::Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!("{name} is not installed: apt-get install {package} (scripts/test does)");
}

/// Waits until something accepts connections at `addr`, for at most 10 s.
pub async fn wait_for_port(addr: SocketAddr) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens at {addr} after 10 s");
}

/// A grpc.health.v1.Health/Check over HTTP/2 on `io`: its gRPC status, or `None` when the
/// connection was closed or nothing answered within 5 s. The connection stays open while
/// the returned sender lives.
pub async fn health<T>(io: T) -> (Option<tonic::Code>, Option<h2::client::SendRequest<Bytes>>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let call = async {
        let (send, connection) = h2::client::handshake(io).await.ok()?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut ready = send.clone().ready().await.ok()?;
        let request = http::Request::post("http://claimd/grpc.health.v1.Health/Check")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .ok()?;
        let (response, mut stream) = ready.send_request(request, false).ok()?;
        stream
            .send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)
            .ok()?;
        let response = response.await.ok()?;
        let code = |headers: &http::HeaderMap| {
            let value = headers.get("grpc-status")?.to_str().ok()?;
            Some(tonic::Code::from_i32(value.parse().ok()?))
        };
        let mut grpc = code(response.headers());
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.ok()?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if grpc.is_none() {
            grpc = code(&body.trailers().await.ok()??);
        }
        Some((grpc?, send))
    };
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Some((code, send))) => (Some(code), Some(send)),
        _ => (None, None),
    }
}
