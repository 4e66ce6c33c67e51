//! The Rust client of claimd (a gRPC idempotency service): a webhook route claims an event
//! before it does the work, and exactly one caller wins.
//!
//! # Layout
//!
//! - [`Claims`] — the ClaimService client that sends the API key; [`Claims::claim`] answers
//!   [`Claimed::Won`] with a [`Guard`] when this caller holds the lease.
//! - [`Guard`] — heartbeats at a third of the lease, says when the lease was lost, settles
//!   the receipt once (complete, retry, quarantine; a Retry if dropped unsettled).
//! - [`Error`] — what a call fails with: [`Error::Quota`] when claimd refused it by a tenant
//!   quota (the quota's name and the retry delay), [`Error::Status`] otherwise;
//!   [`never_taken`] tells a call the connection never carried to claimd.
//! - [`pb`] — the messages and the gRPC client generated from the contract,
//!   `proto/claimd/v1/claims.proto`, for every other call.
//!
//! The crate's version is the contract's (`proto/VERSION`).

#![warn(missing_docs)]

mod error;
mod guard;

pub use error::{Error, NeverTaken, never_taken};
pub use guard::{Claimed, Claims, Guard};

/// Generated protobuf messages and the gRPC client of `claimd.v1`.
pub mod pb {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("claimd.v1");
}
