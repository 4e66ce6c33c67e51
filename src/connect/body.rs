//! A Connect request's body, read whole up to [`MAX_REQUEST_BYTES`]. A body over the limit
//! is answered `resource_exhausted` only once the client has finished sending it (read and
//! thrown away, up to [`DRAIN_BYTES`]): answering earlier and closing with unread bytes in
//! the socket makes the kernel reset the connection, and most HTTP/1.1 clients then report
//! a broken pipe instead of the answer. An HTTP/1.1 client that sent `Expect:
//! 100-continue` is answered at once from its `Content-Length`, and never sends the body
//! (over HTTP/2 the stream is simply read: an answer before the body there left curl with
//! an empty reply). A compressed body (`Content-Encoding` other than `identity`) is
//! `unimplemented`, as Connect asks of a server without that compression: claimd compresses
//! nothing, on any of its protocols.

use super::codes::ConnectError;
use crate::api::MAX_REQUEST_BYTES;
use bytes::{BufMut, Bytes, BytesMut};
use http::header;
use http_body_util::BodyExt;
use tonic::body::Body;

/// How much of an oversized body is read and dropped before the answer (16 MiB: a 5 MiB
/// payload sent by mistake is 6.7 MiB of JSON); a client sending more is answered with the
/// rest unread and may see the connection reset.
pub const DRAIN_BYTES: usize = 64 * MAX_REQUEST_BYTES;

/// The body of a request with `head`, or the error to answer.
pub async fn read(head: &http::request::Parts, mut body: Body) -> Result<Bytes, ConnectError> {
    let headers = &head.headers;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let expects_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let http1 = head.version <= http::Version::HTTP_11;
    if http1 && expects_continue && declared.is_some_and(|n| n > MAX_REQUEST_BYTES as u64) {
        return Err(ConnectError::too_large());
    }
    let mut kept = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ConnectError::unreadable())?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen <= MAX_REQUEST_BYTES {
            kept.put(data);
        } else if seen > DRAIN_BYTES {
            break;
        }
    }
    if seen > MAX_REQUEST_BYTES {
        return Err(ConnectError::too_large());
    }
    if let Some(encoding) = headers
        .get(header::CONTENT_ENCODING)
        .filter(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"))
    {
        let name = encoding.to_str().unwrap_or("?");
        return Err(ConnectError::unsupported_encoding(name));
    }
    Ok(kept.freeze())
}
