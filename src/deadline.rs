//! Client deadlines: a call whose `grpc-timeout` runs out is answered DEADLINE_EXCEEDED and
//! its work is dropped. The deadline is also known to the store while the call runs
//! ([`remaining`], and [`due`] for the group commit's lanes): a queued call past it is
//! dropped, and a write checks the time once its row is had (PostgreSQL inside the batch
//! statement, after its last lock wait; SQLite under the write lock), so a call answered
//! DEADLINE_EXCEEDED has written
//! nothing — except when its commit and the deadline cross, the commit done and its
//! answer lost on the way, which no server can rule out (docs/DESIGN.md §5.9). PostgreSQL
//! also cancels any statement that runs past `--db-timeout` (`statement_timeout`).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Status;

/// Answer this much before the deadline, so the answer is ours (DEADLINE_EXCEEDED) and not
/// the transport's timer (which tonic reports as CANCELLED).
const MARGIN: Duration = Duration::from_millis(5);

/// The answer to a call whose deadline passed (DEADLINE_EXCEEDED, in `api/error.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the call's deadline passed before claimd could answer; its unfinished work was rolled \
     back, unless it had just committed as the deadline passed (then only the answer was \
     lost: Get the receipt to know)"
)]
pub struct DeadlinePassed;

tokio::task_local! {
    /// When the current call's answer is due (the deadline less [`MARGIN`]).
    static DUE: Instant;
}

/// How long the current call may still take before its answer is due, if the caller set a
/// deadline; zero once it has passed. `None` outside a call with a deadline.
pub fn remaining() -> Option<Duration> {
    DUE.try_with(|due| due.saturating_duration_since(Instant::now()))
        .ok()
}

/// When the current call's answer is due, if the caller set a deadline: for work done on
/// the call's behalf in another task (the store's group commit), where [`remaining`] does
/// not reach.
pub fn due() -> Option<Instant> {
    DUE.try_with(|due| *due).ok()
}

/// The tower layer that enforces the caller's deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeadlineLayer;

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> DeadlineService<S> {
        DeadlineService { inner }
    }
}

/// See [`DeadlineLayer`].
#[derive(Debug, Clone)]
pub struct DeadlineService<S> {
    inner: S,
}

/// The most digits a `grpc-timeout` value has (the gRPC over HTTP/2 spec: "at most 8").
const MAX_DIGITS: usize = 8;

/// The longest deadline claimd arms: past it a call is as good as without one, and an
/// `Instant` that far ahead cannot overflow.
const LONGEST: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Parses `grpc-timeout` (`<digits><unit>`, at most 8 ASCII digits, units H M S m u n).
/// Anything else is no timeout, as tonic's own parser treats it.
pub fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > MAX_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b"H" => Duration::from_secs(n.saturating_mul(3600)),
        b"M" => Duration::from_secs(n.saturating_mul(60)),
        b"S" => Duration::from_secs(n),
        b"m" => Duration::from_millis(n),
        b"u" => Duration::from_micros(n),
        b"n" => Duration::from_nanos(n),
        _ => return None,
    })
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for DeadlineService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let timeout = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| grpc_timeout(v.as_bytes()));
        let call = self.inner.call(request);
        let Some(timeout) = timeout else {
            return Box::pin(call);
        };
        let due = Instant::now() + timeout.saturating_sub(MARGIN).min(LONGEST);
        Box::pin(async move {
            match tokio::time::timeout_at(due, DUE.scope(due, call)).await {
                Ok(response) => response,
                Err(_) => Ok(Status::from(DeadlinePassed).into_http()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_values_parse_per_the_spec() {
        assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(grpc_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(grpc_timeout(b"10u"), Some(Duration::from_micros(10)));
        assert_eq!(
            grpc_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in [&b""[..], b"m", b"12", b"1x", b"-1S", b"+1S", b"123456789m"] {
            assert_eq!(grpc_timeout(bad), None);
        }
        assert_eq!(
            grpc_timeout(b"9300000000000000000S"),
            None,
            "more than 8 digits"
        );
    }
}
