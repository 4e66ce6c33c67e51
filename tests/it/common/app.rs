//! [`TestApp`]: a real claimd on 127.0.0.1:0 over a fresh, migrated database (started by
//! [`TestApp::builder`], see [`super::spawn`]), with a connected gRPC client and the clock
//! offset the test moves time with; the [`Backend`] a test runs on (a store and a door);
//! small assertions on replies.

use super::door::{Door, Translator};
use super::pg;
use claimd::config::{Cli, Config};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{self, ClaimRequest, ClaimResponse, Decision};
use claimd::store::{self, Clock, Store};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::{Channel, ClientTlsConfig};

/// Which store a test runs against, and which door its client goes through: the
/// conformance suite runs every test on both stores, and its Connect modules again through
/// both Connect encodings ([`Door`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    /// Where the receipts live.
    pub store: StoreKind,
    /// How the test's clients reach the server.
    pub door: Door,
}

/// The two stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// A fresh database on the harness's PostgreSQL.
    Postgres,
    /// A fresh embedded database file in a temporary directory.
    Sqlite,
}

#[allow(non_upper_case_globals)]
impl Backend {
    /// A fresh PostgreSQL database, reached over gRPC.
    pub const Postgres: Backend = Backend {
        store: StoreKind::Postgres,
        door: Door::Grpc,
    };
    /// A fresh embedded database, reached over gRPC.
    pub const Sqlite: Backend = Backend {
        store: StoreKind::Sqlite,
        door: Door::Grpc,
    };

    /// The same store, its clients going through `door`.
    pub const fn through(self, door: Door) -> Backend {
        Backend { door, ..self }
    }

    /// A fresh, empty database of this kind: its URL and, for SQLite, the directory that
    /// holds it (deleted when dropped).
    pub async fn fresh_database(self) -> (String, Option<tempfile::TempDir>) {
        match self.store {
            StoreKind::Postgres => (pg::fresh_database().await, None),
            StoreKind::Sqlite => {
                // A test cannot run without somewhere to put its database.
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/claimd.db", dir.path().display());
                (url, Some(dir))
            }
        }
    }
}

/// A running claimd and what a test needs to talk to it.
pub struct TestApp {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Where the test's clients connect: `addr`, or the [`Translator`] in front of it when
    /// the test goes through a Connect door.
    pub client_addr: SocketAddr,
    /// Where the plaintext health-only listener is, if the configuration asked for one.
    pub health_addr: Option<SocketAddr>,
    /// Where Prometheus `/metrics` is served (port 0 unless the test turned metrics off).
    pub metrics_addr: Option<SocketAddr>,
    /// Where the operator's console is served, if the configuration turned it on
    /// (`config.console_listen`).
    pub console_addr: Option<SocketAddr>,
    /// A connected client.
    pub client: ClaimServiceClient<Channel>,
    /// The server's janitor (same store and policies): `run_once` prunes now.
    pub janitor: claimd::janitor::Janitor,
    /// The server's policies in force: `replace` applies new ones to the next call.
    pub policies: claimd::domain::PolicyHandle,
    /// The database clock offset shared with the server's store.
    pub clock: Clock,
    /// The server's sealer (by default one random key), for stores the test opens itself.
    pub seal: Arc<claimd::seal::Sealer>,
    /// The test's own database.
    pub database_url: String,
    pub(super) shutdown: Option<oneshot::Sender<()>>,
    pub(super) handle: Option<JoinHandle<anyhow::Result<()>>>,
    pub(super) _dir: Option<tempfile::TempDir>,
    pub(super) _translator: Option<Translator>,
}

/// The configuration `claimd --database-url URL` parses to (so every default is the real
/// one), payloads sealed under one throwaway key, and no file lock on the embedded database
/// (tests open their own stores beside the server's).
pub fn test_config(database_url: &str) -> Config {
    use clap::Parser;
    // Fixed, valid arguments; the throwaway key needs no file.
    let cli = Cli::try_parse_from(["claimd", "--database-url", database_url]).expect("args");
    let config = Config::from_args_sealed_by(&cli.serve, |_| Ok(throwaway_sealer()));
    let mut config = config.expect("the default configuration is valid");
    config.store.exclusive = false;
    config
}

/// Store options as the server's, for a store a test opens itself.
pub fn store_options() -> store::StoreOptions {
    test_config("sqlite://unused.db").store
}

/// A sealer with one random key that lives as long as the test.
pub fn throwaway_sealer() -> claimd::seal::Sealer {
    let key = claimd::seal::generate_key();
    // One freshly generated key is always a valid ring.
    let ring = claimd::seal::KeyRing::new(&[key]).expect("one random key");
    claimd::seal::Sealer::with_keys(ring, false)
}

/// A client connected to `addr`.
pub async fn connect(addr: SocketAddr) -> ClaimServiceClient<Channel> {
    let endpoint = format!("http://{addr}");
    // The server was bound before this is called, so connecting must work.
    ClaimServiceClient::connect(endpoint)
        .await
        .expect("client connects")
}

