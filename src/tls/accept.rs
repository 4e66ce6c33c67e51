//! The main listener's TLS, done by claimd rather than by tonic: tonic's acceptor offers
//! only `h2` in ALPN, so a client that offers only `http/1.1` — curl with `--http1.1`, PHP's
//! Guzzle, Ruby's Net::HTTP on the Connect door — is refused with a
//! `no_application_protocol` alert. [`Accepting`] runs the handshakes (concurrently, each
//! within [`super::HANDSHAKE_TIMEOUT`]) on the connections the listener's [`Incoming`]
//! hands out and yields [`Conn`]s, offering `h2` first and `http/1.1`; plaintext
//! connections pass through it untouched.
//!
//! A handshake holds a slot of the listener's [`Handshakes`] (`--max-tls-handshakes`, and
//! `--max-tls-handshakes-per-source` of its source) until it is done: a connection beyond
//! either is closed before its handshake starts. From the handshake on, the first-bytes
//! timeout counts decrypted bytes only ([`LimitedIo::count_plaintext`]): a ClientHello does
//! not pass it, and neither does a handshake followed by silence.

use crate::listener::{Handshakes, Incoming, LimitedIo, Refusals};
use futures_util::stream::{FuturesUnordered, Stream, StreamExt};
use std::io::{IoSlice, Result};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// One served connection: as accepted, or after its TLS handshake.
pub enum Conn {
    /// A plaintext connection.
    Plain(LimitedIo),
    /// A TLS connection whose handshake is done.
    Tls(Box<TlsStream<LimitedIo>>),
}

type Handshake = Pin<Box<dyn Future<Output = Option<Conn>> + Send>>;

/// The connections of the main listener, through TLS when it is configured.
pub struct Accepting {
    incoming: Incoming,
    acceptor: Option<TlsAcceptor>,
    limits: Handshakes,
    refusals: Refusals,
    handshakes: FuturesUnordered<Handshake>,
}

impl Accepting {
    /// `incoming`'s connections, each through a TLS handshake with `tls` if it is set.
    pub fn new(incoming: Incoming, tls: Option<Arc<rustls::ServerConfig>>) -> Accepting {
        Accepting {
            limits: incoming.handshakes(),
            incoming,
            acceptor: tls.map(TlsAcceptor::from),
            refusals: Refusals::default(),
            handshakes: FuturesUnordered::new(),
        }
    }
}

impl Stream for Accepting {
    type Item = Result<Conn>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(acceptor) = &this.acceptor else {
            return this
                .incoming
                .poll_next_unpin(cx)
                .map(|next| next.map(|io| io.map(Conn::Plain)));
        };
        // Start a handshake for every connection accepted since the last poll.
        while let Poll::Ready(next) = this.incoming.poll_next_unpin(cx) {
            match next {
                Some(Ok(mut io)) => {
                    let slot = match this.limits.try_start(io.source()) {
                        Ok(slot) => slot,
                        Err(why) => {
                            // Dropping the connection closes it.
                            drop(io);
                            this.refusals.note(why);
                            continue;
                        }
                    };
                    io.count_plaintext();
                    let accept = acceptor.accept(io);
                    this.handshakes.push(Box::pin(async move {
                        // Held until the handshake is over, however it ends.
                        let _slot = slot;
                        match tokio::time::timeout(super::HANDSHAKE_TIMEOUT, accept).await {
                            Ok(Ok(tls)) => Some(Conn::Tls(Box::new(tls))),
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, "TLS handshake failed");
                                None
                            }
                            Err(_) => {
                                tracing::debug!("TLS handshake timed out");
                                None
                            }
                        }
                    }));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
        while let Poll::Ready(Some(done)) = this.handshakes.poll_next_unpin(cx) {
            if let Some(conn) = done {
                return Poll::Ready(Some(Ok(conn)));
            }
        }
        Poll::Pending
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Conn::Plain(io) => io.connect_info(),
            Conn::Tls(tls) => tls.get_ref().0.connect_info(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<Result<()>> {
        match self.get_mut() {
            Conn::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Conn::Tls(tls) => {
                let before = buf.filled().len();
                let polled = Pin::new(tls.as_mut()).poll_read(cx, buf);
                if let Poll::Ready(Ok(())) = polled {
                    let n = buf.filled().len() - before;
                    tls.get_mut().0.note_plaintext(n);
                }
                polled
            }
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize>> {
        match self.get_mut() {
            Conn::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Conn::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<Result<usize>> {
        match self.get_mut() {
            Conn::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Conn::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(io) => io.is_write_vectored(),
            Conn::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.get_mut() {
            Conn::Plain(io) => Pin::new(io).poll_flush(cx),
            Conn::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.get_mut() {
            Conn::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Conn::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
