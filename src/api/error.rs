//! Errors → gRPC status codes, in exactly one place: request validation, the store, the
//! tenant quotas, the authentication layer, the drain, deadline and body-limit layers, and tonic's own
//! message-size refusal. Messages never carry tokens, keys or payloads; a database that
//! cannot be reached, or whose disk is full or read-only, is UNAVAILABLE, never INTERNAL.
//! Store failures are counted here (`claimd_store_errors_total{kind}`, the kind from
//! [`StoreError::kind`]).

use super::quota::QuotaRefusal;
use super::wait::ClaimError;
use crate::auth::{AuthError, Refusal};
use crate::body_limit::BodyRefused;
use crate::deadline::DeadlinePassed;
use crate::domain::ActionError;
use crate::drain::ShuttingDown;
use crate::store::{LeaseCall, StoreError};
use crate::telemetry;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// A request field that failed validation: the field's name and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {description}")]
pub struct InvalidField {
    /// The proto field name, e.g. `key` or `lease_ttl`.
    pub field: &'static str,
    /// What is wrong, without echoing the value.
    pub description: String,
}

impl InvalidField {
    /// A violation of `field`.
    pub fn new(field: &'static str, description: impl Into<String>) -> Self {
        InvalidField {
            field,
            description: description.into(),
        }
    }
}

impl From<InvalidField> for Status {
    fn from(e: InvalidField) -> Status {
        let details = ErrorDetails::with_bad_request_violation(e.field, e.description.clone());
        Status::with_error_details(Code::InvalidArgument, e.to_string(), details)
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Status {
        match e {
            StoreError::NotFound => Status::not_found("no receipt for that namespace and key"),
            StoreError::Refused(ActionError::LeaseLost) => Status::aborted(
                "the lease was lost: this claim token is no longer current; stop the work",
            ),
            StoreError::Refused(ActionError::WrongState(state)) => Status::failed_precondition(
                format!("the receipt is {}", state.as_str().to_uppercase()),
            ),
            // Counted per call; logged once when health changes (server::probe_health).
            StoreError::Unavailable(ref source) => {
                telemetry::store_error(&e);
                tracing::debug!(error = %source, "database unavailable");
                Status::unavailable("the database is unavailable; retry later")
            }
            StoreError::ReadOnly(why) => {
                telemetry::store_error(&e);
                tracing::debug!(why, "the database accepts no writes");
                Status::unavailable(
                    "the database accepts no writes right now (a standby, or a failover in \
                     progress); retry later",
                )
            }
            StoreError::Storage(ref source) => {
                telemetry::store_error(&e);
                tracing::debug!(error = %source, "the database's storage failed");
                Status::unavailable(
                    "the database cannot be written: its disk is full, read-only or failing; \
                     retry later",
                )
            }
            StoreError::Unsure(_) => {
                telemetry::store_error(&e);
                Status::unavailable(
                    "the database did not confirm whether this call's write committed (Get \
                     tells); retry later",
                )
            }
            StoreError::DeadlinePassed => Status::from(DeadlinePassed),
            StoreError::OverQuota(refusal) => Status::from(QuotaRefusal::from(refusal)),
            StoreError::Unsupported(what) => Status::failed_precondition(what),
            StoreError::Contended => {
                telemetry::store_error(&e);
                Status::unavailable(
                    "too much contention on this key; nothing was written; retry later",
                )
            }
            StoreError::LateLease(call) => {
                telemetry::store_error(&e);
                Status::unavailable(match call {
                    LeaseCall::Claim => {
                        "this Claim's write committed too late to leave a usable lease: its \
                         attempt may have been granted (the receipt reads IN_FLIGHT until that \
                         lease ends); retry later"
                    }
                    LeaseCall::Heartbeat => {
                        "this Heartbeat's write committed too late to leave a usable lease: \
                         the lease may have been extended and the checkpoint replaced; \
                         heartbeat again"
                    }
                })
            }
            StoreError::Sealed(ref reason) => {
                telemetry::store_error(&e);
                // The reason names the field and the key id, never the payload.
                tracing::error!(%reason, "a sealed field failed authentication");
                Status::data_loss("a sealed field failed authentication")
            }
            StoreError::Database(_)
            | StoreError::Migrate(_)
            | StoreError::Corrupt(_)
            | StoreError::Open(_)
            | StoreError::UnsupportedUrl => {
                telemetry::store_error(&e);
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "store error");
                Status::internal("internal error")
            }
        }
    }
}