/// A channel to `addr` over TLS with `tls` (which names the server `localhost`); the error
/// if the TCP connection, the TLS handshake or the HTTP/2 handshake fails.
pub async fn tls_channel(
    addr: SocketAddr,
    tls: ClientTlsConfig,
) -> Result<Channel, tonic::transport::Error> {
    // `https://` and a socket address always make a valid URI.
    Channel::from_shared(format!("https://{addr}"))
        .expect("a valid URI")
        .tls_config(tls.domain_name("localhost"))?
        .connect()
        .await
}

impl TestApp {
    /// Moves the database clock forward without sleeping.
    pub fn advance(&self, by: Duration) {
        self.clock
            .advance(chrono::TimeDelta::from_std(by).unwrap_or(chrono::TimeDelta::MAX));
    }

    /// A second client, e.g. for another concurrent caller.
    pub async fn new_client(&self) -> ClaimServiceClient<Channel> {
        connect(self.client_addr).await
    }

    /// A store on the same database, clock and seal keys, to seed or inspect rows directly (e.g. for
    /// another tenant).
    pub async fn store(&self) -> Arc<dyn Store> {
        let options = store::StoreOptions {
            clock: self.clock.clone(),
            seal: self.seal.clone(),
            ..store_options()
        };
        // The server is using this database right now.
        store::open(&self.database_url, &options)
            .await
            .expect("store opens")
    }

    /// Creates an API key for `tenant` (limited to `namespaces` if given) in the test's
    /// database; returns its id and the key a caller sends.
    pub async fn create_key(&self, tenant: &str, namespaces: Option<&[&str]>) -> (String, String) {
        let generated = claimd::auth::generate_key();
        let new = claimd::store::keys::NewApiKey {
            id: generated.id.clone(),
            tenant: tenant.to_owned(),
            secret_hash: generated.secret_hash,
            label: Some("test".into()),
            namespaces: namespaces.map(|n| n.iter().map(|s| s.to_string()).collect()),
        };
        // The test's own database takes a new key.
        let store = self.store().await;
        store.create_key(&new).await.expect("key created");
        (generated.id, generated.key)
    }

    /// Claims `key` in `namespace` with fingerprint `fp` and a 30 s lease.
    pub async fn claim(&self, namespace: &str, key: &str, fp: &[u8]) -> ClaimResponse {
        let request = ClaimRequest {
            namespace: namespace.into(),
            key: key.into(),
            fingerprint: fp.to_vec(),
            lease_ttl: Some(prost_types::Duration {
                seconds: 30,
                nanos: 0,
            }),
            ..Default::default()
        };
        // Helpers are for the happy path; tests of errors call the client directly.
        self.client
            .clone()
            .claim(request)
            .await
            .expect("Claim succeeds")
            .into_inner()
    }

    /// The receipt as Get returns it.
    pub async fn get(&self, namespace: &str, key: &str) -> Result<pb::Receipt, tonic::Status> {
        let request = pb::GetRequest {
            namespace: namespace.into(),
            key: key.into(),
        };
        let response = self.client.clone().get(request).await?.into_inner();
        // Get always carries a receipt.
        Ok(response.receipt.expect("Get returns a receipt"))
    }

    /// Rows in the receipts table of the test's own database, whatever their tenant, read
    /// with the database's own driver (to prove a rejected call wrote nothing).
    pub async fn receipt_rows(&self) -> i64 {
        use sqlx::Connection;
        let count = "SELECT count(*) FROM receipts";
        // The test's database is up while its server runs.
        if self.database_url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&self.database_url)
                .await
                .expect("connect");
            sqlx::query_scalar(count)
                .fetch_one(&mut conn)
                .await
                .expect("count")
        } else {
            let mut conn = sqlx::PgConnection::connect(&self.database_url)
                .await
                .expect("connect");
            sqlx::query_scalar(count)
                .fetch_one(&mut conn)
                .await
                .expect("count")
        }
    }

    /// Stops the server and waits until it has exited.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }

    async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            // The server task returns its own error; a panic in it fails the test.
            handle
                .await
                .expect("server task")
                .expect("server exits cleanly");
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The decision of a Claim response as the enum.
pub fn decision(response: &ClaimResponse) -> Decision {
    Decision::try_from(response.decision).unwrap_or(Decision::Unspecified)
}

/// Asserts INVALID_ARGUMENT whose message and BadRequest details both name `field`.
pub fn assert_names_field(status: &tonic::Status, field: &str) {
    use tonic_types::StatusExt;
    assert_eq!(
        status.code(),
        tonic::Code::InvalidArgument,
        "{field}: {status:?}"
    );
    assert!(
        status.message().contains(field),
        "message {:?} does not name {field}",
        status.message()
    );
    let details = status.get_details_bad_request();
    let details = details.unwrap_or_else(|| panic!("{field}: no BadRequest details: {status:?}"));
    let fields: Vec<&str> = details
        .field_violations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    assert_eq!(fields, [field], "BadRequest field violations");
}

/// A protobuf Duration.
pub fn secs(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos })
}
