//! The shared test harness: one PostgreSQL server per test process ([`pg`]), a real claimd
//! on a real socket over a fresh database per test ([`spawn`] builds the [`app::TestApp`]),
//! ClaimService calls as the decision, holder and fencing tests write them
//! ([`receipt_ops`]), the real binary as a child process ([`process`]), certificates made at
//! test time ([`certs`]), the stored sealed columns ([`raw`]), dead letters through List
//! ([`dead_letters`]), the Connect doors the suite also runs through ([`door`]),
//! HTTP/1.1 and HTTP/2 written by hand for the door's limits ([`http1`], [`http2`]),
//! deliberately slow writes ([`blocker`]), a one-line summary after each panic ([`panic_line`]), health checks ([`probe`]),
//! the commands of README.md and docs/OPERATIONS.md ([`readme`]). The `metrics` and `secrets` binaries include this
//! module too and use only parts of it.
#![allow(dead_code)]

pub mod app;
pub mod blocker;
pub mod certs;
pub mod dead_letters;
pub mod door;
pub mod http1;
pub mod http2;
pub mod panic_line;
pub mod pg;
pub mod pgbouncer;
pub mod probe;
pub mod process;
pub mod proxy;
pub mod raw;
pub mod readme;
pub mod receipt_ops;
pub mod spawn;

/// Runs each listed `async fn name(backend: Backend)` twice, as `postgres::name` and
/// `sqlite::name` in the module that invokes it: one conformance suite, two stores. In
/// scope wherever `common` is declared with `#[macro_use]`.
macro_rules! conformance {
    ($($name:ident),+ $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::app::Backend::Postgres).await
                }
            )+
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::common::app::Backend::Sqlite).await
                }
            )+
        }
    };
}

/// [`conformance!`], and the same tests again through both Connect encodings over HTTP/1.1
/// (`connect_json::{postgres, sqlite}::name`, `connect_proto::…`): the suite's gRPC client
/// goes through a [`door::Translator`], so each test's expectations hold unchanged.
macro_rules! conformance_every_door {
    ($($name:ident),+ $(,)?) => {
        conformance!($($name),+);
        conformance_every_door!(@door connect_json, ConnectJson, $($name),+);
        conformance_every_door!(@door connect_proto, ConnectProto, $($name),+);
    };
    (@door $module:ident, $door:ident, $($name:ident),+) => {
        mod $module {
            use $crate::common::app::Backend;
            use $crate::common::door::Door;
            mod postgres {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        super::super::$name(super::Backend::Postgres.through(super::Door::$door))
                            .await
                    }
                )+
            }
            mod sqlite {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $name() {
                        super::super::$name(super::Backend::Sqlite.through(super::Door::$door))
                            .await
                    }
                )+
            }
        }
    };
}
