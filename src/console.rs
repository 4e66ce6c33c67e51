//! The operator's console (docs/DESIGN.md §5.12): a server-rendered web page on its own
//! listener (`--console-listen`, off by default) showing a tenant's receipts by namespace
//! and state, orphans and dead letters, with Redrive, Quarantine and bulk Redrive.
//!
//! - this file: the listener — HTTP/1.1 (hyper), TLS when the gRPC listener has it, at most
//!   [`MAX_CONNECTIONS`] connections and [`MAX_PER_SOURCE`] per source (one beyond either is
//!   closed before anything is read), [`READ_TIMEOUT`] for a TLS handshake and for each
//!   request head (of at most [`MAX_HEAD_BYTES`]), a connection closed after
//!   [`MAX_CONNECTION_AGE`]. So filling every slot takes 32 sources, each slot costs at
//!   most a head buffer, and a slot held by a silent client is free again within 10 s;
//! - `session`: sign-in with an API key → an HttpOnly, SameSite=Strict session cookie and
//!   the session's CSRF token; sessions live in this process's memory, bounded per key,
//!   per tenant and in all, so that no sign-in ends another tenant's session;
//! - `routes`: the pages and forms, each checked for a session (and a POST for its CSRF
//!   token and same-origin headers) before its body is read;
//! - `actions`: what the forms do, logged with the key id: Redrive through the same
//!   `ClaimService` call (and so the same store path) a gRPC caller's would take; Quarantine
//!   of an orphan as one compare-and-set write on the receipt the page showed;
//! - `views`: the HTML (maud, which escapes every value: a key or an error is text, never
//!   markup), and the embedded stylesheet and script.

mod actions;
mod reads;
mod routes;
mod session;
mod views;

pub use session::{MAX_SESSIONS, SESSION_COOKIE, SESSIONS_PER_KEY, SESSIONS_PER_TENANT};

use crate::api::ClaimsApi;
use crate::auth::Authenticator;
use crate::listener::PerSource;
use crate::source::Source;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections the console serves at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections one source (an IPv4 address, an IPv6 /64) may hold at once.
pub const MAX_PER_SOURCE: usize = 8;
/// The most bytes of a request head the console buffers (beyond: 431).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long a connection is served before it is closed (a browser opens another).
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(120);
/// Time to send a request's head, and (`routes`) a form's body.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the console serves and for whom: built by `server` beside the gRPC service.
pub struct Console {
    api: ClaimsApi,
    auth: Arc<Authenticator>,
    sessions: session::Sessions,
    show_payloads: Vec<String>,
    tls: bool,
}

impl Console {
    /// A console over `api` (its store and activity), signing in through `auth`; payloads
    /// are shown for `show_payloads` (`*`: every namespace); `tls` marks cookies Secure.
    pub fn new(
        api: ClaimsApi,
        auth: Arc<Authenticator>,
        show_payloads: Vec<String>,
        tls: bool,
    ) -> Console {
        Console {
            api,
            auth,
            sessions: session::Sessions::default(),
            show_payloads,
            tls,
        }
    }

    fn shows_payloads(&self, namespace: &str) -> bool {
        self.show_payloads
            .iter()
            .any(|n| n == "*" || n == namespace)
    }
}

/// The page for a call that failed: its gRPC status as the HTTP status a browser knows,
/// with the status's message (which never holds a key, a token or a payload).
fn failure(status: tonic::Status, session: &session::Session) -> routes::Answer {
    views::message(console_status(&status), status.message(), Some(session))
}

/// A gRPC status (made by `api::error`'s one mapping) as the HTTP status a browser knows.
fn console_status(status: &tonic::Status) -> http::StatusCode {
    use http::StatusCode;
    use tonic::Code;
    match status.code() {
        Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::PermissionDenied | Code::Unauthenticated => StatusCode::FORBIDDEN,
        Code::FailedPrecondition | Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable | Code::DeadlineExceeded => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Serves `console` on `listener` until the task is aborted; over TLS with `tls`.
pub async fn serve(
    listener: TcpListener,
    console: Arc<Console>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let all = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let per_source = PerSource::new(MAX_PER_SOURCE);
    let tls = tls.map(|config| {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: try again shortly, never spin.
                tracing::warn!(error = %e, "console listener cannot accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Beyond either cap the connection is closed at once, before anything is read.
        let Ok(permit) = all.clone().try_acquire_owned() else {
            continue;
        };
        let Some(slot) = per_source.try_take(Source::from(peer.ip())) else {
            continue;
        };
        let (console, tls) = (console.clone(), tls.clone());
        tokio::spawn(async move {
            let _held = (permit, slot);
            let served = tokio::time::timeout(MAX_CONNECTION_AGE, async {
                match tls {
                    None => connection(stream, peer, console).await,
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout(READ_TIMEOUT, acceptor.accept(stream)).await;
                        if let Ok(Ok(stream)) = handshake {
                            connection(stream, peer, console).await;
                        }
                    }
                }
            });
            let _ = served.await;
        });
    }
}

/// One HTTP/1.1 connection's requests, in turn.
async fn connection<S>(stream: S, peer: SocketAddr, console: Arc<Console>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let console = console.clone();
        async move { Ok::<_, std::convert::Infallible>(routes::handle(&console, peer, request).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "console connection ended with an error");
    }
}
