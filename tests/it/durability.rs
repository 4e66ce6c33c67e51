//! Durable before answered (docs/DESIGN.md §3.2): every receipt claimd acknowledged survives a
//! `kill -9` of the claimd process, on both stores. The real binary serves a fresh
//! database, answers many Claims, Completes, Retries, Quarantines and Heartbeats, is killed
//! with SIGKILL right after its last answer, and is started again on the same database.

use crate::common::app::{Backend, connect};
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{self, Decision, State};
use futures::future::join_all;
use tonic::transport::Channel;

const NS: &str = "durability";
const KEYS: usize = 50;
const HOUR: prost_types::Duration = prost_types::Duration {
    seconds: 3600,
    nanos: 0,
};

/// What happened to a key before the kill, and what claimd answered last about it.
struct Acknowledged {
    key: String,
    token: String,
    receipt: pb::Receipt,
    expected_state: State,
}

fn key(i: usize) -> String {
    format!("evt-{i:03}")
}

fn fingerprint(i: usize) -> Vec<u8> {
    format!("sha256:{i}").into_bytes()
}

/// Starts the real binary on `url` (the same seal key every time) and connects a client.
pub(crate) async fn start(url: &str) -> (Claimd, ClaimServiceClient<Channel>) {
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--database-url",
        url,
    ]);
    // Every restart must read what the one before sealed: the same key each time.
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    let server = Claimd::start(cmd, addr).await;
    (server, connect(addr).await)
}

async fn claim(client: &ClaimServiceClient<Channel>, i: usize) -> pb::ClaimResponse {
    let request = pb::ClaimRequest {
        namespace: NS.into(),
        key: key(i),
        fingerprint: fingerprint(i),
        lease_ttl: Some(HOUR),
        recovery_payload: format!("redo {i}").into_bytes(),
        delivery_attempt: 0,
        wait: None,
    };
    let response = client.clone().claim(request).await;
    response.expect("Claim answers").into_inner()
}

/// Claims key `i`, then acts on it according to its group; returns the last answer.
async fn acknowledge(client: ClaimServiceClient<Channel>, i: usize) -> Acknowledged {
    let claimed = claim(&client, i).await;
    assert_eq!(
        claimed.decision(),
        Decision::Claimed,
        "first Claim of {}",
        key(i)
    );
    let token = claimed.claim_token.clone();
    let (ns, k, t) = (NS.to_owned(), key(i), token.clone());
    let mut c = client.clone();
    let (receipt, expected_state) = match i {
        0..25 => {
            let response = format!("{{\"reply\":{i}}}").into_bytes();
            let request = pb::CompleteRequest {
                namespace: ns,
                key: k,
                claim_token: t,
                response,
            };
            let answer = c.complete(request).await.expect("Complete answers");
            (answer.into_inner().receipt, State::Completed)
        }
        25..30 => {
            let request = pb::RetryRequest {
                namespace: ns,
                key: k,
                claim_token: t,
                error: format!("upstream 503 for {i}"),
                retry_after: Some(HOUR),
                count_attempt: None,
            };
            let answer = c.retry(request).await.expect("Retry answers");
            (answer.into_inner().receipt, State::RetryWait)
        }
        30..33 => {
            let error = format!("poison event {i}");
            let request = pb::QuarantineRequest {
                namespace: ns,
                key: k,
                claim_token: t,
                error,
            };
            let answer = c.quarantine(request).await.expect("Quarantine answers");
            (answer.into_inner().receipt, State::Quarantined)
        }
        33..40 => {
            let request = pb::HeartbeatRequest {
                namespace: ns,
                key: k,
                claim_token: t,
                lease_ttl: Some(HOUR),
                checkpoint: Some(format!("step {i}").into_bytes()),
            };
            let answer = c.heartbeat(request).await.expect("Heartbeat answers");
            (answer.into_inner().receipt, State::Processing)
        }
        _ => (claimed.receipt, State::Processing),
    };
    let receipt = receipt.expect("every answer carries the receipt");
    assert_eq!(
        receipt.state(),
        expected_state,
        "acknowledged state of {}",
        key(i)
    );
    Acknowledged {
        key: key(i),
        token,
        receipt,
        expected_state,
    }
}

/// Timestamps as stored: both databases keep microseconds. (The SQLite store answers with
/// the nanoseconds of its clock reading, which it does not store; Postgres answers with what
/// it stored. The acknowledged instant is the same to the microsecond.)
fn to_micros(mut r: pb::Receipt) -> pb::Receipt {
    for t in [
        &mut r.lease_expires_at,
        &mut r.next_attempt_at,
        &mut r.created_at,
        &mut r.updated_at,
        &mut r.completed_at,
    ]
    .into_iter()
    .flatten()
    {
        t.nanos -= t.nanos % 1000;
    }
    r
}

async fn every_acknowledged_receipt_survives_kill_9_of_claimd(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let (server, client) = start(&url).await;
    let first_pid = server.pid();

    let acknowledged = join_all((0..KEYS).map(|i| acknowledge(client.clone(), i))).await;
    server.kill_9();
    drop(client);

    // Restarting on the same database is not refused: the lock died with the process.
    let (server, client) = start(&url).await;
    if let Some(db) = url.strip_prefix("sqlite://") {
        let holder = std::fs::read_to_string(format!("{db}.lock")).expect("lock file");
        assert_eq!(
            holder.trim(),
            server.pid().to_string(),
            "lock file names the new process"
        );
        assert_ne!(server.pid(), first_pid);
    }

    for ack in &acknowledged {
        let request = pb::GetRequest {
            namespace: NS.into(),
            key: ack.key.clone(),
        };
        let got = client.clone().get(request).await;
        let got = got.unwrap_or_else(|s| panic!("{} lost after kill -9: {s:?}", ack.key));
        let got = got.into_inner().receipt.expect("Get returns a receipt");
        assert_eq!(got.state(), ack.expected_state, "state of {}", ack.key);
        assert_eq!(
            got,
            to_micros(ack.receipt.clone()),
            "receipt of {}",
            ack.key
        );
    }

    // Duplicates after the restart get the stored answers.
    for (i, ack) in acknowledged.iter().enumerate() {
        let again = claim(&client, i).await;
        let receipt = again.receipt.clone().expect("Claim returns the receipt");
        let expected = match ack.expected_state {
            State::Completed => Decision::Completed,
            State::RetryWait => Decision::RetryScheduled,
            State::Quarantined => Decision::Quarantined,
            _ => Decision::InFlight,
        };
        assert_eq!(again.decision(), expected, "duplicate Claim of {}", ack.key);
        assert!(again.claim_token.is_empty(), "a duplicate gets no token");
        assert_eq!(
            receipt.attempt, ack.receipt.attempt,
            "attempt of {}",
            ack.key
        );
        if expected == Decision::Completed {
            assert_eq!(receipt.response, format!("{{\"reply\":{i}}}").into_bytes());
        }
    }

    // The holder of a lease acknowledged before the kill still holds it afterwards.
    let holder = &acknowledged[KEYS - 1];
    let request = pb::CompleteRequest {
        namespace: NS.into(),
        key: holder.key.clone(),
        claim_token: holder.token.clone(),
        response: b"late but valid".to_vec(),
    };
    let done = client
        .clone()
        .complete(request)
        .await
        .expect("the token survived");
    let done = done.into_inner().receipt.expect("receipt");
    assert_eq!(done.state(), State::Completed);

    let status = server.terminate().await;
    assert!(
        status.success(),
        "claimd did not exit 0 on SIGTERM: {status}"
    );
}

conformance!(every_acknowledged_receipt_survives_kill_9_of_claimd);
