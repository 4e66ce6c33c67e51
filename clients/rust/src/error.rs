//! What a call of this crate fails with: a refusal by a tenant quota, told apart from every
//! other gRPC status so a caller can back off for the delay claimd gave; a call the
//! connection never carried to claimd (its GOAWAY, a connection closed first) is
//! UNAVAILABLE, not tonic's INTERNAL or CANCELLED.

use std::fmt;
use std::time::Duration;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// A failed call of [`Claims`](crate::Claims) or [`Guard`](crate::Guard).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// claimd refused the call because the tenant is over one of its quotas
    /// (`RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo` and a `google.rpc.QuotaFailure`,
    /// docs/DESIGN.md §5.15): nothing was written and no attempt was spent.
    Quota {
        /// The quota's key, the QuotaFailure's violation subject: `claims_per_second`,
        /// `writes_per_second` or `max_waiting`.
        quota: String,
        /// The RetryInfo's delay: when claimd expects the call to be taken.
        retry_after: Duration,
        /// The status as claimd sent it (its message states the limit).
        status: Status,
    },
    /// Any other failure, as gRPC answered it — a `RESOURCE_EXHAUSTED` without a quota's
    /// details (a message over a size limit) among them.
    Status(Status),
}

impl Error {
    /// The gRPC status claimd (or the channel) answered.
    pub fn status(&self) -> &Status {
        match self {
            Error::Quota { status, .. } | Error::Status(status) => status,
        }
    }

    /// The status's code.
    pub fn code(&self) -> Code {
        self.status().code()
    }

    /// The delay claimd asked for before the call is tried again, when it refused it by a
    /// quota.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Quota { retry_after, .. } => Some(*retry_after),
            Error::Status(_) => None,
        }
    }
}

impl From<Status> for Error {
    /// A quota refusal when `status` is `RESOURCE_EXHAUSTED` with both a RetryInfo delay
    /// and a QuotaFailure violation; [`Error::Status`] otherwise.
    fn from(status: Status) -> Error {
        match never_taken(&status) {
            Some(NeverTaken::GoAway) => return Error::Status(Status::unavailable(GONE_AWAY)),
            Some(NeverTaken::Unsent) => return Error::Status(Status::unavailable(UNSENT)),
            None => {}
        }
        if status.code() != Code::ResourceExhausted {
            return Error::Status(status);
        }
        let quota = status
            .get_details_quota_failure()
            .and_then(|failure| failure.violations.into_iter().next())
            .map(|violation| violation.subject)
            .filter(|subject| !subject.is_empty());
        let retry_after = status
            .get_details_retry_info()
            .and_then(|info| info.retry_delay);
        match (quota, retry_after) {
            (Some(quota), Some(retry_after)) => Error::Quota {
                quota,
                retry_after,
                status,
            },
            _ => Error::Status(status),
        }
    }
}

/// The message of a call claimd's GOAWAY kept from it ([`NeverTaken::GoAway`]).
pub(crate) const GONE_AWAY: &str = "claimd closed the connection (a graceful GOAWAY: a \
     restart, or the connection's maximum age) before it took this call: nothing was done; \
     call again";

/// The message of a call queued on a connection that closed before it was sent
/// ([`NeverTaken::Unsent`]).
pub(crate) const UNSENT: &str = "the connection to claimd closed before this call was sent \
     on it: nothing was done; call again";

/// Why claimd never took a call the channel failed ([`never_taken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeverTaken {
    /// claimd had sent a graceful GOAWAY (NO_ERROR): the call was started on the connection
    /// in the instant before the channel opened a new one, and failed in the client's
    /// HTTP/2 layer, unsent or past the last stream the GOAWAY says claimd took. tonic calls
    /// it INTERNAL (UNKNOWN without its `server` feature).
    GoAway,
    /// The call was queued on a connection that closed before it was written (hyper's
    /// "canceled", which tonic calls CANCELLED as if the caller had given up).
    Unsent,
}

/// Whether `status` is tonic's for a call the connection never carried to claimd, not an
/// answer of claimd's. The gRPC protocol has clients treat such a stream as UNAVAILABLE
/// (PROTOCOL-HTTP2.md, "GOAWAY Frame"), as grpc-go and grpc-java do, and so does this
/// crate. Only a status tonic built from the client's own error carries that error as its
/// source; one claimd sent never does. Public for calls made with the [`pb`](crate::pb)
/// client directly.
pub fn never_taken(status: &Status) -> Option<NeverTaken> {
    let mut next = std::error::Error::source(status);
    while let Some(error) = next {
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            let go_away =
                h2.is_go_away() && h2.is_remote() && h2.reason() == Some(h2::Reason::NO_ERROR);
            return go_away.then_some(NeverTaken::GoAway);
        }
        if let Some(hyper) = error.downcast_ref::<hyper::Error>()
            && hyper.is_canceled()
        {
            return Some(NeverTaken::Unsent);
        }
        next = error.source();
    }
    None
}

impl From<Error> for Status {
    fn from(error: Error) -> Status {
        match error {
            Error::Quota { status, .. } | Error::Status(status) => status,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Quota {
                quota, retry_after, ..
            } => write!(
                f,
                "claimd refused the call: over the tenant's {quota} quota; retry after {} ms",
                retry_after.as_millis()
            ),
            Error::Status(status) => write!(
                f,
                "claimd call failed: {:?}: {}",
                status.code(),
                status.message()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::{ErrorDetails, QuotaViolation};

    #[test]
    fn a_resource_exhausted_with_retry_info_and_quota_failure_is_a_quota_error() {
        let mut details = ErrorDetails::with_retry_info(Some(Duration::from_millis(1500)));
        details.set_quota_failure(vec![QuotaViolation::new("claims_per_second", "at most 1")]);
        let status = Status::with_error_details(Code::ResourceExhausted, "over", details);
        match Error::from(status) {
            Error::Quota {
                quota, retry_after, ..
            } => assert_eq!(
                (quota.as_str(), retry_after),
                ("claims_per_second", Duration::from_millis(1500))
            ),
            other => panic!("not a quota error: {other:?}"),
        }
    }

    #[test]
    fn a_resource_exhausted_without_details_stays_a_status() {
        let status = Status::resource_exhausted("message larger than max");
        let error = Error::from(status);
        assert!(matches!(&error, Error::Status(s) if s.code() == Code::ResourceExhausted));
        assert_eq!(error.retry_after(), None);
    }

    #[test]
    fn a_resource_exhausted_with_a_retry_delay_but_no_quota_failure_stays_a_status() {
        let details = ErrorDetails::with_retry_info(Some(Duration::from_secs(1)));
        let status = Status::with_error_details(Code::ResourceExhausted, "busy", details);
        assert!(matches!(Error::from(status), Error::Status(_)));
    }
}
