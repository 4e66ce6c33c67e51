//! [`Linger`]: what happens to an HTTP/2 request body that nothing read — a call refused
//! from its headers (no valid key, a bad route). Dropping it at once resets its stream,
//! and a client still sending its body (Debian 12's curl 7.88 among them) then reports a
//! framing error instead of the answer the stream already carries. So, once the answer is
//! decided, such a body is read and thrown away for a moment: at most [`LINGER_BYTES`],
//! for at most [`LINGER_FOR`] (or the body deadline, if shorter), at most [`MAX_LINGERING`]
//! bodies at once. A body that declares more, or finds every slot taken, is dropped (its
//! stream reset) as before. Nothing of it is kept, and the answer never waits for it.

use bytes::Bytes;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tonic::body::Body;

/// The most of an unread body read and thrown away after its answer: a claim's JSON is a
/// few hundred bytes; a client sending more is reset.
pub const LINGER_BYTES: u64 = 64 * 1024;

/// How long an unread body may take to end after its answer.
pub const LINGER_FOR: Duration = Duration::from_secs(1);

/// How many unread bodies may linger at once; beyond, they are reset at once.
pub const MAX_LINGERING: usize = 1024;

/// The slots of lingering bodies (see the module), shared by a listener's calls.
#[derive(Debug, Clone)]
pub struct Linger {
    slots: Arc<Semaphore>,
    within: Duration,
}

impl Linger {
    /// Slots for [`MAX_LINGERING`] bodies, each lingering at most `LINGER_FOR` or
    /// `body_timeout`, whichever is shorter.
    pub fn new(body_timeout: Option<Duration>) -> Linger {
        Linger {
            slots: Arc::new(Semaphore::new(MAX_LINGERING)),
            within: body_timeout.map_or(LINGER_FOR, |t| t.min(LINGER_FOR)),
        }
    }

    /// Lets `body`, which nothing read, end on its own (see the module), or drops it.
    pub fn unread(&self, body: Body) {
        use hyper::body::Body as _;
        if body.is_end_stream() || body.size_hint().lower() > LINGER_BYTES {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return;
        };
        let within = self.within;
        runtime.spawn(async move {
            let _ = tokio::time::timeout(within, drain(body)).await;
            drop(slot);
        });
    }
}

/// Reads `body` to its end, keeping nothing, or stops past [`LINGER_BYTES`].
async fn drain(mut body: Body) {
    let mut seen = 0u64;
    while let Some(Ok(frame)) = body.frame().await {
        let data: Option<&Bytes> = frame.data_ref();
        seen = seen.saturating_add(data.map_or(0, |d| d.len() as u64));
        if seen > LINGER_BYTES {
            return;
        }
    }
}