/// RESOURCE_EXHAUSTED naming the quota, with a `google.rpc.RetryInfo` (when a token is due,
/// or a parked Claim may have left) and a `google.rpc.QuotaFailure` whose violation's
/// subject is the quota's key (`claims_per_second`); no tenant name (docs/DESIGN.md §5.15).
impl From<QuotaRefusal> for Status {
    fn from(e: QuotaRefusal) -> Status {
        let violation =
            tonic_types::QuotaViolation::new(e.quota.name(), format!("at most {}", e.limit));
        let mut details = ErrorDetails::with_retry_info(Some(e.retry_after));
        details.set_quota_failure(vec![violation]);
        tracing::debug!(quota = e.quota.name(), "refused by a tenant quota");
        Status::with_error_details(Code::ResourceExhausted, e.to_string(), details)
    }
}

impl From<ClaimError> for Status {
    fn from(e: ClaimError) -> Status {
        match e {
            ClaimError::Store(e) => e.into(),
            ClaimError::Quota(e) => e.into(),
        }
    }
}

impl From<Refusal> for Status {
    fn from(refusal: Refusal) -> Status {
        let code = match refusal {
            Refusal::MissingCredentials
            | Refusal::NotBearer
            | Refusal::MalformedKey
            | Refusal::UnknownKey
            | Refusal::UntrustedIdentity
            | Refusal::UnknownIdentity
            | Refusal::NoPrincipal => Code::Unauthenticated,
            Refusal::IdentityMismatch => Code::PermissionDenied,
            Refusal::RevokedKey
            | Refusal::NamespaceDenied(_)
            | Refusal::NamespaceRequired
            | Refusal::NotLocalHost
            | Refusal::ForeignOrigin => Code::PermissionDenied,
            // Too many failed authentications from this peer address (docs/DESIGN.md §5.3).
            Refusal::TooManyFailures => Code::ResourceExhausted,
        };
        Status::new(code, refusal.to_string())
    }
}

impl From<AuthError> for Status {
    fn from(e: AuthError) -> Status {
        match e {
            AuthError::Refused(refusal) => refusal.into(),
            AuthError::Store(e) => e.into(),
        }
    }
}

impl From<ShuttingDown> for Status {
    fn from(e: ShuttingDown) -> Status {
        Status::unavailable(e.to_string())
    }
}

impl From<DeadlinePassed> for Status {
    fn from(e: DeadlinePassed) -> Status {
        Status::deadline_exceeded(e.to_string())
    }
}

impl From<BodyRefused> for Status {
    fn from(e: BodyRefused) -> Status {
        match e {
            BodyRefused::TooSlow { .. } => Status::deadline_exceeded(e.to_string()),
            BodyRefused::BudgetFull { .. } | BodyRefused::SourceFull { .. } => {
                Status::resource_exhausted(e.to_string())
            }
        }
    }
}

