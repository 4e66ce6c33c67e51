//! The HTTP door: `claimd.v1.ClaimService` in the Connect protocol's unary form
//! (`POST /claimd.v1.ClaimService/<Method>` with `application/json` or `application/proto`,
//! over HTTP/1.1 or HTTP/2), on the gRPC port. A tower layer outside every other but CORS
//! and the body limits: a Connect request is turned, from its headers alone, into the gRPC
//! request it means (`Connect-Timeout-Ms` as `grpc-timeout`, the other headers as they are;
//! `request.rs`) and goes through the same layers and the same service as any gRPC call —
//! authentication, deadlines, drain, limits, metrics. Its body is read only when the
//! service decodes the message, after authentication: a call without a valid key is
//! answered without a byte of its body read. The gRPC answer is turned back: the message
//! (as JSON, proto3's mapping, or as it is) or Connect's JSON error with its HTTP status.
//! Anything else (gRPC, gRPC-Web, health, reflection) passes through untouched.
//!
//! Why an adapter of our own and not a Connect crate: the maintained Rust implementation
//! generates its own message types and service traits, so it would serve a second copy
//! of the service; this layer keeps one implementation, reached by three protocols, and
//! does only the unary form (docs/ARCHITECTURE.md).

mod body;
mod codes;
mod json;
mod request;

use bytes::{Buf, Bytes};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;

/// The path prefix of the service the door serves.
const SERVICE_PREFIX: &str = "/claimd.v1.ClaimService/";

/// How a Connect request's messages are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Json,
    Proto,
}

impl Codec {
    /// The codec a request's `Content-Type` names; `None` for anything else.
    fn of(content_type: &str) -> Option<Codec> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/json" => Some(Codec::Json),
            "application/proto" => Some(Codec::Proto),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Codec::Json => "application/json",
            Codec::Proto => "application/proto",
        }
    }
}

/// What the door does with a request.
enum Route {
    /// Not a Connect request: the inner service answers it.
    Pass,
    /// A Connect unary call of this codec.
    Connect(Codec),
    /// A POST to the service with a content type no protocol here speaks: 415.
    Unsupported,
}

fn route<B>(request: &Request<B>) -> Route {
    if request.method() != http::Method::POST || !request.uri().path().starts_with(SERVICE_PREFIX) {
        return Route::Pass;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/grpc") {
        return Route::Pass;
    }
    match Codec::of(content_type) {
        Some(codec) => Route::Connect(codec),
        None => Route::Unsupported,
    }
}

/// Whether `request` is gRPC-Web (`application/grpc-web`, `+proto`, `-text`, …).
fn is_grpc_web<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc-web"))
}

/// The layer (see the module).
#[derive(Debug, Clone)]
pub struct ConnectLayer {
    messages: Arc<json::Messages>,
}

impl ConnectLayer {
    /// A layer for ClaimService's methods, from the compiled descriptors.
    pub fn new() -> anyhow::Result<ConnectLayer> {
        Ok(ConnectLayer {
            messages: Arc::new(json::Messages::load()?),
        })
    }
}

impl<S> tower::Layer<S> for ConnectLayer {
    type Service = ConnectService<S>;

    fn layer(&self, inner: S) -> ConnectService<S> {
        ConnectService {
            inner,
            messages: self.messages.clone(),
        }
    }
}

