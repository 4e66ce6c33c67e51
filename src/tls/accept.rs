//! The main listener's TLS, done by claimd rather than by tonic: tonic's acceptor offers
//! only `h2` in ALPN, so a client that offers only `http/1.1` — curl with `--http1.1`, PHP's
//! Guzzle, Ruby's Net::HTTP on the Connect door — is refused with a
//! `no_application_protocol` alert. [`Accepting`] runs the handshakes (concurrently, each
//! within [`super::HANDSHAKE_TIMEOUT`]) on the connections the listener's [`Incoming`]
//! hands out and yields [`Conn`]s, offering `h2` first and `http/1.1`; plaintext
//! connections pass through it untouched.

use crate::listener::{Incoming, LimitedIo};
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
    handshakes: FuturesUnordered<Handshake>,
}

impl Accepting {
    /// `incoming`'s connections, each through a TLS handshake with `tls` if it is set.
    pub fn new(incoming: Incoming, tls: Option<Arc<rustls::ServerConfig>>) -> Accepting {
        Accepting {
            incoming,
            acceptor: tls.map(TlsAcceptor::from),
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
                Some(Ok(io)) => {
                    let accept = acceptor.accept(io);
                    this.handshakes.push(Box::pin(async move {
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
            Conn::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
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
