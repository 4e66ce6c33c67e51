//! HTTP/1.1 request heads under the body budget (docs/DESIGN.md §5.10): a [`HeadMeter`]
//! per connection counts the bytes of the request head being read against the per-source
//! and total budget of `crate::body_limit` (`--max-buffered-body-bytes[-per-source]`), up
//! to [`MAX_HEAD_BYTES`] — all hyper keeps of a head — and gives them back once the head
//! is whole (the request reached the service) or the connection closes. The next head of a
//! keep-alive connection is counted again from the moment the answer before it was sent.
//!
//! [`Metered`] is the connection's IO as the HTTP server reads it (after TLS: decrypted
//! bytes). While a head is read it hands hyper at most [`MAX_HEAD_BYTES`] of it — hyper's
//! own `max_buf_size` bounds its buffer only loosely (a read fills whatever capacity the
//! buffer has, which grows past it) — so hyper sees a head over the limit as 16 KiB that do
//! not end, answers 431 and closes; and a read that would pass the budget fails, which
//! closes the connection — a head cannot be answered before it is whole. An HTTP/2
//! connection (its first bytes the HTTP/2 preface) is not counted: its header blocks are
//! bounded by `SETTINGS_MAX_HEADER_LIST_SIZE` in h2 itself.

use crate::body_limit::{Budget, Source};
use crate::listener::MAX_HEAD_BYTES;
use std::io::{Error, ErrorKind, IoSlice, Result};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The HTTP/2 connection preface (RFC 9113 §3.4): a connection that starts with it is
/// HTTP/2.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the first bytes of a connection have shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// Fewer bytes than the preface, all of them the preface's so far.
    Unknown { seen: usize },
    /// Not the HTTP/2 preface: HTTP/1.1, whose heads are counted.
    Http1,
    /// The HTTP/2 preface: nothing is counted.
    Http2,
}

#[derive(Debug)]
struct State {
    protocol: Protocol,
    /// Whether the bytes read now belong to a request head.
    in_head: bool,
    /// The bytes of the current head taken from the budget.
    charged: usize,
}

/// One connection's request heads under the budget (see the module).
#[derive(Debug)]
pub struct HeadMeter {
    budget: Arc<Budget>,
    source: Option<Source>,
    state: Mutex<State>,
}

