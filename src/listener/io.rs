//! [`LimitedIo`]: an accepted TCP connection that holds its slots of the connection caps
//! until it is dropped, and fails every read and write — so the server closes it — once it
//! missed the first-bytes timeout or outlived its maximum age plus grace. Over TLS the first
//! bytes are the decrypted ones, which the TLS stream above reports
//! ([`LimitedIo::count_plaintext`], [`LimitedIo::note_plaintext`]).

use super::sources::{PerSource, SourceSlot};
use super::{PREFACE_LEN, Refused, proxy};
use crate::source::Source;
use std::io::{Error, ErrorKind, IoSlice, Result};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// How long a PROXY header may take when `--first-bytes-timeout` is off: every read has a
/// deadline.
pub const PROXY_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Which deadline a connection is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Fewer than [`PREFACE_LEN`] bytes read so far; the deadline is the first-bytes one.
    Preface,
    /// The preface is in; the deadline (if any) is the end of the grace after the age.
    Serving,
}

/// Which bytes count towards [`PREFACE_LEN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// The bytes read from the socket (plaintext HTTP).
    Socket,
    /// The decrypted bytes the TLS stream above reports; the handshake's do not count.
    Plaintext,
}

/// What an accepted connection holds until it closes: its slot of the listener's cap and
/// its slot of its source's (none for a trusted proxy until its PROXY header names one).
pub(super) struct Held {
    _slot: OwnedSemaphorePermit,
    _from_source: Option<SourceSlot>,
    source: Source,
}

impl Held {
    /// `slot` of the cap and `from_source` of `source`'s.
    pub(super) fn new(
        slot: OwnedSemaphorePermit,
        from_source: Option<SourceSlot>,
        source: Source,
    ) -> Held {
        Held {
            _slot: slot,
            _from_source: from_source,
            source,
        }
    }
}

/// An accepted connection under the listener's limits (see the module docs of
/// `crate::listener`).
pub struct LimitedIo {
    io: TcpStream,
    /// Set while a PROXY v2 header is still to be read: the caps its source will take.
    awaiting_proxy: Option<Arc<PerSource>>,
    /// The caller's address from the PROXY header, reported instead of the proxy's.
    proxied: Option<SocketAddr>,
    first_bytes_by: Option<Instant>,
    /// The SPIFFE ID of the client certificate, set after the TLS handshake.
    client_id: Option<crate::mesh::cert::CertIdentity>,
    phase: Phase,
    counting: Counting,
    read: usize,
    deadline: Option<Pin<Box<Sleep>>>,
    closes_at: Option<Instant>,
    held: Held,
}

impl LimitedIo {
    /// `io` holding `held`; closed at `first_bytes_by` unless it sent the preface by then,
    /// and at `closes_at` in any case.
    pub(super) fn new(
        io: TcpStream,
        held: Held,
        first_bytes_by: Option<Instant>,
        closes_at: Option<Instant>,
    ) -> LimitedIo {
        // The first-bytes deadline never outlasts the age's.
        let first = match (first_bytes_by, closes_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        LimitedIo {
            io,
            awaiting_proxy: None,
            proxied: None,
            first_bytes_by: first,
            client_id: None,
            phase: Phase::Preface,
            counting: Counting::Socket,
            read: 0,
            deadline: first.map(|at| Box::pin(tokio::time::sleep_until(at))),
            closes_at,
            held,
        }
    }

    /// Where the connection comes from.
    pub fn source(&self) -> Source {
        self.held.source
    }

    /// Records the SPIFFE ID of the client certificate the TLS handshake verified.
    pub fn set_client_id(&mut self, id: Option<String>) {
        self.client_id = id.map(crate::mesh::cert::CertIdentity);
    }

    /// Marks the connection as opening with a PROXY v2 header, read by
    /// [`LimitedIo::read_proxy_header`]; its source then takes a slot of `per_source`.
    pub(super) fn await_proxy_header(&mut self, per_source: Arc<PerSource>) {
        self.awaiting_proxy = Some(per_source);
    }

    /// Whether [`LimitedIo::read_proxy_header`] has a header to read.
    pub fn awaits_proxy_header(&self) -> bool {
        self.awaiting_proxy.is_some()
    }

    /// Reads the PROXY v2 header, if one is awaited, straight from the socket within the
    /// first-bytes timeout (or [`PROXY_HEADER_TIMEOUT`] when that is off): its address
    /// becomes the connection's source and takes a slot of that source's cap. An error
    /// closes the connection: `Some(Refused::PerSource)` when the source is at its cap.
    pub async fn read_proxy_header(&mut self) -> std::result::Result<(), Option<Refused>> {
        let Some(per_source) = self.awaiting_proxy.take() else {
            return Ok(());
        };
        let by = self
            .first_bytes_by
            .unwrap_or_else(|| Instant::now() + PROXY_HEADER_TIMEOUT);
        let header = match tokio::time::timeout_at(by, proxy::read_header(&mut self.io)).await {
            Ok(Ok(header)) => header,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "PROXY header refused; closing the connection");
                return Err(None);
            }
            Err(_) => {
                tracing::debug!("no PROXY header within the first-bytes timeout; closing");
                return Err(None);
            }
        };
        // LOCAL: the proxy's own connection (a health check); it stays its own source.
        let Some(caller) = header else { return Ok(()) };
        let source = Source::from(caller.ip());
        let slot = per_source
            .try_take(source)
            .ok_or(Some(Refused::PerSource))?;
        self.held._from_source = Some(slot);
        self.held.source = source;
        self.proxied = Some(caller);
        Ok(())
    }

    /// From now on only the bytes reported by [`LimitedIo::note_plaintext`] count towards
    /// the first bytes: called before a TLS handshake, so that neither a ClientHello nor a
    /// finished handshake followed by silence passes the first-bytes timeout.
    pub fn count_plaintext(&mut self) {
        self.counting = Counting::Plaintext;
    }

    /// Counts `n` decrypted bytes the TLS stream above read from this connection.
    pub fn note_plaintext(&mut self, n: usize) {
        if self.counting == Counting::Plaintext {
            self.note_read(n);
        }
    }

    /// An error once the current deadline has passed (registering for a wake-up at it
    /// otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<Error> {
        let deadline = self.deadline.as_mut()?;
        if deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        let why = match self.phase {
            Phase::Preface => "no HTTP preface within the first-bytes timeout",
            Phase::Serving => "the connection's maximum age and grace are over",
        };
        Some(Error::new(ErrorKind::TimedOut, why))
    }

    /// Counts `n` bytes read; once the preface is in, the deadline becomes the age's.
    fn note_read(&mut self, n: usize) {
        if self.phase == Phase::Serving {
            return;
        }
        self.read += n;
        if self.read >= PREFACE_LEN {
            self.phase = Phase::Serving;
            self.deadline = self
                .closes_at
                .map(|at| Box::pin(tokio::time::sleep_until(at)));
        }
    }
}

impl Connected for LimitedIo {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        let mut info = self.io.connect_info();
        if let Some(caller) = self.proxied {
            info.remote_addr = Some(caller);
        }
        info
    }
}

impl AsyncRead for LimitedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<Result<()>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && self.counting == Counting::Socket
        {
            let n = buf.filled().len() - before;
            self.note_read(n);
        }
        polled
    }
}

impl AsyncWrite for LimitedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<Result<usize>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl crate::mesh::cert::PeerIdentity for LimitedIo {
    fn peer_identity(&self) -> Option<crate::mesh::cert::CertIdentity> {
        self.client_id.clone()
    }
}