/// tonic refuses a request over the message-size limit with OUT_OF_RANGE ("decoded message
/// length too large") before any handler runs; the contract (and grpc-go, grpc-java) says
/// RESOURCE_EXHAUSTED. tonic 0.14 hard-codes that code (`codec/decode.rs`) and offers no
/// hook before it, so the server rewrites the response's `grpc-status`. The message is
/// read decoded (tonic percent-encodes it), and only this refusal is rewritten: every other
/// OUT_OF_RANGE passes unchanged.
pub fn oversized_is_resource_exhausted<B>(mut response: http::Response<B>) -> http::Response<B> {
    const STATUS: &str = "grpc-status";
    const MESSAGE: &str = "grpc-message";
    let headers = response.headers();
    if headers.get(STATUS).is_none_or(|code| code != "11") {
        return response;
    }
    // Only the code and the message: tonic decodes (percent-decoding) them for us.
    let mut status = http::HeaderMap::new();
    for name in [STATUS, MESSAGE] {
        if let Some(value) = headers.get(name) {
            status.insert(name, value.clone());
        }
    }
    let too_large = Status::from_header_map(&status)
        .is_some_and(|s| s.message().contains("message length too large"));
    if too_large {
        let code = http::HeaderValue::from_static("8");
        response.headers_mut().insert(STATUS, code);
    }
    response
}

/// What tonic's protobuf codec (tonic-prost) starts its message with when a request body
/// does not decode; it answers INTERNAL.
const UNDECODABLE: &str = "failed to decode Protobuf message: ";

/// tonic answers a request body that prost cannot decode (a string field that is not
/// UTF-8, a truncated varint, a wrong wire type, nesting beyond prost's recursion limit)
/// with INTERNAL. In claimd's contract INTERNAL means its database misbehaved (§2.7); here
/// the caller is at fault, so the answer becomes INVALID_ARGUMENT with a
/// `google.rpc.BadRequest` violation naming the request's field when prost's error names
/// one (`ClaimRequest.key: invalid string value…` names `key`). prost's description names
/// fields and wire types only, never the bytes, so the message is kept.
pub fn undecodable_is_invalid_argument<B>(mut response: http::Response<B>) -> http::Response<B> {
    const STATUS: &str = "grpc-status";
    if response
        .headers()
        .get(STATUS)
        .is_none_or(|code| code != "13")
    {
        return response;
    }
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    let Some(rest) = status.message().strip_prefix(UNDECODABLE) else {
        return response;
    };
    let message = status.message().to_owned();
    let rewritten = match outermost_field(rest) {
        Some(field) => {
            let details = ErrorDetails::with_bad_request_violation(field, "is not valid protobuf");
            Status::with_error_details(Code::InvalidArgument, message, details)
        }
        None => Status::invalid_argument(message),
    };
    let headers = response.headers_mut();
    for name in [STATUS, "grpc-message", "grpc-status-details-bin"] {
        headers.remove(name);
    }
    if rewritten.add_header(headers).is_err() {
        // The message came from a header already, so it always fits one: keep the code.
        headers.insert(STATUS, http::HeaderValue::from_static("3"));
    }
    response
}

