//! The operator console over plain HTTP/1.1 through the real server (issue 31; the browser
//! suite is `console_browser`): who may sign in and what a session may see and do
//! (`access`), and the console's door against hostile callers — nothing read before a
//! session, bounded connections per source, reads with deadlines, memory under an
//! unauthenticated flood (`door`), and an unreachable database (`faults`: 503, nothing
//! changed), and TLS (`tls`: the same certificate, a Secure cookie); the Quarantine of an
//! orphan as one compare-and-set write (`quarantine`: done, or refused with the receipt
//! exactly as before; `quarantine_faults`: an unreachable database and a lost answer on
//! PostgreSQL); sessions as a per-tenant resource (`sessions`: no sign-in ends another
//! tenant's session); the overview's quota table (`quotas`). `page` is the test's HTTP client, `keep_alive` one that keeps its
//! connection, `operator` the Quarantine tests' operator.

mod access;
mod door;
mod faults;
mod keep_alive;
pub(crate) mod operator;
pub(crate) mod page;
pub(crate) mod quarantine;
mod quarantine_faults;
mod quotas;
mod sessions;
mod tls;
