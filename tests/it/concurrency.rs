//! Exactly one winner (docs/DESIGN.md §3.1): many concurrent Claims for one key, over several client
//! connections, through one claimd and through two claimd processes on one database.

use crate::common::app::{Backend, TestApp, connect, decision};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, ClaimResponse, CompleteRequest, Decision, GetRequest, State};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;
use tonic::transport::Channel;

type Client = ClaimServiceClient<Channel>;

const CALLERS: usize = 64;
const CHANNELS: usize = 8;
const KEYS: usize = 10;
const NS: &str = "slack-events";
const FP: &[u8] = b"sha256-of-the-body";

fn claim_request(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: NS.into(),
        key: key.into(),
        fingerprint: FP.to_vec(),
        lease_ttl: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        recovery_payload: b"the webhook body".to_vec(),
        ..Default::default()
    }
}

/// `CALLERS` tasks, spread round-robin over `clients`, released together by a barrier, each
/// sending one Claim for `key`. Every call must succeed: decisions are answers, not errors.
async fn race(clients: &[Client], key: &str) -> Vec<ClaimResponse> {
    let barrier = Arc::new(Barrier::new(CALLERS));
    let tasks: Vec<_> = (0..CALLERS)
        .map(|i| {
            let mut client = clients[i % clients.len()].clone();
            let barrier = barrier.clone();
            let request = claim_request(key);
            tokio::spawn(async move {
                barrier.wait().await;
                client.claim(request).await
            })
        })
        .collect();
    let mut responses = Vec::with_capacity(CALLERS);
    for (i, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("caller task");
        let response =
            result.unwrap_or_else(|s| panic!("caller {i} on {key:?} got an error: {s:?}"));
        responses.push(response.into_inner());
    }
    responses
}

/// Exactly one CLAIMED with a token and the expected attempt; everyone else IN_FLIGHT on the
/// same attempt without a token. Returns the winner's token.
fn one_winner(key: &str, responses: &[ClaimResponse], attempt: u32) -> String {
    let winners: Vec<_> = responses
        .iter()
        .filter(|r| decision(r) == Decision::Claimed)
        .collect();
    assert_eq!(winners.len(), 1, "{key}: winners {winners:#?}");
    let winner = winners[0];
    assert!(!winner.claim_token.is_empty(), "{key}: winner has a token");
    let receipt = winner.receipt.as_ref().expect("receipt");
    assert_eq!(
        (receipt.state(), receipt.attempt),
        (State::Processing, attempt)
    );
    for loser in responses
        .iter()
        .filter(|r| decision(r) != Decision::Claimed)
    {
        assert_eq!(decision(loser), Decision::InFlight, "{key}: {loser:#?}");
        assert!(loser.claim_token.is_empty(), "{key}: a loser got a token");
        let receipt = loser.receipt.as_ref().expect("receipt");
        assert_eq!(
            (receipt.state(), receipt.attempt),
            (State::Processing, attempt)
        );
        assert!(
            receipt.lease_expires_at.is_some(),
            "{key}: IN_FLIGHT says until when"
        );
    }
    winner.claim_token.clone()
}

/// The winner's token completes the receipt, and Get then shows it COMPLETED at `attempt`.
async fn winner_completes(client: &Client, key: &str, token: String, attempt: u32) {
    let done = client
        .clone()
        .complete(CompleteRequest {
            namespace: NS.into(),
            key: key.into(),
            claim_token: token,
            response: b"200 ok".to_vec(),
        })
        .await
        .unwrap_or_else(|s| panic!("{key}: the winner's Complete failed: {s:?}"))
        .into_inner();
    assert_eq!(done.receipt.unwrap().state(), State::Completed);
    let got = client
        .clone()
        .get(GetRequest {
            namespace: NS.into(),
            key: key.into(),
        })
        .await
        .expect("Get")
        .into_inner()
        .receipt
        .unwrap();
    assert_eq!((got.state(), got.attempt), (State::Completed, attempt));
}

async fn clients_of(addr: SocketAddr, n: usize) -> Vec<Client> {
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        clients.push(connect(addr).await);
    }
    clients
}

async fn sixty_four_concurrent_claims_for_a_new_key_have_exactly_one_winner(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let clients = clients_of(app.addr, CHANNELS).await;
    for k in 0..KEYS {
        let key = format!("Ev-new-{k}");
        let responses = race(&clients, &key).await;
        let token = one_winner(&key, &responses, 1);
        winner_completes(&clients[k % CHANNELS], &key, token, 1).await;
    }
    app.shutdown().await;
}

