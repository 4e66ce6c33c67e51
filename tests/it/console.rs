//! The operator console over plain HTTP/1.1 through the real server (issue 31; the browser
//! suite is `console_browser`): who may sign in and what a session may see and do
//! (`access`), and the console's door against hostile callers — nothing read before a
//! session, bounded connections per source, reads with deadlines, memory under an
//! unauthenticated flood (`door`), and an unreachable database (`faults`: 503, nothing
//! changed), and TLS (`tls`: the same certificate, a Secure cookie). `page` is the test's
//! HTTP client.

mod access;
mod door;
mod faults;
mod page;
mod tls;
