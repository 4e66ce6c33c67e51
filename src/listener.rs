//! What a connection may cost (docs/DESIGN.md §2.8, §5.2, §5.10): the limits of the gRPC
//! listeners ([`ConnectionLimits`], from the `--max-connections`, `--first-bytes-timeout`,
//! `--keepalive-*`, `--max-connection-age*`, `--max-concurrent-streams` and
//! `--max-calls-per-connection` flags) and where each is enforced.
//!
//! hyper does the HTTP part, set up by [`ConnectionLimits::http`] and served by
//! `server::serve`:
//! PINGs every keepalive interval (a peer that does not answer within the keepalive timeout
//! is closed), `SETTINGS_MAX_CONCURRENT_STREAMS`, a per-connection limit on calls being
//! served (the rest wait in order), a GOAWAY at the maximum connection age, and HTTP/1.1
//! request heads of at most [`MAX_HEAD_BYTES`] within the first-bytes timeout (counted
//! against the body budget while they are read: `server::heads`). What hyper lacks is done on
//! the accepted-connection stream ([`Incoming`]) and its IO ([`LimitedIo`]):
//!
//! - **a connection cap, in all and per source**: every connection holds a semaphore permit
//!   and a slot of its [`Source`] (an IPv4 address or an IPv6 /64, `crate::source`) until it
//!   closes; one accepted beyond either is closed at once (the client sees the connection
//!   end and retries, instead of hanging in the kernel's backlog), so one source cannot take
//!   every slot;
//! - **TLS handshakes in progress, in all and per source** ([`Handshakes`], used by
//!   `tls::accept`): a connection beyond either is closed before its handshake starts, so
//!   stalled handshakes cannot take every slot either;
//! - **a first-bytes timeout**: a connection that has not sent [`PREFACE_LEN`] bytes — the
//!   24-byte HTTP/2 preface and the header of the SETTINGS frame that must follow it —
//!   within the timeout is closed, so neither an idle socket nor one that sent only the
//!   preface holds a slot. Over TLS the bytes are counted after decryption
//!   ([`LimitedIo::count_plaintext`]): the handshake and the first HTTP bytes after it must
//!   both come within the timeout;
//! - **the end of the grace after the maximum age**: hyper is told to finish at the age
//!   (GOAWAY); claimd closes the connection itself once the grace is over too.
//!
//! Binding at start is [`bind`], whose [`BindError`] names the address and the flag.
//!
//! Every connection closed by a limit is counted in `claimd_connections_refused_total` by
//! the limit's name ([`Refused`]).

mod bind;
mod io;
pub mod proxy;
mod refused;
mod sources;

pub use bind::{BindError, bind};
pub use io::LimitedIo;
pub use refused::{CONNECTIONS_REFUSED, Refusals, Refused};
pub use sources::{HandshakeSlot, Handshakes, PerSource, SourceSlot};

use crate::source::Source;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use std::io::Result;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;

/// Bytes a connection must send within the first-bytes timeout: the HTTP/2 connection
/// preface (24 bytes) and the 9-byte header of the client's first SETTINGS frame
/// (RFC 9113 §3.4). A real client sends them at once.
pub const PREFACE_LEN: usize = 24 + 9;

/// How long the accept loop pauses after an accept error (e.g. out of file descriptors),
/// so that it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// `builder` with the HTTP/2 limits that have no flag, each set explicitly (docs/DESIGN.md
/// §5.10): the header list and frame size a peer may send, and how many reset streams a
/// connection may cause before it is told GOAWAY (ENHANCE_YOUR_CALM) and closed. Setting the
/// local-error one matters: left unset (as tonic 0.14 left it) hyper's bound of 1024 is off
/// (RUSTSEC-2024-0003, "MadeYouReset").
fn bounded_http2(builder: &mut auto::Builder<TokioExecutor>) {
    builder
        .http2()
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESET_STREAMS);
}

