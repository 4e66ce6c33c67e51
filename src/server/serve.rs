//! Serving a gRPC listener's connections (docs/DESIGN.md §5.10): each accepted connection
//! is served by hyper (HTTP/2, and HTTP/1.1 on the main listener) in a task of its own,
//! with the limits of [`ConnectionLimits`] set on hyper's builder (`ConnectionLimits::http`)
//! rather than through tonic's `Server`, which has no bound for HTTP/1.1 request heads.
//! Per connection: the calls served at once are limited (`--max-calls-per-connection`), the
//! peer's address is in every request's extensions (`TcpConnectInfo`, as tonic puts it;
//! from a trusted proxy, the caller its `X-Forwarded-For` names, `mesh::forwarded`),
//! HTTP/1.1 heads are counted against the body budget ([`super::heads`]), and at the
//! maximum age the connection is told to finish (GOAWAY; HTTP/1.1: no keep-alive).
//!
//! Shutdown is tonic's: [`serve`] stops accepting (the listening socket closes), tells
//! every connection to finish, and returns once all have closed. Dropping the future
//! closes every connection at once.

use super::heads::{HeadMeter, Metered};
use crate::body_limit::{Budget, Source};
use crate::listener::ConnectionLimits;
use crate::mesh::cert::{CertIdentity, PeerIdentity};
use crate::mesh::{TrustedProxies, forwarded};
use futures_util::{Stream, StreamExt};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::body::Body;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// What [`serve`] serves a listener's connections with.
#[derive(Clone)]
pub struct Serving<S> {
    /// The service every request goes to (the layers and the routes).
    pub service: S,
    /// The listener's limits.
    pub limits: ConnectionLimits,
    /// Whether HTTP/1.1 is served besides HTTP/2 (the main listener: Connect, gRPC-Web).
    pub http1: bool,
    /// The body budget, which HTTP/1.1 request heads are counted against too.
    pub budget: Arc<Budget>,
}

/// Serves the connections of `incoming` with `serving` until `shutdown` completes, then
/// stops accepting and waits for every connection to finish (see the module).
pub async fn serve<I, IO, S>(incoming: I, serving: Serving<S>, shutdown: impl Future<Output = ()>)
where
    I: Stream<Item = std::io::Result<IO>>,
    IO: AsyncRead
        + AsyncWrite
        + Connected<ConnectInfo = TcpConnectInfo>
        + PeerIdentity
        + Unpin
        + Send
        + 'static,
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let builder = serving.limits.http(serving.http1);
    let (stop, stopped) = watch::channel(());
    let mut connections = JoinSet::new();
    let mut incoming = Box::pin(incoming);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            next = incoming.next() => match next {
                Some(Ok(io)) => {
                    let one = connection(io, &serving, builder.clone(), stopped.clone());
                    connections.spawn(one);
                }
                // The stream backs off after an error itself (`Incoming`).
                Some(Err(e)) => tracing::debug!(error = %e, "accept failed"),
                None => break,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    // The listening socket closes now: new callers are refused by the kernel, not left
    // waiting in its backlog.
    drop(incoming);
    let _ = stop.send(());
    while connections.join_next().await.is_some() {}
}

/// One connection, served until it closes (see the module).
fn connection<IO, S>(
    io: IO,
    serving: &Serving<S>,
    builder: auto::Builder<TokioExecutor>,
    mut stopped: watch::Receiver<()>,
) -> impl Future<Output = ()> + Send + 'static + use<IO, S>
where
    IO: AsyncRead
        + AsyncWrite
        + Connected<ConnectInfo = TcpConnectInfo>
        + PeerIdentity
        + Unpin
        + Send
        + 'static,
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let info = io.connect_info();
    let client_id = io.peer_identity();
    let source = info.remote_addr().map(|a| Source::from(a.ip()));
    let meter = HeadMeter::new(serving.budget.clone(), source);
    let io = TokioIo::new(Metered::new(io, meter.clone()));
    // A trusted proxy's requests name their caller in X-Forwarded-For.
    let trusted = info
        .remote_addr()
        .filter(|peer| serving.limits.trusted_proxies.contains(peer.ip()))
        .map(|proxy| (proxy, serving.limits.trusted_proxies.clone()));
    let per_connection = PerConnection {
        inner: serving.service.clone(),
        info,
        meter,
        trusted,
        client_id,
    };
    let limited = tower::limit::ConcurrencyLimit::new(
        per_connection,
        serving.limits.max_calls_per_connection,
    );
    let service = TowerToHyperService::new(limited);
    let age = serving.limits.max_connection_age;
    async move {
        let conn = builder.serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let mut aged = std::pin::pin!(until(age));
        let mut told = false;
        loop {
            tokio::select! {
                served = &mut conn => {
                    if let Err(e) = served {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = &mut aged, if !told => {
                    conn.as_mut().graceful_shutdown();
                    told = true;
                }
                _ = stopped.changed(), if !told => {
                    conn.as_mut().graceful_shutdown();
                    told = true;
                }
            }
        }
    }
}

/// Completes after `age`; never without one.
async fn until(age: Option<Duration>) {
    match age {
        Some(age) => tokio::time::sleep(age).await,
        None => std::future::pending().await,
    }
}

/// The service of one connection: the listener's, with the peer's address in every
/// request and the connection's HTTP/1.1 heads metered.
#[derive(Clone)]
struct PerConnection<S> {
    inner: S,
    info: TcpConnectInfo,
    meter: Arc<HeadMeter>,
    /// The peer and the trusted proxies, when the peer is one of them.
    trusted: Option<(std::net::SocketAddr, TrustedProxies)>,
    /// The SPIFFE ID of the client's certificate (mTLS).
    client_id: Option<CertIdentity>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> tower::Service<Request<Incoming>> for PerConnection<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        // A request is only handed over once its head is whole.
        self.meter.head_done();
        let mut info = self.info.clone();
        if let Some((proxy, trusted)) = &self.trusted {
            // The per-call limits count the caller the proxy names, not the proxy.
            let caller = forwarded::caller(request.headers(), proxy.ip(), trusted);
            info.remote_addr = Some(std::net::SocketAddr::new(caller, 0));
            let via = forwarded::ViaTrustedProxy { proxy: *proxy };
            request.extensions_mut().insert(via);
        }
        request.extensions_mut().insert(info);
        if let Some(id) = &self.client_id {
            request.extensions_mut().insert(id.clone());
        }
        let answered = self.inner.call(request.map(Body::new));
        let meter = self.meter.is_http1().then(|| self.meter.clone());
        Box::pin(async move {
            let response = answered.await?;
            Ok(match meter {
                Some(meter) => response.map(|body| Body::new(Answer { body, meter })),
                None => response,
            })
        })
    }
}

/// An HTTP/1.1 answer's body: once it is sent (or dropped), the connection's next bytes
/// are the next request's head.
struct Answer {
    body: Body,
    meter: Arc<HeadMeter>,
}

impl hyper::body::Body for Answer {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, tonic::Status>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.meter.answer_sent();
    }
}
