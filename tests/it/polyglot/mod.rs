//! Clients in other languages against the real claimd binary: the Python Slack receiver
//! ([`python`]), the Node helper ([`node`]), the Express Idempotency-Key middleware built on
//! it, on one claimd and on two replicas of one PostgreSQL database ([`express`]), every
//! grpcurl command of the README ([`readme`]) and `buf lint` of the proto ([`buf`]). Their
//! tools come from the package registries on first run ([`tools`]).

mod buf;
mod express;
mod node;
mod python;
mod readme;
mod tools;
