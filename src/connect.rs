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
//! gRPC and gRPC-Web (in protobuf) and other paths (health, reflection) pass through
//! untouched; on the service's paths another content type is 415 and another method than
//! POST 405, each with Connect's error body.
//!
//! Why an adapter of our own and not a Connect crate: the maintained Rust implementation
//! generates its own message types and service traits, so it would serve a second copy
//! of the service; this layer keeps one implementation, reached by three protocols, and
//! does only the unary form (docs/ARCHITECTURE.md).

mod body;
mod codes;
mod duplicates;
mod json;
mod request;
mod route;

use bytes::{Buf, Bytes};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use route::{Codec, Route, is_grpc_web, route};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;

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
            Route::NotPost => {
                let mut response = codes::ConnectError::method_not_allowed().into_response();
                let allow = HeaderValue::from_static("POST");
                response.headers_mut().insert(header::ALLOW, allow);
                return Box::pin(async move { Ok(response) });
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
