//! Graceful drain: once shutdown starts, every new call except health is refused with
//! UNAVAILABLE (the client retries on another replica) while calls already running finish.
//! The layer counts calls in flight, so the server can keep its connections open — and keep
//! answering UNAVAILABLE instead of dropping them — until the last one is done.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use tokio::sync::Notify;
use tonic::Status;

/// The path prefix of the health service, which keeps answering (NOT_SERVING) while draining.
const HEALTH_PREFIX: &str = "/grpc.health.v1.Health/";

/// The answer to a call that arrives while claimd drains (UNAVAILABLE, in `api/error.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("claimd is shutting down; retry on another replica")]
pub struct ShuttingDown;

#[derive(Debug, Default)]
struct State {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    idle: Notify,
    started: Notify,
}

/// A switch shared by the server and the layer (set once, at shutdown) and the count of
/// calls in flight.
#[derive(Debug, Clone, Default)]
pub struct Drain(Arc<State>);

impl Drain {
    /// Starts draining: new calls are refused from now on.
    pub fn start(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        self.0.started.notify_waiters();
    }

    /// Completes once draining has started (at once if it has): waiting Claims are
    /// answered then (`api::wait`).
    pub async fn started(&self) {
        let mut started = std::pin::pin!(self.0.started.notified());
        started.as_mut().enable();
        if !self.draining() {
            started.await;
        }
    }

    /// Completes once no call is in flight (call after [`Drain::start`]).
    pub async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            if self.0.in_flight.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Whether draining has started.
    pub fn draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }
}

/// Counts one call in flight for as long as it lives (however the call ends).
struct InFlight(Drain);

impl InFlight {
    fn new(drain: &Drain) -> InFlight {
        drain.0.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(drain.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.0.idle.notify_waiters();
        }
    }
}

impl<S> tower::Layer<S> for Drain {
    type Service = DrainService<S>;

    fn layer(&self, inner: S) -> DrainService<S> {
        DrainService {
            inner,
            drain: self.clone(),
        }
    }
}

/// See [`Drain`].
#[derive(Debug, Clone)]
pub struct DrainService<S> {
    inner: S,
    drain: Drain,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for DrainService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        if request.uri().path().starts_with(HEALTH_PREFIX) {
            return Box::pin(self.inner.call(request));
        }
        if self.drain.draining() {
            let refused = Status::from(ShuttingDown);
            return Box::pin(async move { Ok(refused.into_http()) });
        }
        let guard = InFlight::new(&self.drain);
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await;
            drop(guard);
            response
        })
    }
}