/// The most an HTTP/1.1 request head may take (the request line and every header line):
/// the same 16 KiB as HTTP/2's header list. A longer one is answered 431 and closed.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// `SETTINGS_MAX_HEADER_LIST_SIZE`: a request's headers (names, values and 32 bytes each,
/// uncompressed) may take 16 KiB; a gRPC call sends well under 1 KiB, an API key included.
/// A request over it is answered HTTP 431 on its stream; a header block that goes on far
/// past it is not buffered: the connection gets GOAWAY (ENHANCE_YOUR_CALM).
pub const MAX_HEADER_LIST_BYTES: u32 = 16 * 1024;
/// `SETTINGS_MAX_FRAME_SIZE`: the protocol's minimum (and default), 16 KiB. A frame
/// declaring more is a connection error (FRAME_SIZE_ERROR): GOAWAY and close.
pub const MAX_FRAME_BYTES: u32 = 16 * 1024;
/// Streams the peer opened and reset before claimd accepted them (a rapid-reset flood,
/// CVE-2023-44487); one more and the connection gets GOAWAY. The h2 crate's default.
pub const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
/// Streams claimd itself reset because the peer broke the protocol on them (a window
/// overflow, a refused stream beyond the limit, …); one more and the connection gets
/// GOAWAY. hyper's default, which tonic 0.14 would otherwise turn off.
pub const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

