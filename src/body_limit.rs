//! What reading a request body may cost (docs/DESIGN.md §5.10), on every protocol of the
//! gRPC listeners — gRPC, gRPC-Web and the Connect door: a tower layer, outside every other,
//! that wraps each request's body in a [`LimitedBody`] and reads nothing itself. The body
//! is read only when a service decodes it, which is after authentication, so a caller
//! without a valid key is answered from its headers and costs no body bytes. Once read:
//!
//! - **a deadline**: the body must have arrived whole within `--body-read-timeout` of its
//!   first read, or the call is answered `DEADLINE_EXCEEDED` (the Connect door: HTTP 408)
//!   and its stream reset, or over HTTP/1.1 its connection closed. The call's own deadline
//!   (`grpc-timeout`, `Connect-Timeout-Ms`) covers the body too, in `deadline`, so the
//!   smaller of the two wins. A client stream (reflection, [`CLIENT_STREAMS`]) may stay
//!   open as long as it sends something within each `--body-read-timeout`;
//! - **a budget**: the bytes all bodies being read hold at once are at most
//!   `--max-buffered-body-bytes`, and those of one source (an IPv4 address, an IPv6 /64)
//!   at most `--max-buffered-body-bytes-per-source`. A body counts the bytes it has read,
//!   up to what anything keeps of one body ([`KEPT_PER_BODY`]: the request limit and a
//!   gRPC frame header; beyond it bytes are refused by tonic or read and dropped by the
//!   door), until it is dropped. A body that would pass either limit is answered
//!   `RESOURCE_EXHAUSTED` (Connect: 429) at once, not queued.
//!
//! A body nothing read (a call refused from its headers) is dropped once the answer is
//! decided; over HTTP/2 it first lingers a moment, so the client sees that answer
//! ([`linger`]).

mod body;
mod budget;
mod linger;

pub use body::LimitedBody;
pub use budget::{Budget, Source};
pub use linger::{LINGER_BYTES, Linger};

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;

/// The most one body counts against the budget: the largest request message and its
/// 5-byte gRPC frame header.
pub const KEPT_PER_BODY: usize = MAX_REQUEST_BYTES + 5;

/// The largest request message on every protocol (docs/DESIGN.md §2.8); `api::validate`
/// says why (about four times the largest valid request) and checks it at compile time.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// The methods whose request is a stream of messages over the call's life (reflection,
/// which grpcurl and IDEs keep open between questions): their body's deadline runs from
/// the bytes before, not from the first read.
const CLIENT_STREAMS: [&str; 2] = [
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// Why a request body was cut off (a status in `api/error.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyRefused {
    /// The body did not arrive whole within `--body-read-timeout`.
    #[error(
        "the request body did not arrive within {timeout:?} (--body-read-timeout); send it \
         at once"
    )]
    TooSlow {
        /// The timeout.
        timeout: Duration,
    },
    /// Every call's bodies together hold `--max-buffered-body-bytes`.
    #[error(
        "claimd holds as many request bytes as it may ({bytes}, --max-buffered-body-bytes); \
         retry later"
    )]
    BudgetFull {
        /// The limit.
        bytes: usize,
    },
    /// This source's bodies hold `--max-buffered-body-bytes-per-source`.
    #[error(
        "this address's calls hold as many request bytes as one source may ({bytes}, \
         --max-buffered-body-bytes-per-source); retry later"
    )]
    SourceFull {
        /// The limit.
        bytes: usize,
    },
}

/// The body limits of the gRPC listeners (from `--body-read-timeout`,
/// `--max-buffered-body-bytes` and `--max-buffered-body-bytes-per-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// How long a body may take to arrive from its first read; `None`: no limit.
    pub read_timeout: Option<Duration>,
    /// The bytes all bodies may hold at once.
    pub max_buffered: usize,
    /// The bytes the bodies of one source may hold at once.
    pub max_buffered_per_source: usize,
}

/// The layer (see the module).
#[derive(Debug, Clone)]
pub struct BodyLimitLayer {
    budget: Arc<Budget>,
    read_timeout: Option<Duration>,
    linger: Linger,
}

impl BodyLimitLayer {
    /// A layer with its own budget under `limits`.
    pub fn new(limits: BodyLimits) -> BodyLimitLayer {
        BodyLimitLayer {
            budget: Arc::new(Budget::new(
                limits.max_buffered,
                limits.max_buffered_per_source,
            )),
            read_timeout: limits.read_timeout,
            linger: Linger::new(limits.read_timeout),
        }
    }

    /// The budget this layer's bodies count against; HTTP/1.1 request heads being read
    /// count against it too (`server::heads`).
    pub fn budget(&self) -> Arc<Budget> {
        self.budget.clone()
    }
}

impl<S> tower::Layer<S> for BodyLimitLayer {
    type Service = BodyLimitService<S>;

    fn layer(&self, inner: S) -> BodyLimitService<S> {
        BodyLimitService {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`BodyLimitLayer`].
#[derive(Debug, Clone)]
pub struct BodyLimitService<S> {
    inner: S,
    layer: BodyLimitLayer,
}

impl<S> tower::Service<http::Request<Body>> for BodyLimitService<S>
where
    S: tower::Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> S::Future {
        let source = crate::auth::peer_ip(&request).map(Source::from);
        let budget = self.layer.budget.clone();
        let timeout = self.layer.read_timeout;
        let stream = CLIENT_STREAMS.contains(&request.uri().path());
        let linger =
            (request.version() == http::Version::HTTP_2).then(|| self.layer.linger.clone());
        self.inner.call(request.map(|body| {
            Body::new(LimitedBody::new(
                body, budget, source, timeout, stream, linger,
            ))
        }))
    }
}