/// The request's own field in prost's error stack (`Inner.x: Outer.field: description`,
/// innermost first): the last leading `Message.field` segment.
fn outermost_field(rest: &str) -> Option<&str> {
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    rest.split(": ")
        .map_while(|segment| {
            let (message, field) = segment.split_once('.')?;
            (ident(message) && ident(field)).then_some(field)
        })
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_unauthenticated_or_permission_denied_and_never_echo_the_key() {
        let unauthenticated = [
            Refusal::MissingCredentials,
            Refusal::NotBearer,
            Refusal::MalformedKey,
            Refusal::UnknownKey,
            Refusal::NoPrincipal,
        ];
        for refusal in unauthenticated {
            assert_eq!(Status::from(refusal).code(), Code::Unauthenticated);
        }
        let denied = [
            Refusal::RevokedKey,
            Refusal::NamespaceDenied("a".into()),
            Refusal::NamespaceRequired,
            Refusal::NotLocalHost,
            Refusal::ForeignOrigin,
        ];
        for refusal in denied {
            assert_eq!(Status::from(refusal).code(), Code::PermissionDenied);
        }
        let throttled = Status::from(Refusal::TooManyFailures);
        assert_eq!(throttled.code(), Code::ResourceExhausted);
        assert!(
            throttled
                .message()
                .contains("too many failed authentications")
        );
    }

    #[test]
    fn the_layers_answers_have_their_codes() {
        assert_eq!(Status::from(ShuttingDown).code(), Code::Unavailable);
        assert_eq!(Status::from(DeadlinePassed).code(), Code::DeadlineExceeded);
        let slow = BodyRefused::TooSlow {
            timeout: std::time::Duration::from_secs(1),
        };
        assert_eq!(Status::from(slow).code(), Code::DeadlineExceeded);
        let full = BodyRefused::SourceFull { bytes: 1 };
        assert_eq!(Status::from(full).code(), Code::ResourceExhausted);
        let store = AuthError::Store(StoreError::Unavailable(sqlx::Error::PoolTimedOut));
        assert_eq!(Status::from(store).code(), Code::Unavailable);
    }

    #[test]
    fn a_failed_disk_is_unavailable_saying_so_without_the_error_text() {
        let source = sqlx::Error::Io(std::io::Error::other("/secret/path: no space left"));
        let status = Status::from(StoreError::Storage(source));
        assert_eq!(status.code(), Code::Unavailable);
        assert!(status.message().contains("disk is full"), "{status:?}");
        assert!(!status.message().contains("/secret"), "{status:?}");
    }

    #[test]
    fn every_counted_store_failure_kind_is_registered_at_zero() {
        let failures = [
            StoreError::Unavailable(sqlx::Error::PoolTimedOut),
            StoreError::Storage(sqlx::Error::PoolTimedOut),
            StoreError::Database(sqlx::Error::PoolClosed),
            StoreError::Contended,
            StoreError::LateLease(LeaseCall::Claim),
            StoreError::LateLease(LeaseCall::Heartbeat),
            StoreError::Unsure(Some(2)),
            StoreError::Corrupt("x".into()),
            StoreError::Open("x".into()),
            StoreError::UnsupportedUrl,
        ];
        for e in failures {
            assert!(
                telemetry::STORE_ERROR_KINDS.contains(&e.kind()),
                "{} is not registered",
                e.kind()
            );
        }
    }

    #[test]
    fn an_undecodable_body_is_invalid_argument_naming_the_outermost_field() {
        use tonic_types::StatusExt;
        let response = |status: Status| status.into_http::<tonic::body::Body>();
        let answer = |message: &str| {
            let rewritten = undecodable_is_invalid_argument(response(Status::internal(message)));
            Status::from_header_map(rewritten.headers()).expect("a status")
        };
        let bad_utf8 = answer(
            "failed to decode Protobuf message: Duration.seconds: ClaimRequest.key: invalid \
             string value: data is not UTF-8 encoded",
        );
        assert_eq!(bad_utf8.code(), Code::InvalidArgument);
        let violations = bad_utf8.get_details_bad_request().expect("BadRequest");
        assert_eq!(violations.field_violations[0].field, "key");
        let deep = answer("failed to decode Protobuf message: recursion limit reached");
        assert_eq!(deep.code(), Code::InvalidArgument);
        assert!(deep.get_details_bad_request().is_none());
        assert_eq!(answer("internal error").code(), Code::Internal);
    }

    #[test]
    fn only_the_size_refusal_becomes_resource_exhausted() {
        let response = |status: Status| status.into_http::<tonic::body::Body>();
        let too_large = Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: \
             4194304 bytes",
        );
        let rewritten = oversized_is_resource_exhausted(response(too_large));
        let code = Status::from_header_map(rewritten.headers()).map(|s| s.code());
        assert_eq!(code, Some(Code::ResourceExhausted));
        let other = oversized_is_resource_exhausted(response(Status::out_of_range("past the end")));
        let code = Status::from_header_map(other.headers()).map(|s| s.code());
        assert_eq!(code, Some(Code::OutOfRange));
    }
}
