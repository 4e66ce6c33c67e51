//! HTTP/2 below any gRPC or Connect client, over any byte stream (plain TCP, TLS, or TCP
//! from a chosen loopback source address), for the door's limit tests: requests of any
//! protocol with whatever `:authority` and headers the test says, bodies sent in parts or
//! never finished, and the answer's HTTP status and body (or gRPC status).

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// An HTTP/2 connection over `io`, driven on a task of its own.
pub async fn handshake<T>(io: T) -> (SendRequest<Bytes>, tokio::task::JoinHandle<()>)
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    (
        send,
        tokio::spawn(async move {
            let _ = connection.await;
        }),
    )
}

/// A TCP connection to `addr` from the loopback address `source` (127.0.0.2, …), so
/// that the server sees another peer address.
pub async fn tcp_from(source: IpAddr, addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::new(source, 0))
        .expect("bind a loopback source address");
    socket.connect(addr).await.expect("connects")
}

/// A POST to ClaimService's `method` addressed to `authority`, with `headers`.
pub fn post(
    authority: &str,
    method: &str,
    content_type: &str,
    headers: &[(&str, &str)],
) -> http::Request<()> {
    let mut request = http::Request::post(format!(
        "http://{authority}/claimd.v1.ClaimService/{method}"
    ))
    .header("content-type", content_type);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).expect("a valid request")
}

/// Opens `request` on `send` and sends `body` (unless the stream was answered and reset
/// first), ending the stream with it if `end`; the stream handle is returned so that an
/// unfinished body stays open while it lives.
pub async fn open(
    send: &mut SendRequest<Bytes>,
    request: http::Request<()>,
    body: Vec<u8>,
    end: bool,
) -> (ResponseFuture, h2::SendStream<Bytes>) {
    let mut ready = send
        .clone()
        .ready()
        .await
        .expect("the connection takes a stream");
    let (response, mut stream) = ready
        .send_request(request, false)
        .expect("the stream opens");
    // Answered and reset already (a refusal from the headers): the body has nowhere to go.
    let _ = stream.send_data(body.into(), end);
    (response, stream)
}

/// The answer to a request: its HTTP status, its body, and its gRPC status if it has
/// one (in its headers or trailers). `None` if not answered within `bound`.
pub async fn answer(
    response: ResponseFuture,
    bound: Duration,
) -> Option<(u16, Vec<u8>, Option<tonic::Code>)> {
    let read = async {
        let response = response.await.ok()?;
        let status = response.status().as_u16();
        let code = |headers: &http::HeaderMap| {
            let value = headers.get("grpc-status")?.to_str().ok()?;
            Some(tonic::Code::from_i32(value.parse().ok()?))
        };
        let mut grpc = code(response.headers());
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let Ok(chunk) = chunk else { break };
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        if grpc.is_none()
            && let Ok(Some(trailers)) = body.trailers().await
        {
            grpc = code(&trailers);
        }
        Some((status, bytes, grpc))
    };
    tokio::time::timeout(bound, read).await.ok().flatten()
}