impl HeadMeter {
    /// A meter for a new connection from `source`, counting against `budget`.
    pub fn new(budget: Arc<Budget>, source: Option<Source>) -> Arc<HeadMeter> {
        Arc::new(HeadMeter {
            budget,
            source,
            state: Mutex::new(State {
                protocol: Protocol::Unknown { seen: 0 },
                in_head: true,
                charged: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the state cannot leave it half-changed: use it anyway.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `bytes` just read; an error when the budget cannot hold them.
    fn read(&self, bytes: &[u8]) -> Result<()> {
        let mut state = self.lock();
        if let Protocol::Unknown { seen } = state.protocol {
            let expected = &H2_PREFACE[seen..];
            let n = bytes.len().min(expected.len());
            state.protocol = if bytes[..n] != expected[..n] {
                Protocol::Http1
            } else if seen + n == H2_PREFACE.len() {
                Protocol::Http2
            } else {
                Protocol::Unknown { seen: seen + n }
            };
        }
        if state.protocol == Protocol::Http2 {
            self.give_back(&mut state);
            state.in_head = false;
            return Ok(());
        }
        if !state.in_head || bytes.is_empty() {
            return Ok(());
        }
        self.budget
            .take(self.source, bytes.len())
            .map_err(|refused| Error::new(ErrorKind::OutOfMemory, refused))?;
        state.charged += bytes.len();
        Ok(())
    }

    /// How many bytes the next read may take: `None` while no head is read (a body, or
    /// HTTP/2), else what is left of [`MAX_HEAD_BYTES`] for the current head.
    fn allowance(&self) -> Option<usize> {
        let state = self.lock();
        state
            .in_head
            .then(|| MAX_HEAD_BYTES.saturating_sub(state.charged))
    }

    /// The head is whole (its request reached the service): its bytes are given back, and
    /// what is read until the answer is sent is the body's.
    pub fn head_done(&self) {
        let mut state = self.lock();
        self.give_back(&mut state);
        state.in_head = false;
    }

    /// The answer was sent: on HTTP/1.1, what is read next is the next request's head.
    pub fn answer_sent(&self) {
        let mut state = self.lock();
        if state.protocol == Protocol::Http1 {
            state.in_head = true;
        }
    }

    /// Whether the connection is HTTP/1.1 (as far as its first bytes tell).
    pub fn is_http1(&self) -> bool {
        self.lock().protocol == Protocol::Http1
    }

    fn give_back(&self, state: &mut State) {
        self.budget.give_back(self.source, state.charged);
        state.charged = 0;
    }
}

impl Drop for HeadMeter {
    fn drop(&mut self) {
        let charged = self.lock().charged;
        self.budget.give_back(self.source, charged);
    }
}

/// A connection's IO whose reads are counted by its [`HeadMeter`].
pub struct Metered<IO> {
    io: IO,
    meter: Arc<HeadMeter>,
}

impl<IO> Metered<IO> {
    /// `io`, counted by `meter`.
    pub fn new(io: IO, meter: Arc<HeadMeter>) -> Metered<IO> {
        Metered { io, meter }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Metered<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match this.meter.allowance() {
            // 16 KiB of a head and no end: hyper has answered 431 by now; should it read on
            // (it consumed some of them), the head ends here, and so does the connection.
            Some(0) => return Poll::Ready(Ok(())),
            Some(left) if left < buf.remaining() => {
                let mut limited = ReadBuf::new(buf.initialize_unfilled_to(left));
                std::task::ready!(Pin::new(&mut this.io).poll_read(cx, &mut limited))?;
                let read = limited.filled().len();
                buf.advance(read);
            }
            _ => std::task::ready!(Pin::new(&mut this.io).poll_read(cx, buf))?,
        }
        Poll::Ready(this.meter.read(&buf.filled()[before..]))
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Metered<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Option<Source> {
        Some(Source::from(std::net::IpAddr::from([10, 0, 0, 1])))
    }

    #[test]
    fn an_http1_head_is_counted_up_to_the_head_limit_and_given_back_when_whole() {
        let budget = Arc::new(Budget::new(1 << 20, 1 << 20));
        let meter = HeadMeter::new(budget.clone(), source());
        meter
            .read(b"POST /claimd.v1.ClaimService/Claim HTTP/1.1\r\n")
            .unwrap();
        assert!(meter.is_http1());
        assert_eq!(meter.allowance(), Some(MAX_HEAD_BYTES - 45));
        meter.read(&[b'a'; MAX_HEAD_BYTES - 45]).unwrap();
        assert_eq!(budget.held(), (MAX_HEAD_BYTES, 1));
        assert_eq!(meter.allowance(), Some(0));
        meter.head_done();
        assert_eq!(budget.held(), (0, 0));
        // The body's bytes are not the head's; the next head is, once the answer is sent.
        assert_eq!(meter.allowance(), None);
        meter.read(&[b'{'; 100]).unwrap();
        assert_eq!(budget.held(), (0, 0));
        meter.answer_sent();
        meter.read(b"POST / HTTP/1.1\r\n").unwrap();
        assert_eq!(budget.held(), (17, 1));
        drop(meter);
        assert_eq!(budget.held(), (0, 0));
    }

    #[test]
    fn a_head_past_the_source_budget_fails_the_read() {
        let budget = Arc::new(Budget::new(1 << 20, 20 * 1024));
        let first = HeadMeter::new(budget.clone(), source());
        first.read(&[b'G'; 12 * 1024]).unwrap();
        let second = HeadMeter::new(budget.clone(), source());
        let refused = second.read(&[b'G'; 12 * 1024]).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::OutOfMemory);
        assert_eq!(budget.held(), (12 * 1024, 1));
    }

    #[test]
    fn an_http2_connection_is_not_counted_once_its_preface_is_in() {
        let budget = Arc::new(Budget::new(1 << 20, 1 << 20));
        let meter = HeadMeter::new(budget.clone(), source());
        meter.read(&H2_PREFACE[..10]).unwrap();
        assert_eq!(budget.held(), (10, 1));
        meter.read(&H2_PREFACE[10..]).unwrap();
        meter.read(&[0; 64 * 1024]).unwrap();
        assert_eq!(meter.allowance(), None);
        assert!(!meter.is_http1());
        assert_eq!(budget.held(), (0, 0));
    }
}
