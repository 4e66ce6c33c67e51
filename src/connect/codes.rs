//! Connect's errors: a gRPC status as Connect's JSON error body (`code` by name, `message`,
//! and the status details — claimd's `google.rpc.BadRequest` naming the field — as
//! `{"type", "value"}` with the value in base64, and for a BadRequest also the `debug` JSON
//! the protocol allows, `{"fieldViolations":[{"field","description"}]}`, for callers without
//! protobuf) and the HTTP status Connect maps each code to, with `Retry-After` (whole
//! seconds, rounded up) when the status carries a `google.rpc.RetryInfo` (a tenant quota's
//! refusal, 429); and the errors of the door
//! itself (a body too large, an unknown content type, a method other than POST, a bad
//! `Connect-Timeout-Ms`, JSON that does not decode or gives a field twice).

use base64::Engine as _;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use tonic::Code;
use tonic::body::Body;

/// One Connect error, ready to answer.
#[derive(Debug)]
pub struct ConnectError {
    code: Code,
    message: String,
    details: Vec<(String, Vec<u8>)>,
    http: Option<StatusCode>,
    /// `Retry-After`, in seconds.
    retry_after: Option<u64>,
}

impl ConnectError {
    fn new(code: Code, message: impl Into<String>) -> ConnectError {
        ConnectError {
            code,
            message: message.into(),
            details: Vec::new(),
            http: None,
            retry_after: None,
        }
    }

    /// The error a gRPC status means, its details carried over.
    pub fn from_status(status: &tonic::Status) -> ConnectError {
        let mut e = ConnectError::new(status.code(), status.message());
        if let Ok(rpc) = <tonic_types::pb::Status as prost::Message>::decode(status.details()) {
            for any in rpc.details {
                let name = any
                    .type_url
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                if name == "google.rpc.RetryInfo" {
                    e.retry_after = retry_after_secs(&any.value);
                }
                e.details.push((name, any.value));
            }
        }
        e
    }

    /// A request body over the request limit.
    pub fn too_large() -> ConnectError {
        ConnectError::new(
            Code::ResourceExhausted,
            format!(
                "the request is larger than {} bytes",
                crate::api::MAX_REQUEST_BYTES
            ),
        )
    }

    /// A request body compressed with `encoding`, which claimd does not decompress.
    pub fn unsupported_encoding(encoding: &str) -> ConnectError {
        let shown: String = encoding.chars().take(32).collect();
        ConnectError::new(
            Code::Unimplemented,
            format!("Content-Encoding {shown} is not supported: send the body uncompressed"),
        )
    }

    /// A request body that broke off before its end.
    pub fn unreadable() -> ConnectError {
        ConnectError::new(
            Code::InvalidArgument,
            "the request body broke off before its end",
        )
    }

    /// A request body whose reading failed with `status`: the body limits' answers
    /// (`crate::body_limit`) as they are — a body that did not arrive in time is
    /// `deadline_exceeded` with HTTP 408 (the request, not the caller's deadline, timed
    /// out); a full budget `resource_exhausted` — anything else [`Self::unreadable`].
    pub fn unread(status: &tonic::Status) -> ConnectError {
        match status.code() {
            Code::DeadlineExceeded => ConnectError {
                http: Some(StatusCode::REQUEST_TIMEOUT),
                ..ConnectError::new(Code::DeadlineExceeded, status.message())
            },
            Code::ResourceExhausted => ConnectError::new(Code::ResourceExhausted, status.message()),
            _ => ConnectError::unreadable(),
        }
    }

    /// A POST to the service in a content type none of its protocols speaks.
    pub fn unsupported_media_type() -> ConnectError {
        ConnectError {
            http: Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            ..ConnectError::new(
                Code::Unknown,
                "Content-Type must be application/json or application/proto (Connect), \
                 application/grpc or application/grpc+proto (gRPC), or \
                 application/grpc-web[-text][+proto] (gRPC-Web)",
            )
        }
    }

    /// Another method than POST on the service's paths (a GET, a PUT): 405, with
    /// `Allow: POST` set by the door.
    pub fn method_not_allowed() -> ConnectError {
        ConnectError {
            http: Some(StatusCode::METHOD_NOT_ALLOWED),
            ..ConnectError::new(
                Code::Unimplemented,
                "claimd.v1.ClaimService is served by POST only (Connect, gRPC, gRPC-Web)",
            )
        }
    }

    /// A `Connect-Timeout-Ms` that is not a number of milliseconds (at most 10 digits).
    pub fn bad_timeout() -> ConnectError {
        ConnectError::new(
            Code::InvalidArgument,
            "Connect-Timeout-Ms must be a whole number of milliseconds",
        )
    }

    /// A request that does not decode as its method's message: `why` says what was
    /// expected, from the descriptors alone (never quoting what was sent); with the `field`
    /// decoding stopped at, named in the message and in a `google.rpc.BadRequest` detail,
    /// as claimd's own validation names it.
    pub fn undecodable(why: &str, field: Option<String>) -> ConnectError {
        let Some(field) = field else {
            return ConnectError::new(
                Code::InvalidArgument,
                format!("the request body is not a valid message: {why}"),
            );
        };
        let message = format!("{field}: the request body is not a valid message: {why}");
        let details = tonic_types::ErrorDetails::with_bad_request_violation(
            field,
            "does not decode from JSON",
        );
        use tonic_types::StatusExt as _;
        let status = tonic::Status::with_error_details(Code::InvalidArgument, message, details);
        ConnectError::from_status(&status)
    }

