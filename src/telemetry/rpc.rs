//! One span and one measurement per ClaimService call, as a tower layer outside every other
//! layer (so calls refused by authentication, draining or the size limit count too).
//!
//! The span `rpc` carries `method`; the handler records `namespace` and, for Claim,
//! `decision` into it ([`super::note_namespace`], [`super::ClaimTelemetry`]). When the call
//! ends the layer records `code` and `latency_ms`, logs `rpc finished` at debug level
//! (target `claimd::rpc`) and observes `claimd_rpc_duration_seconds{method, code}`. Only
//! the RPCs ClaimService really has become `method` values; other paths (health,
//! reflection, unknown methods) pass through unmeasured.
//!
//! With traces on (`traces`), the span's parent is the caller's `traceparent` (a gRPC
//! metadata entry or, through the HTTP door, a header: the same `http` header map here),
//! it is exported as a SERVER span named `claimd.v1.ClaimService/<Method>` with the RPC
//! conventions' attributes, and `trace_id`/`span_id` are recorded into it, so every log
//! line of the call carries them.

use super::exporter::RPC_DURATION;
use prost::Message;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Instant;
use tonic::Code;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

const SERVICE_PREFIX: &str = "/claimd.v1.ClaimService/";

/// ClaimService's method names, read from the compiled descriptor set: new RPCs are
/// measured without a list to keep up to date.
static METHODS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let set = prost_types::FileDescriptorSet::decode(crate::pb::FILE_DESCRIPTOR_SET);
    let set = set.unwrap_or_default();
    set.file
        .iter()
        .filter(|file| file.package() == "claimd.v1")
        .flat_map(|file| &file.service)
        .filter(|service| service.name() == "ClaimService")
        .flat_map(|service| &service.method)
        .map(|method| method.name().to_owned())
        .collect()
});

/// The ClaimService method a request path names, if it is one.
fn method_of(path: &str) -> Option<&'static str> {
    let name = path.strip_prefix(SERVICE_PREFIX)?;
    METHODS.iter().find(|m| *m == name).map(String::as_str)
}

/// The canonical name of a gRPC status code, e.g. `INVALID_ARGUMENT`.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The status of a unary response: an error is in the headers (trailers-only); a success
/// has none there.
fn code_of<B>(response: &http::Response<B>) -> Code {
    match response.headers().get("grpc-status") {
        Some(status) => Code::from_bytes(status.as_bytes()),
        None => Code::Ok,
    }
}

/// The layer; see the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpcLayer;

impl<S> tower::Layer<S> for RpcLayer {
    type Service = RpcService<S>;

    fn layer(&self, inner: S) -> RpcService<S> {
        RpcService { inner }
    }
}

/// See [`RpcLayer`].
#[derive(Debug, Clone)]
pub struct RpcService<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for RpcService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let Some(method) = method_of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        // One span either way; its OpenTelemetry fields are filled only with traces on (with
        // them off, formatting the name for every call cost throughput).
        let span = tracing::info_span!(
            target: "claimd::rpc",
            "rpc",
            method,
            namespace = tracing::field::Empty,
            decision = tracing::field::Empty,
            code = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = tracing::field::Empty,
        );
        if crate::spans::on() {
            traced_call(&span, method, request.headers());
        }
        let started = Instant::now();
        let call = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let result = call.instrument(span.clone()).await;
            let elapsed = started.elapsed();
            let code = match &result {
                Ok(response) => code_name(code_of(response)),
                Err(_) => code_name(Code::Unknown),
            };
            metrics::histogram!(RPC_DURATION, "method" => method, "code" => code)
                .record(elapsed.as_secs_f64());
            let latency_ms = elapsed.as_secs_f64() * 1000.0;
            span.record("code", code);
            span.record("latency_ms", latency_ms);
            let status = match &result {
                Ok(response) => code_of(response),
                Err(_) => Code::Unknown,
            };
            if crate::spans::on() {
                super::traces::end_call(&span, status);
            }
            span.in_scope(|| {
                tracing::debug!(target: "claimd::rpc", code, latency_ms, "rpc finished");
            });
            result
        })
    }
}

/// The call span's OpenTelemetry name and kind, its parent from the caller's headers, its
/// ids recorded for the logs, and the RPC conventions' attributes (traces on only).
fn traced_call(span: &tracing::Span, method: &'static str, headers: &http::HeaderMap) {
    // Before anything reads the span's context: its name and kind are set while it is built.
    span.record(
        "otel.name",
        format!("claimd.v1.ClaimService/{method}").as_str(),
    );
    span.record("otel.kind", "server");
    super::traces::adopt_parent(span, headers);
    if let Some((trace_id, span_id)) = super::traces::ids(span) {
        span.record("trace_id", trace_id.as_str());
        span.record("span_id", span_id.as_str());
        span.set_attribute("rpc.system", "grpc");
        span.set_attribute("rpc.service", "claimd.v1.ClaimService");
        span.set_attribute("rpc.method", method);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claim_service_methods_are_measured() {
        assert_eq!(method_of("/claimd.v1.ClaimService/Claim"), Some("Claim"));
        assert_eq!(method_of("/claimd.v1.ClaimService/Get"), Some("Get"));
        assert_eq!(method_of("/claimd.v1.ClaimService/Nope"), None);
        assert_eq!(method_of("/grpc.health.v1.Health/Check"), None);
        assert_eq!(method_of("/claimd.v1.ClaimService/"), None);
    }
}
