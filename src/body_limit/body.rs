//! [`LimitedBody`]: a request body that is read only when a service asks for it (after
//! authentication), fails once its deadline passes (for a client stream: once it has sent
//! nothing for that long), and takes what it holds from the [`Budget`] as its bytes
//! arrive, giving it back when it is dropped. Dropped unread over HTTP/2, it lingers
//! ([`Linger`]).

use super::budget::{Budget, Source};
use super::linger::Linger;
use super::{BodyRefused, KEPT_PER_BODY};
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;
use tonic::Status;
use tonic::body::Body;

/// A request body under the body limits (see the module).
pub struct LimitedBody {
    inner: Body,
    budget: Arc<Budget>,
    source: Option<Source>,
    timeout: Option<Duration>,
    stream: bool,
    deadline: Option<Pin<Box<Sleep>>>,
    seen: usize,
    held: usize,
    failed: bool,
    polled: bool,
    linger: Option<Linger>,
}

impl LimitedBody {
    /// `inner` from `source`, to be read within `timeout` of its first read — or, for a
    /// client `stream` (messages sent over the call's life), within `timeout` of the bytes
    /// before. An HTTP/2 body is given a `linger` for when nothing reads it.
    pub fn new(
        inner: Body,
        budget: Arc<Budget>,
        source: Option<Source>,
        timeout: Option<Duration>,
        stream: bool,
        linger: Option<Linger>,
    ) -> LimitedBody {
        LimitedBody {
            inner,
            budget,
            source,
            timeout,
            stream,
            deadline: None,
            seen: 0,
            held: 0,
            failed: false,
            polled: false,
            linger,
        }
    }

    /// Counts `n` more bytes read; takes from the budget what this body may keep of them.
    fn account(&mut self, n: usize) -> Result<(), BodyRefused> {
        self.seen = self.seen.saturating_add(n);
        let kept = self.seen.min(KEPT_PER_BODY);
        if kept > self.held {
            self.budget.take(self.source, kept - self.held)?;
            self.held = kept;
        }
        Ok(())
    }

    fn fail(&mut self, refused: BodyRefused) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.failed = true;
        Poll::Ready(Some(Err(Status::from(refused))))
    }
}

impl hyper::body::Body for LimitedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        this.polled = true;
        if this.failed {
            return Poll::Ready(None);
        }
        if this.deadline.is_none()
            && let Some(timeout) = this.timeout
        {
            this.deadline = Some(Box::pin(tokio::time::sleep(timeout)));
        }
        if let Some(deadline) = &mut this.deadline
            && deadline.as_mut().poll(cx).is_ready()
        {
            let timeout = this.timeout.unwrap_or_default();
            return this.fail(BodyRefused::TooSlow { timeout });
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            if let Err(refused) = this.account(data.len()) {
                return this.fail(refused);
            }
            if this.stream
                && let (Some(deadline), Some(timeout)) = (&mut this.deadline, this.timeout)
            {
                deadline
                    .as_mut()
                    .reset(tokio::time::Instant::now() + timeout);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LimitedBody {
    fn drop(&mut self) {
        self.budget.give_back(self.source, self.held);
        if let Some(linger) = self.linger.take()
            && !self.polled
        {
            linger.unread(std::mem::replace(&mut self.inner, Body::empty()));
        }
    }
}
