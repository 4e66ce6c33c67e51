//! Errors → gRPC status codes, in exactly one place. Messages never carry tokens, keys or
//! payloads; a database that cannot be reached is UNAVAILABLE, never INTERNAL. Store
//! failures are counted here (`claimd_store_errors_total{kind}`).

use crate::domain::ActionError;
use crate::store::StoreError;
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
            StoreError::Unavailable(source) => {
                telemetry::store_error("unavailable");
                tracing::warn!(error = %source, "database unavailable");
                Status::unavailable("the database is unavailable; retry later")
            }
            StoreError::Contended => {
                telemetry::store_error("contended");
                Status::unavailable("too much contention on this key; retry later")
            }
            StoreError::Sealed(reason) => {
                telemetry::store_error("sealed");
                // The reason names the field and the key id, never the payload.
                tracing::error!(%reason, "a sealed field failed authentication");
                Status::data_loss("a sealed field failed authentication")
            }
            StoreError::Database(_)
            | StoreError::Migrate(_)
            | StoreError::Corrupt(_)
            | StoreError::Open(_)
            | StoreError::UnsupportedUrl => {
                let kind = match e {
                    StoreError::Corrupt(_) => "corrupt",
                    _ => "database",
                };
                telemetry::store_error(kind);
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), "store error");
                Status::internal("internal error")
            }
        }
    }
}
