//! Every integration test of claimd in one binary: one module per area (`decisions`,
//! `fencing`, …, the clients in other languages under `polyglot`), the harness in `common`.
//! One binary links the crate once and starts one PostgreSQL for the whole run; its tests run
//! in parallel threads, so a test that needs something process-wide — the metrics recorder,
//! the global log subscriber — lives in a binary of its own instead (`tests/metrics/`,
//! `tests/secrets.rs`). A test that stops PostgreSQL uses a `pg::PrivateCluster` of its own.
//!
//! Run one area with `cargo test --test it decisions::`, one store with `postgres::`.

#[macro_use]
mod common;

mod auth;
mod auth_flood;
mod batch_lock_waits;
mod bench;
mod bench_soak;
mod citus;
mod cli;
mod client_goaway;
mod client_guard;
mod concurrency;
mod connect;
mod connect_bodies;
mod connect_linger;
mod connect_protected;
mod connect_transports;
mod console;
mod console_browser;
mod dead_letters;
mod dead_letters_redrive;
mod deadlines;
mod decisions;
mod deploy;
mod drain;
mod durability;
mod embedded;
mod faults;
mod faults_disk;
mod faults_failover;
mod faults_lock_waits;
mod faults_network;
mod faults_notify;
mod faults_patroni;
mod faults_power;
mod faults_skew;
mod faults_slow_commit;
mod faults_unsure;
mod fencing;
mod file_modes;
mod group_commit;
mod health;
mod health_listener;
mod history;
mod holder_actions;
mod hostile;
mod hot_key;
mod hot_row;
mod janitor;
mod janitor_lock;
mod lanes;
mod limits;
mod lock_waits;
mod logs;
mod mesh;
mod model;
mod model_concurrency;
mod module_graph;
mod orphans;
mod outage_load;
mod pg_harness;
mod pgbouncer;
mod plans;
mod policies;
mod polyglot;
mod quickstart;
mod quotas;
mod quotas_history;
mod read_only;
mod sealing;
mod sealing_keys;
mod sealing_lifetimes;
mod startup_errors;
mod tls;
mod tls_startup;
mod traces;
mod validation;
mod validation_tokens;
mod version;
mod wait;
