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

use crate::listener::{Handshakes, Incoming, LimitedIo, Refusals, Refused};
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
// One per connection: boxing the plaintext one would cost an allocation each for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Conn {
    /// A plaintext connection.
    Plain(LimitedIo),
    /// A TLS connection whose handshake is done.
    Tls(Box<TlsStream<LimitedIo>>),
}

type Handshake = Pin<Box<dyn Future<Output = std::result::Result<Conn, Option<Refused>>> + Send>>;

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
        // Finished PROXY headers and handshakes first, so a flood of new connections cannot
        // hold them back.
        while let Poll::Ready(Some(done)) = this.handshakes.poll_next_unpin(cx) {
            match done {
                Ok(conn) => return Poll::Ready(Some(Ok(conn))),
                Err(Some(why)) => this.refusals.note(why),
                Err(None) => {}
            }
        }
        // Start the PROXY header read and the handshake of every connection accepted since.
        while let Poll::Ready(next) = this.incoming.poll_next_unpin(cx) {
            match next {
                Some(Ok(io)) if this.acceptor.is_none() && !io.awaits_proxy_header() => {
                    return Poll::Ready(Some(Ok(Conn::Plain(io))));
                }
                Some(Ok(io)) => {
                    let opening = open(io, this.acceptor.clone(), this.limits.clone());
                    this.handshakes.push(Box::pin(opening));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => return Poll::Ready(None),
            }
        }
        // The ones just started are polled once, so that each registers for its wake-up.
        while let Poll::Ready(Some(done)) = this.handshakes.poll_next_unpin(cx) {
            match done {
                Ok(conn) => return Poll::Ready(Some(Ok(conn))),
                Err(Some(why)) => this.refusals.note(why),
                Err(None) => {}
            }
        }
        Poll::Pending
    }
}

/// Opens `io`: its PROXY header if one is awaited (`listener::proxy`), then its TLS
/// handshake if `acceptor` is set, holding a slot of `limits` (taken for the source the
/// header named) while the handshake runs. `Err(Some(_))`: closed by a limit.
async fn open(
    mut io: LimitedIo,
    acceptor: Option<TlsAcceptor>,
    limits: Handshakes,
) -> std::result::Result<Conn, Option<Refused>> {
    io.read_proxy_header().await?;
    let Some(acceptor) = acceptor else {
        return Ok(Conn::Plain(io));
    };
    // Held until the handshake is over, however it ends.
    let _slot = limits.try_start(io.source()).map_err(Some)?;
    io.count_plaintext();
    match tokio::time::timeout(super::HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
        Ok(Ok(mut tls)) => {
            let cert = tls.get_ref().1.peer_certificates().and_then(|c| c.first());
            let id = cert.and_then(|der| crate::mesh::cert::spiffe_id(der));
            tls.get_mut().0.set_client_id(id);
            Ok(Conn::Tls(Box::new(tls)))
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            Err(None)
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            Err(None)
        }
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

impl crate::mesh::cert::PeerIdentity for Conn {
    fn peer_identity(&self) -> Option<crate::mesh::cert::CertIdentity> {
        match self {
            Conn::Plain(io) => io.peer_identity(),
            Conn::Tls(tls) => tls.get_ref().0.peer_identity(),
        }
    }
}
