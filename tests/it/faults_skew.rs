//! The fault matrix's clock-skew row (docs/RELIABILITY.md): claimd replicas whose wall
//! clocks are minutes apart, on one PostgreSQL. The database's clock decides every lease,
//! backoff and deadline (docs/DESIGN.md §4.1), so the replicas must answer alike and meet
//! their callers' deadlines whatever their own clocks say. The skew is real: each replica
//! runs under libfaketime (`LD_PRELOAD`), which moves its wall clock and leaves its
//! monotonic clock alone, as NTP trouble would.

use crate::common::process::{Claimd, free_addr};
use crate::common::receipt_ops::{FP, NS, claim_request, secs};
use crate::faults::{Db, SECOND, replica_command, under};
use crate::history::workload::{self, channel};
use claimd::pb::{
    self, CompleteRequest, Decision, GetRequest, HeartbeatRequest, claim_service_client,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

/// Where Debian's libfaketime puts its multi-threaded preload library.
fn libfaketime() -> PathBuf {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu/faketime",
        "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib/faketime",
    ];
    dirs.iter()
        .map(|d| PathBuf::from(d).join("libfaketimeMT.so.1"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("the clock-skew tests need libfaketime (Debian: libfaketime)"))
}

/// A claimd on `addr` serving `url` with its wall clock moved by `offset` (libfaketime's
/// syntax: "-300s" is five minutes behind).
async fn skewed(url: &str, addr: SocketAddr, offset: &str) -> Claimd {
    let mut cmd = replica_command(Db::Postgres(url), addr);
    cmd.env("LD_PRELOAD", libfaketime())
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    Claimd::start(cmd, addr).await
}

/// Three replicas of `url`: on time, five minutes behind and five minutes ahead.
async fn three_replicas(url: &str) -> ([Claimd; 3], [SocketAddr; 3]) {
    let addrs = [free_addr(), free_addr(), free_addr()];
    let servers = [
        skewed(url, addrs[0], "+0s").await,
        skewed(url, addrs[1], "-300s").await,
        skewed(url, addrs[2], "+300s").await,
    ];
    (servers, addrs)
}

type Client = claim_service_client::ClaimServiceClient<Channel>;

/// A client of `addr` (its own patience 10 s).
fn client(addr: SocketAddr) -> Client {
    channel(addr, 10 * SECOND)
}

/// `message` with a deadline of 5 s (`grpc-timeout`), so claimd checks that each write is
/// made in time.
fn timed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(5 * SECOND);
    request
}

/// The receipt of `key` as `client`'s replica reads it.
async fn get(client: &mut Client, key: &str) -> pb::Receipt {
    let request = GetRequest {
        namespace: NS.into(),
        key: key.into(),
    };
    let answer = client.get(timed(request)).await.expect("Get answers");
    answer.into_inner().receipt.expect("the receipt is there")
}

/// Claims `key` with a 2 s lease through `client`; the decision, attempt and token.
async fn claim(client: &mut Client, key: &str) -> (Decision, u32, String) {
    let request = pb::ClaimRequest {
        lease_ttl: secs(2),
        ..claim_request(key, FP)
    };
    let answer = client.claim(timed(request)).await;
    let answer = answer
        .expect("Claim answers, within its deadline")
        .into_inner();
    let receipt = answer.receipt.clone().expect("a receipt");
    (answer.decision(), receipt.attempt, answer.claim_token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_replicas_five_minutes_apart_decide_alike_and_meet_their_deadlines() {
    let url = crate::common::pg::fresh_database().await;
    let (_servers, [on_time, behind, ahead]) = three_replicas(&url).await;
    let (mut on_time, mut behind, mut ahead) = (client(on_time), client(behind), client(ahead));

    // A write with a deadline through the replica that is behind is made, not refused as late.
    let (decision, attempt, first) = claim(&mut behind, "Ev1").await;
    assert_eq!((decision, attempt), (Decision::Claimed, 1));
    // The replica that is ahead does not think the 2 s lease long over.
    let (decision, ..) = claim(&mut ahead, "Ev1").await;
    assert_eq!(decision, Decision::InFlight, "ahead: the lease is held");
    let heartbeat = HeartbeatRequest {
        namespace: NS.into(),
        key: "Ev1".into(),
        claim_token: first.clone(),
        lease_ttl: secs(2),
        ..Default::default()
    };
    behind
        .heartbeat(timed(heartbeat))
        .await
        .expect("behind: the holder's heartbeat is taken");
    // All three read the same lease: the database's clock set it.
    let leases = [
        get(&mut on_time, "Ev1").await.lease_expires_at,
        get(&mut behind, "Ev1").await.lease_expires_at,
        get(&mut ahead, "Ev1").await.lease_expires_at,
    ];
    assert!(
        leases[0].is_some() && leases.iter().all(|l| *l == leases[0]),
        "{leases:?}"
    );

    // Once the lease is over by the database's clock, the replica that is behind (by its own
    // clock the lease has minutes to go) takes over, and the old holder is fenced.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (decision, attempt, second) = claim(&mut behind, "Ev1").await;
    assert_eq!(
        (decision, attempt),
        (Decision::Claimed, 2),
        "behind: takeover"
    );
    let complete = |token: &str| CompleteRequest {
        namespace: NS.into(),
        key: "Ev1".into(),
        claim_token: token.into(),
        response: b"ok".to_vec(),
    };
    let stale = ahead.complete(timed(complete(&first))).await.map(drop);
    assert_eq!(
        stale.map_err(|s| s.code()),
        Err(Code::Aborted),
        "ahead: fenced"
    );
    behind
        .complete(timed(complete(&second)))
        .await
        .expect("behind: the new holder completes");
    for (name, client) in [
        ("on time", &mut on_time),
        ("behind", &mut behind),
        ("ahead", &mut ahead),
    ] {
        let (decision, attempt, _) = claim(client, "Ev1").await;
        assert_eq!((decision, attempt), (Decision::Completed, 2), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_history_over_replicas_minutes_apart_passes_the_checker() {
    let url = crate::common::pg::fresh_database().await;
    let (_servers, [on_time, behind, ahead]) = three_replicas(&url).await;
    // Half the callers give each call a deadline of their own, so writes are checked for time.
    let load = workload::Workload {
        cancel_within: Some(3 * SECOND),
        ..Default::default()
    };
    let verdict = under(load, &[on_time, behind, ahead], 4 * SECOND, async {}).await;
    verdict.assert_valid();
}
