//! A Connect request's body, read whole up to [`MAX_REQUEST_BYTES`] — only once the call
//! was authenticated (the gRPC service reads it through `request::ConnectBody`), under the
//! body deadline and budget of `crate::body_limit`. A body over the limit
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
use http::{HeaderValue, header};
use http_body_util::BodyExt;
use tonic::body::Body;

/// How much of an oversized body is read and dropped before the answer (16 MiB: a 5 MiB
/// payload sent by mistake is 6.7 MiB of JSON); a client sending more is answered with the
/// rest unread and may see the connection reset.
pub const DRAIN_BYTES: usize = 64 * MAX_REQUEST_BYTES;

/// What a request's headers say of its body.
pub struct Declared {
    length: Option<u64>,
    expects_continue: bool,
    http1: bool,
    encoding: Option<HeaderValue>,
}

impl Declared {
    /// From the request's head.
    pub fn of(head: &http::request::Parts) -> Declared {
        let headers = &head.headers;
        Declared {
            length: headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok()),
            expects_continue: headers
                .get(header::EXPECT)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue")),
            http1: head.version <= http::Version::HTTP_11,
            encoding: headers
                .get(header::CONTENT_ENCODING)
                .filter(|e| !e.as_bytes().eq_ignore_ascii_case(b"identity"))
                .cloned(),
        }
    }
}

/// The body `declared` describes, or the error to answer.
pub async fn read(declared: &Declared, mut body: Body) -> Result<Bytes, ConnectError> {
    let too_long = declared
        .length
        .is_some_and(|n| n > MAX_REQUEST_BYTES as u64);
    if declared.http1 && declared.expects_continue && too_long {
        return Err(ConnectError::too_large());
    }
    let mut kept = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|status| ConnectError::unread(&status))?;
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
    if let Some(encoding) = &declared.encoding {
        let name = encoding.to_str().unwrap_or("?");
        return Err(ConnectError::unsupported_encoding(name));
    }
    Ok(kept.freeze())
}