async fn sixty_four_concurrent_claims_after_the_lease_expired_have_exactly_one_taker(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let clients = clients_of(app.addr, CHANNELS).await;
    let mut first_tokens = Vec::new();
    for k in 0..KEYS {
        let key = format!("Ev-expired-{k}");
        let first = clients[0].clone().claim(claim_request(&key)).await;
        let first = first.expect("first Claim").into_inner();
        assert_eq!(decision(&first), Decision::Claimed);
        first_tokens.push(first.claim_token);
    }
    app.advance(Duration::from_secs(31));
    for (k, old_token) in first_tokens.into_iter().enumerate() {
        let key = format!("Ev-expired-{k}");
        let responses = race(&clients, &key).await;
        let token = one_winner(&key, &responses, 2);
        assert_ne!(token, old_token, "{key}: a takeover mints a new token");
        let winner = responses.iter().find(|r| decision(r) == Decision::Claimed);
        let payload = &winner.unwrap().receipt.as_ref().unwrap().recovery_payload;
        assert_eq!(
            payload, b"the webhook body",
            "{key}: the taker gets the payload"
        );
        // The holder that was taken over is fenced off.
        let stale = clients[1]
            .clone()
            .complete(CompleteRequest {
                namespace: NS.into(),
                key: key.clone(),
                claim_token: old_token,
                response: b"late".to_vec(),
            })
            .await
            .expect_err("the old holder's Complete is refused");
        assert_eq!(stale.code(), tonic::Code::Aborted, "{key}: {stale:?}");
        winner_completes(&clients[k % CHANNELS], &key, token, 2).await;
    }
    app.shutdown().await;
}

/// One claimd process: the same races against each store.
macro_rules! on_each_store {
    ($($name:ident),+) => {
        mod postgres {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                super::$name(super::Backend::Postgres).await
            }
        )+}
        mod sqlite {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                super::$name(super::Backend::Sqlite).await
            }
        )+}
    };
}

on_each_store!(
    sixty_four_concurrent_claims_for_a_new_key_have_exactly_one_winner,
    sixty_four_concurrent_claims_after_the_lease_expired_have_exactly_one_taker
);

/// A `claimd serve` child process, killed and reaped when dropped.
struct Replica {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

fn start_replica(database_url: &str) -> Replica {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let log = tempfile::NamedTempFile::new().expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_claimd"))
        .args(["serve", "--listen", &addr.to_string()])
        .args(["--database-url", database_url])
        // Two replicas on one machine cannot share the default metrics port.
        .args(["--metrics-listen", "127.0.0.1:0"])
        // Both replicas seal and open each other's rows with one key.
        .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log file"))
        .spawn()
        .expect("claimd starts");
    Replica { child, addr, log }
}

/// Waits until the replica answers a Get over gRPC (NOT_FOUND is an answer).
async fn wait_ready(replica: &mut Replica) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    let endpoint = format!("http://{}", replica.addr);
    loop {
        if let Ok(Some(status)) = replica.child.try_wait() {
            let log = std::fs::read_to_string(replica.log.path()).unwrap_or_default();
            panic!("claimd on {} exited ({status}):\n{log}", replica.addr);
        }
        if let Ok(mut client) = ClaimServiceClient::connect(endpoint.clone()).await {
            let probe = GetRequest {
                namespace: NS.into(),
                key: "readiness-probe".into(),
            };
            match client.get(probe).await {
                Err(s) if s.code() == tonic::Code::NotFound => return client,
                Ok(_) => return client,
                Err(_) => {}
            }
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(replica.log.path()).unwrap_or_default();
            panic!("claimd on {} not ready within 20 s:\n{log}", replica.addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_claimd_processes_on_one_database_have_exactly_one_winner_per_key() {
    let database_url = crate::common::pg::fresh_database().await;
    // Both start at once, as replicas do, and both migrate the same fresh database.
    let mut a = start_replica(&database_url);
    let mut b = start_replica(&database_url);
    wait_ready(&mut a).await;
    wait_ready(&mut b).await;
    // Alternate between the processes so the 64 callers are split 32/32.
    let mut clients = Vec::with_capacity(CHANNELS);
    for i in 0..CHANNELS {
        let replica = if i % 2 == 0 { &a } else { &b };
        clients.push(connect(replica.addr).await);
    }
    for k in 0..KEYS {
        let key = format!("Ev-replicas-{k}");
        let responses = race(&clients, &key).await;
        let token = one_winner(&key, &responses, 1);
        // Completed through one process, seen as done through the other.
        winner_completes(&clients[k % 2], &key, token, 1).await;
        let replay = clients[(k + 1) % 2]
            .clone()
            .claim(claim_request(&key))
            .await;
        let replay = replay.expect("replay Claim").into_inner();
        assert_eq!(decision(&replay), Decision::Completed, "{key}");
        assert_eq!(replay.receipt.unwrap().response, b"200 ok");
    }
    drop(clients);
    drop((a, b));
}
