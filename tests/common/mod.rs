//! Shared test harness: a PostgreSQL server per test binary ([`pg`]) and a real claimd on
//! a real socket over a fresh database per test ([`app`]), certificates made at test time
//! ([`certs`]), the stored sealed columns ([`raw`]), dead letters through List
//! ([`dead_letters`]), Prometheus scrapes ([`scrape`]). Not every binary uses every part.
#![allow(dead_code)]

pub mod app;
pub mod blocker;
pub mod certs;
pub mod dead_letters;
pub mod pg;
pub mod probe;
pub mod process;
pub mod raw;
pub mod readme;
pub mod scrape;

/// Runs each listed `async fn name(backend: Backend)` twice, as `postgres::name` and
/// `sqlite::name`: one conformance suite, two stores.
#[macro_export]
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
