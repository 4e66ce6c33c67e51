//! A Connect request as the gRPC request it means, made from its headers alone: the path
//! and headers as they are (`Connect-Timeout-Ms` as `grpc-timeout`, the content type
//! gRPC's), and a [`ConnectBody`] that reads the Connect body only when the gRPC service
//! decodes its message — after authentication, under the deadlines and the body budget —
//! and yields it framed as one gRPC message (JSON turned into protobuf). When the body
//! cannot be read or does not decode, the Connect error to answer is left in a
//! [`Failure`] for the door to send instead of the gRPC status it turns into.

use super::body::{self, Declared};
use super::codes::ConnectError;
use super::{Codec, json};
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderValue, Request, header};
use hyper::body::Frame;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::Status;
use tonic::body::Body;

/// Where a [`ConnectBody`] leaves the Connect error it failed with.
pub type Failure = Arc<Mutex<Option<ConnectError>>>;

/// Takes the error a body left, if it failed.
pub fn take(failure: &Failure) -> Option<ConnectError> {
    failure.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The gRPC request a Connect request means; an error (a bad `Connect-Timeout-Ms`) is
/// found in the headers alone.
pub fn to_grpc(
    request: Request<Body>,
    codec: Codec,
    messages: Arc<json::Messages>,
    failure: Failure,
) -> Result<Request<Body>, ConnectError> {
    let (mut parts, body) = request.into_parts();
    let declared = Declared::of(&parts);
    let headers = &mut parts.headers;
    let timeout = headers.remove("connect-timeout-ms");
    headers.remove(header::CONTENT_LENGTH);
    headers.remove("connect-protocol-version");
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
    if let Some(ms) = timeout {
        let grpc_timeout = grpc_timeout(ms.as_bytes()).ok_or_else(ConnectError::bad_timeout)?;
        headers.insert("grpc-timeout", grpc_timeout);
    }
    parts.version = http::Version::HTTP_2;
    let path = parts.uri.path().to_owned();
    let read = async move {
        let bytes = body::read(&declared, body).await?;
        let message = match codec {
            Codec::Proto => bytes,
            Codec::Json => messages.request_from_json(&path, &bytes)?,
        };
        let len = u32::try_from(message.len()).map_err(|_| ConnectError::too_large())?;
        let mut framed = BytesMut::with_capacity(5 + message.len());
        framed.put_u8(0);
        framed.put_u32(len);
        framed.put_slice(&message);
        Ok(framed.freeze())
    };
    let body = ConnectBody {
        read: Some(Box::pin(read)),
        failure,
    };
    Ok(Request::from_parts(parts, Body::new(body)))
}

/// The `grpc-timeout` a `Connect-Timeout-Ms` means: 1 to 10 digits, as Connect allows, in
/// milliseconds; gRPC's value has at most 8 digits, so one of more than 8 is sent in whole
/// seconds (rounded down: less than a second of a deadline over a day away).
fn grpc_timeout(ms: &[u8]) -> Option<HeaderValue> {
    if ms.is_empty() || ms.len() > 10 || !ms.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms: u64 = std::str::from_utf8(ms).ok()?.parse().ok()?;
    let text = if ms <= 99_999_999 {
        format!("{ms}m")
    } else {
        format!("{}S", ms / 1000)
    };
    HeaderValue::from_str(&text).ok()
}

type Reading = Pin<Box<dyn Future<Output = Result<Bytes, ConnectError>> + Send>>;

/// The gRPC body of a Connect request: nothing is read until it is first polled; then
/// the whole Connect body, as one framed message (see the module).
struct ConnectBody {
    read: Option<Reading>,
    failure: Failure,
}

impl hyper::body::Body for ConnectBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(read) = &mut self.read else {
            return Poll::Ready(None);
        };
        let done = std::task::ready!(read.as_mut().poll(cx));
        self.read = None;
        Poll::Ready(Some(match done {
            Ok(framed) => Ok(Frame::data(framed)),
            Err(e) => {
                let status = e.status();
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Err(status)
            }
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::grpc_timeout;

    #[test]
    fn connect_timeouts_of_up_to_ten_digits_become_grpc_timeouts_of_at_most_eight() {
        let of = |ms: &str| grpc_timeout(ms.as_bytes()).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(of("0").as_deref(), Some("0m"));
        assert_eq!(of("1500").as_deref(), Some("1500m"));
        assert_eq!(of("99999999").as_deref(), Some("99999999m"));
        assert_eq!(of("1000000000").as_deref(), Some("1000000S"));
        assert_eq!(of("9999999999").as_deref(), Some("9999999S"));
        for refused in ["", "12345678901", "+5", "-5", "5s", "1.5", " 5"] {
            assert_eq!(of(refused), None, "{refused:?}");
        }
    }
}
