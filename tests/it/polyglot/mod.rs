//! Clients in other languages against the real claimd binary: the Python Slack receiver
//! ([`python`]), the Node helper ([`node`]), the Express Idempotency-Key middleware built on
//! it, on one claimd and on two replicas of one PostgreSQL database ([`express`]), every
//! grpcurl command of README.md and docs/OPERATIONS.md ([`readme`]), `buf lint` of the
//! proto ([`buf`]), the installable packages — `clients/python` ([`clients_python`]),
//! `clients/node` ([`clients_node`]), `clients/go` ([`clients_go`]) and `clients/java`
//! ([`clients_java`]; these two against the claimds of [`client_servers`]) — the HTTP door
//! through Connect's own JavaScript runtime ([`connect_es`]), and the packages' calls in
//! the caller's trace ([`traces`]). Their tools come from the package registries on first
//! run ([`tools`]).

mod buf;
mod client_servers;
mod clients_go;
mod clients_java;
mod clients_node;
mod clients_python;
mod connect_es;
mod express;
mod node;
mod python;
mod readme;
mod tools;
mod traces;