    /// A JSON request that gives `field` more than once (the same key twice, or its proto
    /// name and its JSON name): refused, as proto3's JSON parsers refuse it, naming the
    /// field in the message and in a `google.rpc.BadRequest` detail.
    pub fn duplicate_field(field: String) -> ConnectError {
        let message = format!(
            "{field}: the request body gives this field more than once (by its name or its \
             JSON name); give it once"
        );
        let details =
            tonic_types::ErrorDetails::with_bad_request_violation(field, "given more than once");
        use tonic_types::StatusExt as _;
        let status = tonic::Status::with_error_details(Code::InvalidArgument, message, details);
        ConnectError::from_status(&status)
    }

    /// The gRPC status this error stands for inside the door (its code and message), for
    /// the gRPC service that reads the body; the door answers with the error itself.
    pub fn status(&self) -> tonic::Status {
        tonic::Status::new(self.code, self.message.clone())
    }

    /// The door failed itself.
    pub fn internal(message: &str) -> ConnectError {
        ConnectError::new(Code::Internal, message)
    }

    /// The HTTP answer: Connect's JSON error body and its status.
    pub fn into_response(self) -> Response<Body> {
        let details: Vec<serde_json::Value> = self
            .details
            .iter()
            .map(|(kind, value)| {
                let mut detail = serde_json::json!({
                    "type": kind,
                    "value": base64::engine::general_purpose::STANDARD_NO_PAD.encode(value),
                });
                if let Some(debug) = debug_of(kind, value) {
                    detail["debug"] = debug;
                }
                detail
            })
            .collect();
        let mut body = serde_json::json!({ "code": name(self.code), "message": self.message });
        if !details.is_empty() {
            body["details"] = serde_json::Value::Array(details);
        }
        let mut response =
            Response::new(Body::new(Full::new(bytes::Bytes::from(body.to_string()))));
        *response.status_mut() = self.http.unwrap_or_else(|| http_status(self.code));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A `google.rpc.RetryInfo`'s delay in whole seconds, rounded up (a delay of 200 ms is
/// `Retry-After: 1`), for HTTP's `Retry-After`.
fn retry_after_secs(value: &[u8]) -> Option<u64> {
    let info = <tonic_types::pb::RetryInfo as prost::Message>::decode(value).ok()?;
    let delay = info.retry_delay?;
    let secs = u64::try_from(delay.seconds).ok()?;
    Some(secs + u64::from(delay.nanos > 0))
}

/// The `debug` JSON of a detail claimd sends (proto3 JSON of a `google.rpc.BadRequest`, a
/// `google.rpc.QuotaFailure` or a `google.rpc.RetryInfo`), so a caller reads it without
/// decoding protobuf; `None` for any other detail.
fn debug_of(kind: &str, value: &[u8]) -> Option<serde_json::Value> {
    if kind == "google.rpc.QuotaFailure" {
        let failure = <tonic_types::pb::QuotaFailure as prost::Message>::decode(value).ok()?;
        let violations: Vec<serde_json::Value> = failure
            .violations
            .iter()
            .map(|v| serde_json::json!({ "subject": v.subject, "description": v.description }))
            .collect();
        return Some(serde_json::json!({ "violations": violations }));
    }
    if kind == "google.rpc.RetryInfo" {
        let info = <tonic_types::pb::RetryInfo as prost::Message>::decode(value).ok()?;
        let delay = info.retry_delay?;
        let shown = format!("{}.{:09}s", delay.seconds, delay.nanos);
        return Some(serde_json::json!({ "retryDelay": shown }));
    }
    if kind != "google.rpc.BadRequest" {
        return None;
    }
    let bad = <tonic_types::pb::BadRequest as prost::Message>::decode(value).ok()?;
    let violations: Vec<serde_json::Value> = bad
        .field_violations
        .iter()
        .map(|v| serde_json::json!({ "field": v.field, "description": v.description }))
        .collect();
    Some(serde_json::json!({ "fieldViolations": violations }))
}

/// Connect's name of a code.
pub fn name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The HTTP status Connect gives a code.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::ConnectError;
    use tonic::Status;

    #[test]
    fn a_body_past_its_deadline_is_408_a_full_budget_429_and_a_broken_one_400() {
        let status = |s: &Status| ConnectError::unread(s).into_response().status().as_u16();
        assert_eq!(status(&Status::deadline_exceeded("slow")), 408);
        assert_eq!(status(&Status::resource_exhausted("full")), 429);
        assert_eq!(status(&Status::cancelled("reset")), 400);
        // The caller's own deadline keeps Connect's mapping.
        let late = ConnectError::from_status(&Status::deadline_exceeded("late"));
        assert_eq!(late.into_response().status().as_u16(), 504);
    }

    #[test]
    fn a_status_with_retry_info_is_429_with_retry_after_in_whole_seconds_rounded_up() {
        use tonic_types::{ErrorDetails, StatusExt};
        let retry = |delay: std::time::Duration| {
            let details = ErrorDetails::with_retry_info(Some(delay));
            let status =
                Status::with_error_details(tonic::Code::ResourceExhausted, "over", details);
            ConnectError::from_status(&status).into_response()
        };
        let header = |response: &http::Response<_>| {
            let value = response.headers().get(http::header::RETRY_AFTER);
            value.map(|v| v.to_str().unwrap().to_owned())
        };
        let soon = retry(std::time::Duration::from_millis(200));
        assert_eq!(soon.status().as_u16(), 429);
        assert_eq!(header(&soon).as_deref(), Some("1"));
        let later = retry(std::time::Duration::from_millis(2001));
        assert_eq!(header(&later).as_deref(), Some("3"));
        let exact = retry(std::time::Duration::from_secs(2));
        assert_eq!(header(&exact).as_deref(), Some("2"));
        let plain = ConnectError::from_status(&Status::resource_exhausted("full"));
        assert_eq!(header(&plain.into_response()), None);
    }
}