/// See [`ConnectLayer`].
#[derive(Debug, Clone)]
pub struct ConnectService<S> {
    inner: S,
    messages: Arc<json::Messages>,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S> tower::Service<Request<Body>> for ConnectService<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let route = route(&request);
        // What a browser page can send (Connect, gRPC-Web; not gRPC): protected mode checks
        // where it is addressed (`auth`).
        if !matches!(route, Route::Pass) || is_grpc_web(&request) {
            request.extensions_mut().insert(crate::auth::WebProtocol);
        }
        let codec = match route {
            Route::Pass => return Box::pin(self.inner.call(request)),
            Route::Unsupported => {
                let e = codes::ConnectError::unsupported_media_type();
                return Box::pin(async move { Ok(e.into_response()) });
            }
            Route::Connect(codec) => codec,
        };
        // The inner service was polled ready for this call; a clone serves the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let messages = self.messages.clone();
        let failure = request::Failure::default();
        let path = request.uri().path().to_owned();
        let grpc = request::to_grpc(request, codec, messages.clone(), failure.clone());
        Box::pin(async move {
            let grpc = match grpc {
                Ok(grpc) => grpc,
                Err(e) => return Ok(e.into_response()),
            };
            let answer = inner.call(grpc).await?;
            // A body that failed left the error to answer; the gRPC status says less.
            if let Some(e) = request::take(&failure) {
                return Ok(e.into_response());
            }
            Ok(match from_grpc(answer, codec, &messages, &path).await {
                Ok(response) => response,
                Err(e) => e.into_response(),
            })
        })
    }
}

/// The Connect response a gRPC answer means.
async fn from_grpc(
    answer: Response<Body>,
    codec: Codec,
    messages: &json::Messages,
    path: &str,
) -> Result<Response<Body>, codes::ConnectError> {
    let (parts, body) = answer.into_parts();
    let collected = body
        .collect()
        .await
        .map_err(|_| codes::ConnectError::internal("the answer could not be read"))?;
    let trailers = collected.trailers().cloned();
    let mut data = collected.to_bytes();
    // A trailers-only answer carries the status in its headers.
    let status = trailers
        .as_ref()
        .and_then(tonic::Status::from_header_map)
        .or_else(|| tonic::Status::from_header_map(&parts.headers));
    if let Some(status) = status.filter(|s| s.code() != tonic::Code::Ok) {
        return Err(codes::ConnectError::from_status(&status));
    }
    if data.remaining() < 5 {
        return Err(codes::ConnectError::internal("the answer had no message"));
    }
    data.advance(1);
    let len = data.get_u32() as usize;
    let message: Bytes = data.slice(..len.min(data.len()));
    let body = match codec {
        Codec::Proto => message,
        Codec::Json => messages.response_to_json(path, &message)?,
    };
    let mut response = Response::new(Body::new(Full::new(body)));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(codec.content_type()),
    );
    Ok(response)
}

/// The CORS layer for browser pages of `origins` (gRPC-Web and Connect from a browser);
/// `None` when no origin is allowed, so no CORS header is ever sent.
pub fn cors(origins: &[HeaderValue]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allow = [
        "content-type",
        "authorization",
        "x-grpc-web",
        "x-user-agent",
        "grpc-timeout",
        "connect-protocol-version",
        "connect-timeout-ms",
    ];
    let expose = ["grpc-status", "grpc-message", "grpc-status-details-bin"];
    Some(
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([http::Method::POST, http::Method::OPTIONS])
            .allow_headers(allow.map(http::HeaderName::from_static))
            .expose_headers(expose.map(http::HeaderName::from_static))
            .max_age(std::time::Duration::from_secs(3600)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_posts_to_the_service_with_a_connect_content_type_are_taken() {
        let req = |method: &str, path: &str, ct: &str| {
            Request::builder()
                .method(method)
                .uri(path)
                .header(header::CONTENT_TYPE, ct)
                .body(())
                .expect("a valid request")
        };
        let claim = "/claimd.v1.ClaimService/Claim";
        assert!(matches!(
            route(&req("POST", claim, "application/json")),
            Route::Connect(Codec::Json)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/json; charset=utf-8")),
            Route::Connect(Codec::Json)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/proto")),
            Route::Connect(Codec::Proto)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/grpc")),
            Route::Pass
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/grpc-web+proto")),
            Route::Pass
        ));
        assert!(matches!(
            route(&req("POST", claim, "text/plain")),
            Route::Unsupported
        ));
        assert!(matches!(
            route(&req("GET", claim, "application/json")),
            Route::Pass
        ));
        let health = "/grpc.health.v1.Health/Check";
        assert!(matches!(
            route(&req("POST", health, "application/json")),
            Route::Pass
        ));
    }
}
