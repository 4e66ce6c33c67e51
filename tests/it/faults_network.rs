//! The fault matrix's network rows (docs/RELIABILITY.md): claimd reaches PostgreSQL through
//! a TCP proxy of the test's (`common::proxy`) that drops every connection, delays every
//! chunk or blackholes the link, under concurrent load from the history workload, and the
//! history is checked afterwards (`history::checker`). The private clusters run with
//! `fsync=off`: these faults kill no PostgreSQL process, and a `kill -9` (failover rows, in
//! `faults_failover`) loses nothing the OS has cached either.

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, claimd, free_addr};
use crate::common::proxy::Proxy;
use crate::faults::{SECOND, under_load};
use claimd::pb;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The database URL of `url`'s database through `proxy` (TCP, 127.0.0.1).
pub(crate) fn through(proxy: &Proxy, url: &str) -> String {
    let path = url.split('?').next().unwrap_or(url);
    let db = path.rsplit('/').next().unwrap_or_default();
    format!("postgres://postgres@127.0.0.1:{}/{db}", proxy.port())
}

/// A claimd on `addr` serving `url`, with `flags` added.
pub(crate) async fn replica_with(url: &str, addr: SocketAddr, flags: &[&str]) -> Claimd {
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--database-url",
        url,
    ]);
    cmd.args(flags);
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    Claimd::start(cmd, addr).await
}

/// A cluster on TCP, a proxy in front of it and a claimd through the proxy with `flags`.
pub(crate) async fn behind_proxy(flags: &[&str]) -> (PrivateCluster, Proxy, SocketAddr, Claimd) {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let url = through(&proxy, &cluster.create_database().await);
    let addr = free_addr();
    let server = replica_with(&url, addr, flags).await;
    (cluster, proxy, addr, server)
}

/// A Claim on a key of its own with no deadline of the caller's: the status it ended with.
async fn claim_once(addr: SocketAddr, key: &str) -> Result<(), Code> {
    let mut client = crate::history::workload::channel(addr, Duration::from_secs(3600));
    let request = pb::ClaimRequest {
        namespace: "probe".into(),
        key: key.into(),
        ..Default::default()
    };
    client.claim(request).await.map(drop).map_err(|s| s.code())
}

/// Waits until a Claim through `addr` is answered (30 s at most): claimd came back by
/// itself. A waiting loop, not a timing.
async fn serves_again(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    loop {
        n += 1;
        match claim_once(addr, &format!("after-{n}")).await {
            Ok(()) => return,
            Err(code) => assert!(
                Instant::now() < deadline,
                "claimd did not serve again after the fault: {code:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The health status reported for `""` (or the failing code).
async fn health(addr: SocketAddr) -> Result<ServingStatus, Code> {
    // A loopback http URL is always a valid endpoint.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"));
    let endpoint = endpoint.expect("valid endpoint");
    let mut client = HealthClient::new(endpoint.timeout(Duration::from_secs(5)).connect_lazy());
    let request = HealthCheckRequest { service: "".into() };
    match client.check(request).await {
        Ok(r) => Ok(r.into_inner().status()),
        Err(s) => Err(s.code()),
    }
}

/// Polls health until it reports `want` (15 s at most).
pub(crate) async fn health_becomes(addr: SocketAddr, want: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = health(addr).await;
        if now == Ok(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "health never became {want:?}; last {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_dropped_database_connections_lose_nothing_acknowledged_and_claimd_recovers() {
    let (_cluster, proxy, addr, _server) = behind_proxy(&["--db-timeout", "2s"]).await;
    let verdict = under_load(&[addr], 2 * SECOND, async {
        for _ in 0..2 {
            tokio::time::sleep(3 * SECOND / 2).await;
            proxy.drop_connections();
        }
    })
    .await;
    verdict.assert_valid();
    assert!(
        verdict.unknown > 0,
        "the drops cut no call short: {verdict:?}"
    );
    serves_again(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_slow_database_link_loses_nothing_acknowledged() {
    let (_cluster, proxy, addr, _server) = behind_proxy(&["--db-timeout", "2s"]).await;
    let verdict = under_load(&[addr], 2 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        proxy.delay(Duration::from_millis(50));
        tokio::time::sleep(2 * SECOND).await;
        proxy.normal();
    })
    .await;
    verdict.assert_valid();
    serves_again(addr).await;
}

/// `--db-timeout` of the blackhole test.
const DB_TIMEOUT: Duration = Duration::from_secs(1);
/// How long past `--db-timeout` a call may still be pending before claimd counts as hung: a
/// liveness bound, not a speed measurement.
const MARGIN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_claimd_answers_unavailable_within_the_db_timeout_when_the_database_blackholes() {
    let flags = ["--db-timeout", "1s", "--health-interval", "200ms"];
    let (_cluster, proxy, addr, _server) = behind_proxy(&flags).await;
    health_becomes(addr, ServingStatus::Serving).await;
    let verdict = under_load(&[addr], 2 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        proxy.blackhole();
        // Callers without a deadline of their own: claimd alone must end their calls.
        let calls = (0..8).map(|i| async move {
            let answered =
                tokio::time::timeout(DB_TIMEOUT + MARGIN, claim_once(addr, &format!("bh-{i}")))
                    .await;
            answered.unwrap_or_else(|_| {
                panic!("a call was still pending {MARGIN:?} past --db-timeout: claimd hangs")
            })
        });
        for answer in futures::future::join_all(calls).await {
            assert_eq!(
                answer,
                Err(Code::Unavailable),
                "a call during the blackhole"
            );
        }
        health_becomes(addr, ServingStatus::NotServing).await;
        proxy.normal();
        health_becomes(addr, ServingStatus::Serving).await;
    })
    .await;
    verdict.assert_valid();
    serves_again(addr).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_list_and_list_orphaned_answer_unavailable_within_the_db_timeout_when_the_database_blackholes()
 {
    let flags = ["--db-timeout", "1s"];
    let (_cluster, proxy, addr, _server) = behind_proxy(&flags).await;
    claim_once(addr, "before")
        .await
        .expect("served before the blackhole");
    proxy.blackhole();
    // Calls without a deadline of their own: claimd alone must end them.
    let mut client = crate::history::workload::channel(addr, Duration::from_secs(3600));
    let list = pb::ListRequest {
        namespace: "probe".into(),
        ..Default::default()
    };
    let answer = tokio::time::timeout(DB_TIMEOUT + MARGIN, client.list(list)).await;
    let answer = answer.expect("List still pending past --db-timeout: claimd hangs");
    assert_eq!(
        answer.map(drop).map_err(|s| s.code()),
        Err(Code::Unavailable),
        "List"
    );
    let orphans = pb::ListOrphanedRequest::default();
    let answer = tokio::time::timeout(DB_TIMEOUT + MARGIN, client.list_orphaned(orphans)).await;
    let answer = answer.expect("ListOrphaned still pending past --db-timeout: claimd hangs");
    assert_eq!(
        answer.map(drop).map_err(|s| s.code()),
        Err(Code::Unavailable),
        "ListOrphaned"
    );
    proxy.normal();
    serves_again(addr).await;
}
