//! [`TestApp::builder`], the one way a test starts an in-process claimd: which database it
//! serves (a fresh one of a [`Backend`], or one the test already has), how its [`Config`]
//! differs from the test default, then [`TestAppBuilder::spawn`].

use super::app::{Backend, TestApp, connect};
use super::door::Door;
use claimd::config::Config;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::server::Application;
use std::net::SocketAddr;
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// Where the server's data lives.
enum Database {
    /// A fresh, empty database of this backend, made at spawn.
    Fresh(Backend),
    /// A database the test already has (migrated at start), e.g. to start a second replica
    /// or a restarted server on the same data.
    Existing(String),
}

/// What [`TestAppBuilder::configure`] collects.
type Configure<'a> = Box<dyn FnOnce(&mut Config) + 'a>;

/// A claimd about to start: by default over a fresh PostgreSQL database, listening on
/// 127.0.0.1:0 with `/metrics` on 127.0.0.1:0 and otherwise the defaults.
pub struct TestAppBuilder<'a> {
    database: Database,
    configure: Vec<Configure<'a>>,
}

impl TestApp {
    /// A claimd to start over a fresh PostgreSQL database with the test configuration; see
    /// [`TestAppBuilder`].
    pub fn builder<'a>() -> TestAppBuilder<'a> {
        TestAppBuilder {
            database: Database::Fresh(Backend::Postgres),
            configure: Vec::new(),
        }
    }
}

impl<'a> TestAppBuilder<'a> {
    /// Serves a fresh, empty database of `backend` (replaces any [`Self::database_url`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.database = Database::Fresh(backend);
        self
    }

    /// Serves the database at `url`, migrated at start, instead of a fresh one (replaces any
    /// [`Self::backend`]).
    pub fn database_url(mut self, url: impl Into<String>) -> Self {
        self.database = Database::Existing(url.into());
        self
    }

    /// Adjusts the configuration before the server starts; called in order if given more
    /// than once.
    pub fn configure(mut self, configure: impl FnOnce(&mut Config) + 'a) -> Self {
        self.configure.push(Box::new(configure));
        self
    }

    /// Starts the server on its own task and connects a client; panics if it cannot start.
    pub async fn spawn(self) -> TestApp {
        super::panic_line::install();
        let (database_url, dir, door) = match self.database {
            Database::Fresh(backend) => {
                let (url, dir) = backend.fresh_database().await;
                (url, dir, backend.door)
            }
            Database::Existing(url) => (url, None, Door::Grpc),
        };
        let mut config = super::app::test_config(&database_url);
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config.metrics_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        for configure in self.configure {
            configure(&mut config);
        }
        let clock = config.store.clock.clone();
        let seal = config.store.seal.clone();
        let tls = config.tls_cert.is_some();
        // A test cannot go on without its server.
        let app = Application::build(config).await.expect("claimd starts");
        let addr = app.local_addr();
        let health_addr = app.health_addr();
        let metrics_addr = app.metrics_addr();
        let console_addr = app.console_addr();
        let janitor = app.janitor();
        let policies = app.policies();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(app.run_until(async {
            let _ = rx.await;
        }));
        // Over TLS the plaintext client cannot connect; it is created unconnected (and fails
        // when used): TLS tests make their own with `tls_channel`.
        let (client_addr, translator) = door.in_front_of(addr).await;
        let client = if tls {
            // `http://` and a socket address always make a valid URI.
            let endpoint = Channel::from_shared(format!("http://{addr}")).expect("a valid URI");
            ClaimServiceClient::new(endpoint.connect_lazy())
        } else {
            connect(client_addr).await
        };
        TestApp {
            addr,
            client_addr,
            health_addr,
            metrics_addr,
            console_addr,
            janitor,
            policies,
            client,
            clock,
            seal,
            database_url,
            shutdown: Some(tx),
            handle: Some(handle),
            _dir: dir,
            _translator: translator,
        }
    }
}