/// The connection limits of a gRPC listener. A `None` duration turns that limit off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Most connections open at once from one source (an IPv4 address, an IPv6 /64).
    pub max_connections_per_source: usize,
    /// Most TLS handshakes in progress at once (TLS listeners only).
    pub max_tls_handshakes: usize,
    /// Most TLS handshakes in progress at once from one source.
    pub max_tls_handshakes_per_source: usize,
    /// A connection that has not sent [`PREFACE_LEN`] bytes (over TLS: of HTTP, after the
    /// handshake) by then is closed.
    pub first_bytes_timeout: Option<Duration>,
    /// How often an HTTP/2 PING is sent on a connection.
    pub keepalive_interval: Option<Duration>,
    /// How long a PING may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// When a connection is told GOAWAY (calls in flight go on, new ones go elsewhere).
    pub max_connection_age: Option<Duration>,
    /// How long after the GOAWAY calls in flight may still run before the connection is
    /// closed.
    pub max_connection_age_grace: Duration,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`: calls a client may have open on one connection.
    pub max_concurrent_streams: u32,
    /// Calls served at once per connection; later ones wait in order.
    pub max_calls_per_connection: usize,
    /// Peers (`[mesh]` `trusted_proxies`) whose connections count against the total but
    /// not a per-source cap: they carry many callers (issue 48).
    pub trusted_proxies: crate::mesh::TrustedProxies,
    /// Whether a trusted peer's connection opens with a PROXY v2 header, whose address is
    /// then its source ([`proxy`]).
    pub proxy_protocol: bool,
}

impl ConnectionLimits {
    /// hyper's builder with these limits (served by `server::serve`): HTTP/2 as tonic 0.14
    /// set it up (a timer, the stream limit, keepalive, no adaptive window) plus the
    /// constants of `bounded_http2`; with `http1`, HTTP/1.1 heads of at most
    /// [`MAX_HEAD_BYTES`] in hyper's buffer (a longer one is answered 431 and closed; the
    /// bound is made exact by `server::heads`), each within the first-bytes timeout of the
    /// moment hyper starts reading it — the connection's start, or the end of the answer
    /// before it, so an idle keep-alive connection is closed then too. Without `http1`
    /// only HTTP/2 is served.
    pub fn http(&self, http1: bool) -> auto::Builder<TokioExecutor> {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.max_concurrent_streams)
            .keep_alive_interval(self.keepalive_interval)
            .keep_alive_timeout(self.keepalive_timeout)
            .adaptive_window(false);
        bounded_http2(&mut builder);
        if !http1 {
            return builder.http2_only();
        }
        builder
            .http1()
            .timer(TokioTimer::new())
            .max_buf_size(MAX_HEAD_BYTES)
            .header_read_timeout(self.first_bytes_timeout);
        builder
    }

    /// The connections `listener` accepts, each holding a slot of the cap and of its
    /// source's until it closes, and closed by the first-bytes timeout and at age + grace.
    pub fn incoming(&self, listener: TcpListener) -> Incoming {
        Incoming {
            listener,
            slots: Arc::new(Semaphore::new(self.max_connections)),
            per_source: PerSource::new(self.max_connections_per_source),
            handshakes: Handshakes::new(
                self.max_tls_handshakes,
                self.max_tls_handshakes_per_source,
            ),
            limits: self.clone(),
            backoff: None,
            refusals: Refusals::default(),
        }
    }

    /// When a connection accepted at `accepted` is closed whatever it is doing: at the
    /// maximum age plus the grace.
    fn closes_at(&self, accepted: Instant) -> Option<Instant> {
        let age = self.max_connection_age?;
        Some(accepted + age + self.max_connection_age_grace)
    }
}

/// The accepted connections of one listener, under its [`ConnectionLimits`]; served by
/// `server::serve`.
pub struct Incoming {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    per_source: Arc<PerSource>,
    handshakes: Handshakes,
    limits: ConnectionLimits,
    backoff: Option<Pin<Box<Sleep>>>,
    refusals: Refusals,
}

impl Incoming {
    /// The limits on this listener's TLS handshakes in progress (`tls::accept`).
    pub fn handshakes(&self) -> Handshakes {
        self.handshakes.clone()
    }
}

impl Stream for Incoming {
    type Item = Result<LimitedIo>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(backoff) = &mut this.backoff {
            std::task::ready!(backoff.as_mut().poll(cx));
            this.backoff = None;
        }
        loop {
            let (stream, peer) = match std::task::ready!(this.listener.poll_accept(cx)) {
                Ok(accepted) => accepted,
                Err(e) => {
                    this.backoff = Some(Box::pin(tokio::time::sleep(ACCEPT_BACKOFF)));
                    return Poll::Ready(Some(Err(e)));
                }
            };
            let source = Source::from(peer.ip());
            // A trusted proxy carries many callers: it is held to the total only. Its PROXY
            // header, if it sends one, names the source whose cap the connection then takes.
            let trusted = this.limits.trusted_proxies.contains(peer.ip());
            let per_source = if trusted {
                Some(None)
            } else {
                this.per_source.try_take(source).map(Some)
            };
            // A source over its own cap is refused by it, whether or not the listener is full.
            let held = match per_source {
                None => Err(Refused::PerSource),
                Some(from_source) => match this.slots.clone().try_acquire_owned() {
                    Ok(slot) => Ok((slot, from_source)),
                    Err(_) => Err(Refused::MaxConnections),
                },
            };
            let (slot, from_source) = match held {
                Ok(held) => held,
                Err(why) => {
                    // Dropping the stream closes it.
                    drop(stream);
                    this.refusals.note(why);
                    continue;
                }
            };
            // gRPC answers are small frames written as they are ready: without this, Nagle's
            // algorithm holds one back until the client's delayed ACK (tens of ms).
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            let accepted = Instant::now();
            let first_bytes_by = this.limits.first_bytes_timeout.map(|t| accepted + t);
            let closes_at = this.limits.closes_at(accepted);
            let mut io = LimitedIo::new(
                stream,
                io::Held::new(slot, from_source, source),
                first_bytes_by,
                closes_at,
            );
            if trusted && this.limits.proxy_protocol {
                io.await_proxy_header(this.per_source.clone());
            }
            return Poll::Ready(Some(Ok(io)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 2,
            max_connections_per_source: 1,
            max_tls_handshakes: 2,
            max_tls_handshakes_per_source: 1,
            first_bytes_timeout: Some(Duration::from_secs(1)),
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(1),
            max_connection_age: None,
            max_connection_age_grace: Duration::from_secs(3),
            max_concurrent_streams: 1,
            max_calls_per_connection: 1,
            trusted_proxies: Default::default(),
            proxy_protocol: false,
        }
    }

    #[test]
    fn a_connection_is_closed_at_age_plus_grace_only_with_an_age() {
        let now = Instant::now();
        assert_eq!(limits().closes_at(now), None);
        let aged = ConnectionLimits {
            max_connection_age: Some(Duration::from_secs(5)),
            ..limits()
        };
        assert_eq!(aged.closes_at(now), Some(now + Duration::from_secs(8)));
    }
}
