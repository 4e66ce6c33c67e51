//! HTTP/2 below tonic, for the limit tests: raw frames on a TCP socket (to be a client that
//! stops half-way), and gRPC calls over the `h2` crate (to hold a call open with its body
//! unfinished, and to see the server's SETTINGS).

use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types used here.
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
/// The ACK flag of SETTINGS and PING.
pub const ACK: u8 = 0x1;

/// A whole frame: the 9-byte header and `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame");
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// A TCP connection to `addr` that has sent `first` (possibly nothing).
pub async fn raw(addr: SocketAddr, first: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    stream.write_all(first).await.expect("writes");
    stream
}

/// The next frame `(type, flags, payload)`, or `None` once the server closed the connection.
pub async fn read_frame(stream: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await.ok()?;
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some((header[3], header[4], payload))
}

/// Whether the server closes `stream` (EOF or reset) within `bound`, reading and dropping
/// whatever it sends until then.
pub async fn closed_within(stream: &mut TcpStream, bound: Duration) -> bool {
    let drain = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, drain).await.is_ok()
}

/// An HTTP/2 connection to `addr` through the `h2` crate, its connection driven on a task of
/// its own (which ends when the server closes it).
pub async fn h2_connect(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(addr).await.expect("connects");
    let (send, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    (send, tokio::spawn(connection))
}

/// The headers of a gRPC call of `method` of ClaimService.
pub fn request(addr: SocketAddr, method: &str) -> http::Request<()> {
    http::Request::post(format!("http://{addr}/claimd.v1.ClaimService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a valid request")
}

/// `message` as a gRPC frame: uncompressed, its length, its bytes.
pub fn message(message: &impl prost::Message) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = vec![0];
    out.extend(u32::try_from(body.len()).expect("small").to_be_bytes());
    out.extend(body);
    out
}

/// Starts a call of `method` and sends `body` without ending the stream: the call stays open
/// until the caller sends the rest (or drops it).
pub fn open_call(
    send: &mut h2::client::SendRequest<Bytes>,
    addr: SocketAddr,
    method: &str,
    body: Vec<u8>,
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let (response, mut stream) = send
        .send_request(request(addr, method), false)
        .expect("the stream opens");
    stream
        .send_data(body.into(), false)
        .expect("the body is sent");
    (response, stream)
}

/// The call's gRPC status code, from its trailers-only answer or its trailers.
pub async fn status(response: h2::client::ResponseFuture) -> tonic::Code {
    let response = response.await.expect("an answer");
    let code = |value: &http::HeaderValue| {
        let n: i32 = value.to_str().expect("ascii").parse().expect("a number");
        tonic::Code::from_i32(n)
    };
    if let Some(value) = response.headers().get("grpc-status") {
        return code(value);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("the answer's body");
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.expect("trailers").expect("trailers");
    code(trailers.get("grpc-status").expect("grpc-status"))
}
