//! claimd: a gRPC idempotency service. A webhook route calls `Claim` before it does the work
//! for an event; claimd records a durable receipt and tells exactly one caller `CLAIMED`.
//!
//! # Layout
//!
//! - [`domain`] — the pure rules: receipts, states, decisions, policies, backoff and the
//!   transition functions (no I/O).
//! - [`store`] — the [`store::Store`] trait and the PostgreSQL store; all SQL lives there.
//! - [`api`] — the tonic service: validation, tenant from the request context, errors →
//!   status codes.
//! - [`server`] — wiring: [`server::Application`], health, reflection, shutdown.
//! - [`config`] — command line and `CLAIMD_*` environment → [`config::Config`].
//! - [`telemetry`] — logging.
//! - [`pb`] — the code generated from `proto/claimd/v1/claims.proto`.

pub mod api;
pub mod config;
pub mod domain;
pub mod server;
pub mod store;
pub mod telemetry;

/// Generated protobuf messages, the gRPC server and client of `claimd.v1`.
pub mod pb {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("claimd.v1");

    /// The encoded descriptor set of `claimd.v1`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/claimd_descriptor.bin"));
}
