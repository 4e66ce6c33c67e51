//! Which door a conformance test's client goes through ([`Door`]), and the translator that
//! lets the gRPC conformance suite run unchanged over the Connect protocol: a local HTTP/2
//! server that takes each call from the suite's tonic client and sends it to claimd as one
//! Connect unary request over real HTTP/1.1 — JSON (proto3 JSON mapping, written and read
//! with `prost-reflect`, not claimd's adapter) or binary proto — then turns claimd's answer
//! back into gRPC: the message, or the Connect error as `grpc-status`, `grpc-message` and
//! `grpc-status-details-bin` (the BadRequest naming the field). It checks on the way that
//! the HTTP status is the one the Connect specification gives the code, and answers a
//! mismatch with an `INTERNAL` the test then fails on.

use base64::Engine as _;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor, ReflectMessage as _};
use std::convert::Infallible;
use std::net::SocketAddr;
use tonic::Code;

/// How the suite's client reaches claimd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// gRPC over HTTP/2, straight to claimd.
    Grpc,
    /// Connect unary over HTTP/1.1, `application/json`.
    ConnectJson,
    /// Connect unary over HTTP/1.1, `application/proto`.
    ConnectProto,
}

impl Door {
    /// Where a client going through this door connects to reach claimd at `addr`, and the
    /// translator that keeps that address served (none for gRPC).
    pub async fn in_front_of(self, addr: SocketAddr) -> (SocketAddr, Option<Translator>) {
        match self {
            Door::Grpc => (addr, None),
            door => {
                let translator = Translator::start(addr, door).await;
                (translator.addr, Some(translator))
            }
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// A running translator; it stops when dropped.
pub struct Translator {
    /// Where the suite's gRPC client connects.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Translator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Translator {
    /// Listens on 127.0.0.1:0 and translates every call to a Connect request to `upstream`
    /// through `door` (`ConnectJson` or `ConnectProto`).
    pub async fn start(upstream: SocketAddr, door: Door) -> Translator {
        assert_ne!(door, Door::Grpc, "gRPC needs no translator");
        // Loopback port 0 is always there for a test.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("a bound address");
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| async move {
                        Ok::<_, Infallible>(translate(request, upstream, door).await)
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Translator { addr, task }
    }
}

/// One gRPC call in, one gRPC answer out; anything the translator cannot follow is an
/// `INTERNAL` whose message says what.
async fn translate(request: Request<Incoming>, upstream: SocketAddr, door: Door) -> Response<Body> {
    match call(request, upstream, door).await {
        Ok(response) => response,
        Err(status) => status.into_http(),
    }
}

async fn call(
    request: Request<Incoming>,
    upstream: SocketAddr,
    door: Door,
) -> Result<Response<Body>, tonic::Status> {
    let broken = |what: String| tonic::Status::internal(format!("translator: {what}"));
    let path = request.uri().path().to_owned();
    let method = method(&path).ok_or_else(|| broken(format!("no method {path}")))?;
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map_err(|e| broken(e.to_string()))?;
    let message = unframe(body.to_bytes()).ok_or_else(|| broken("a bad gRPC frame".into()))?;
    let (content_type, payload) = match door {
        Door::ConnectJson => {
            let decoded = DynamicMessage::decode(method.input(), message)
                .map_err(|e| broken(format!("the request does not decode: {e}")))?;
            (
                "application/json",
                Bytes::from(to_json(&decoded).map_err(broken)?),
            )
        }
        _ => ("application/proto", message),
    };
    let mut out = Request::post(path.as_str())
        .header("host", upstream.to_string())
        .header("content-type", content_type)
        .header("connect-protocol-version", "1")
        .body(Full::new(payload))
        .map_err(|e| broken(e.to_string()))?;
    carry_headers(&parts.headers, out.headers_mut())?;

    let stream = tokio::net::TcpStream::connect(upstream)
        .await
        .map_err(|e| tonic::Status::unavailable(format!("translator: connect: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| broken(format!("HTTP/1.1 handshake: {e}")))?;
    tokio::spawn(connection);
    let answer = sender
        .send_request(out)
        .await
        .map_err(|e| tonic::Status::unavailable(format!("translator: HTTP/1.1: {e}")))?;
    let status = answer.status();
    let answered_as = header(answer.headers(), "content-type");
    let bytes = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| broken(e.to_string()))?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(error(status, &answered_as, &bytes));
    }
    if answered_as != content_type {
        return Err(broken(format!("{content_type} answered as {answered_as}")));
    }
    let message = match door {
        Door::ConnectJson => {
            let mut json = serde_json::Deserializer::from_slice(&bytes);
            let decoded = DynamicMessage::deserialize(method.output(), &mut json)
                .map_err(|e| broken(format!("the answer's JSON does not decode: {e}")))?;
            Bytes::from(decoded.encode_to_vec())
        }
        _ => bytes,
    };
    Ok(grpc_ok(message))
}

/// `message` in proto3's JSON mapping. A Duration the mapping cannot express (beyond
/// ±10,000 years, nanos out of range, or signs that disagree: the suite sends such values
/// to see them refused) goes as `{"seconds": …, "nanos": …}`, the nearest thing a JSON
/// client could send, which claimd must refuse naming the field just the same.
fn to_json(message: &DynamicMessage) -> Result<Vec<u8>, String> {
    let mut expressible = message.clone();
    let mut raw = Vec::new();
    for field in message.descriptor().fields() {
        let is_duration = field
            .kind()
            .as_message()
            .is_some_and(|m| m.full_name() == "google.protobuf.Duration");
        if !is_duration || !message.has_field(&field) {
            continue;
        }
        let value = message.get_field(&field);
        let Some(duration) = value.as_message() else {
            continue;
        };
        let part = |name| duration.get_field_by_name(name).map(|v| v.into_owned());
        let seconds = part("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
        let nanos = part("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
        let in_range =
            seconds.unsigned_abs() <= 315_576_000_000 && nanos.unsigned_abs() <= 999_999_999;
        let signs_agree = !(seconds > 0 && nanos < 0 || seconds < 0 && nanos > 0);
        if !(in_range && signs_agree) {
            expressible.clear_field(&field);
            raw.push((field.json_name().to_owned(), seconds, nanos));
        }
    }
    let mut json = serde_json::to_value(&expressible).map_err(|e| e.to_string())?;
    for (name, seconds, nanos) in raw {
        json[name] = serde_json::json!({ "seconds": seconds, "nanos": nanos });
    }
    serde_json::to_vec(&json).map_err(|e| e.to_string())
}

/// The method a path names in `claimd.v1.ClaimService`.
fn method(path: &str) -> Option<MethodDescriptor> {
    // claimd's own descriptor set always decodes: the server serves it for reflection.
    let pool = DescriptorPool::decode(claimd::pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let name = path.strip_prefix("/claimd.v1.ClaimService/")?;
    let service = pool.get_service_by_name("claimd.v1.ClaimService")?;
    service.methods().find(|m| m.name() == name)
}

/// The one message of a unary gRPC request body (uncompressed, length-prefixed).
fn unframe(mut body: Bytes) -> Option<Bytes> {
    if body.len() < 5 || body[0] != 0 {
        return None;
    }
    body.advance(1);
    let length = body.get_u32() as usize;
    (body.len() == length).then_some(body)
}

/// The key, the metadata and the deadline, as Connect carries them.
fn carry_headers(grpc: &HeaderMap, connect: &mut HeaderMap) -> Result<(), tonic::Status> {
    for (name_of, value) in grpc {
        let name = name_of.as_str();
        let transport = name.starts_with("grpc-") || name.starts_with(':');
        if !transport && !matches!(name, "te" | "content-type" | "user-agent" | "host") {
            connect.append(name_of.clone(), value.clone());
        }
    }
    if let Some(timeout) = grpc.get("grpc-timeout") {
        let timeout = claimd::deadline::grpc_timeout(timeout.as_bytes()).ok_or_else(|| {
            tonic::Status::internal(format!("translator: grpc-timeout {timeout:?}"))
        })?;
        // Whole milliseconds, rounded up: never a shorter deadline than the client's.
        let ms = timeout.as_nanos().div_ceil(1_000_000);
        connect.insert("connect-timeout-ms", HeaderValue::from(ms as u64));
    }
    Ok(())
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A Connect error answer as the gRPC status it stands for.
fn error(http: StatusCode, content_type: &str, body: &[u8]) -> tonic::Status {
    let broken = |what: String| tonic::Status::internal(format!("translator: {what}"));
    if content_type != "application/json" {
        return broken(format!("HTTP {http} answered as {content_type:?}"));
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return broken(format!("HTTP {http} with a body that is not JSON"));
    };
    let name = json["code"].as_str().unwrap_or_default();
    let Some(code) = code(name) else {
        return broken(format!("HTTP {http} with code {name:?}"));
    };
    if http != spec_http_status(code) {
        return broken(format!(
            "code {name} came with HTTP {http}, not the specification's"
        ));
    }
    let message = json["message"].as_str().unwrap_or_default().to_owned();
    let mut details = Vec::new();
    for detail in json["details"].as_array().into_iter().flatten() {
        let kind = detail["type"].as_str().unwrap_or_default();
        let value = detail["value"].as_str().unwrap_or_default();
        let Ok(value) =
            base64::engine::general_purpose::STANDARD_NO_PAD.decode(value.trim_end_matches('='))
        else {
            return broken(format!("detail {kind} is not base64"));
        };
        details.push(prost_types::Any {
            type_url: format!("type.googleapis.com/{kind}"),
            value,
        });
    }
    if details.is_empty() {
        return tonic::Status::new(code, message);
    }
    let status = tonic_types::pb::Status {
        code: code as i32,
        message: message.clone(),
        details,
    };
    tonic::Status::with_details(code, message, status.encode_to_vec().into())
}

/// The gRPC code of a Connect code name (connectrpc.com/docs/protocol, "Error Codes").
fn code(name: &str) -> Option<Code> {
    Some(match name {
        "canceled" => Code::Cancelled,
        "unknown" => Code::Unknown,
        "invalid_argument" => Code::InvalidArgument,
        "deadline_exceeded" => Code::DeadlineExceeded,
        "not_found" => Code::NotFound,
        "already_exists" => Code::AlreadyExists,
        "permission_denied" => Code::PermissionDenied,
        "resource_exhausted" => Code::ResourceExhausted,
        "failed_precondition" => Code::FailedPrecondition,
        "aborted" => Code::Aborted,
        "out_of_range" => Code::OutOfRange,
        "unimplemented" => Code::Unimplemented,
        "internal" => Code::Internal,
        "unavailable" => Code::Unavailable,
        "data_loss" => Code::DataLoss,
        "unauthenticated" => Code::Unauthenticated,
        _ => return None,
    })
}

/// The HTTP status the Connect specification gives each code, written out from its table.
fn spec_http_status(code: Code) -> StatusCode {
    let status = match code {
        Code::Cancelled => 499,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::DeadlineExceeded => 504,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::PermissionDenied => 403,
        Code::ResourceExhausted => 429,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::Unauthenticated => 401,
        Code::Ok => 200,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    };
    // Every number above is a valid status.
    StatusCode::from_u16(status).expect("a status")
}

/// A unary gRPC answer: the framed message, then `grpc-status: 0` in the trailers.
fn grpc_ok(message: Bytes) -> Response<Body> {
    let mut framed = BytesMut::with_capacity(message.len() + 5);
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.put(message);
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = [
        Ok::<_, Infallible>(Frame::data(framed.freeze())),
        Ok(Frame::trailers(trailers)),
    ];
    let body = StreamBody::new(futures::stream::iter(frames));
    let mut response = Response::new(BodyExt::boxed(body));
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    response
}
