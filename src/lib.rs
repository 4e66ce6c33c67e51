//! claimd: a gRPC idempotency service. A webhook route calls `Claim` before it does the work
//! for an event; claimd records a durable receipt and tells exactly one caller `CLAIMED`.
//!
//! # Layout
//!
//! - [`domain`] — the pure rules: receipts, states, decisions, policies, backoff and the
//!   transition functions (no I/O).
//! - [`store`] — the storage role traits and [`store::Store`] (all of them), written once
//!   over a driver (`store::receipts`), with two drivers: PostgreSQL ([`store::postgres`],
//!   the production store any number of replicas share) and embedded SQLite
//!   ([`store::sqlite`], the default: one file, one process). All SQL lives there.
//! - [`api`] — the tonic service: validation, tenant from the request context, errors →
//!   status codes (the only place statuses are made).
//! - [`admin`] — `claimd keys …`: operator commands on the database.
//! - [`console`] — the operator's web console on `--console-listen`: sessions, pages,
//!   Redrive and Quarantine through the same calls as gRPC.
//! - [`auth`] — API keys → tenant and namespaces, as a tower layer; protected mode.
//! - [`body_limit`] — the layer that bounds reading request bodies: a deadline, and the
//!   bytes all calls and each source may hold at once.
//! - [`seal`] — sealing of stored payloads under a key ring (XChaCha20-Poly1305; older
//!   AES-256-GCM values still open).
//! - [`deadline`] — the layer that answers DEADLINE_EXCEEDED when a caller's deadline passes.
//! - [`drain`] — the layer that refuses new calls with UNAVAILABLE once shutdown starts.
//! - [`janitor`] — prunes terminal receipts past their namespace's retention.
//! - [`listener`] — connection limits: the cap, the first-bytes timeout, keepalive, age.
//! - [`mesh`] — behind a proxy or mesh: trusted proxies, PROXY v2, SPIFFE identities.
//! - [`server`] — wiring: [`server::Application`], health, reflection, shutdown.
//! - [`source`] — where a connection or call comes from, as per-source limits count it.
//! - [`spans`] — the group commit's trace spans and the switch that turns them on.
//! - [`config`] — command line, `CLAIMD_*` environment and the policy file →
//!   [`config::Config`].
//! - [`telemetry`] — logs (one span per RPC) and Prometheus metrics (`/metrics`).
//! - [`tls`] — the TLS files → tonic's rustls server configuration.
//! - `private_fs` — owner-only files and directories (the embedded data, the seal key file).
//! - [`pb`] — the code generated from `proto/claimd/v1/claims.proto`.
//!
//! The contract is `docs/DESIGN.md`; the map of the code is `ARCHITECTURE.md`. The Rust
//! client is the workspace's `claimd-client` crate (`clients/rust`), the benchmark
//! `claimd-bench` (`bench/`).

#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod auth;
pub mod body_limit;
pub mod config;
pub mod connect;
pub mod console;
pub mod deadline;
pub mod domain;
pub mod drain;
pub mod janitor;
pub mod listener;
pub mod mesh;
mod private_fs;
pub mod seal;
pub mod server;
pub mod source;
pub mod spans;
pub mod store;
pub mod telemetry;
pub mod tls;

/// Generated protobuf messages, the gRPC server and client of `claimd.v1`.
pub mod pb {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("claimd.v1");

    /// The encoded descriptor set of `claimd.v1`, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/claimd_descriptor.bin"));
}
