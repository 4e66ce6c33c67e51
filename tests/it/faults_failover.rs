//! The fault matrix's failover rows (docs/RELIABILITY.md): a primary `PrivateCluster` with a
//! streaming-replication standby, claimd reaching the database through a TCP proxy that
//! stands in for the virtual IP or pooler an operator moves at failover (sqlx 0.9 takes one
//! host per URL: no libpq multi-host list with `target_session_attrs`). Mid-load the
//! primary is killed with `kill -9`, the standby promoted and the proxy switched to it; the
//! history is then checked against the final read from the promoted standby.
//!
//! With synchronous replication every acknowledged answer is there; with asynchronous
//! replication and a standby that fell behind, acknowledged receipts are lost, and the
//! checker must say so. The clusters run with `fsync=off`: a `kill -9` of PostgreSQL loses
//! nothing the OS has cached, so what is lost here is what replication never carried.

use crate::common::pg::PrivateCluster;
use crate::common::process::free_addr;
use crate::common::proxy::Proxy;
use crate::faults::{SECOND, under_load};
use crate::faults_network::{replica_with, through};
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

/// The standby's `application_name`, which `synchronous_standby_names` names.
pub(crate) const STANDBY: &str = "claimd_standby";

/// A primary started with `settings` and a standby of it whose WAL receiver reaches the
/// primary through `replication` (a proxy in front of the primary).
pub(crate) async fn pair(
    settings: &'static [&'static str],
) -> (PrivateCluster, PrivateCluster, Proxy) {
    let primary = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(settings))
        .await
        .expect("the primary starts");
    let replication = Proxy::start(primary.tcp_addr()).await;
    let via = replication.addr();
    let (primary, standby) = tokio::task::spawn_blocking(move || {
        let standby = PrivateCluster::standby_of(&primary, STANDBY, via);
        (primary, standby)
    })
    .await
    .expect("the standby starts");
    (primary, standby, replication)
}

/// Waits until `standby` has replayed everything `primary` wrote so far (30 s at most).
async fn caught_up(primary: &PrivateCluster, standby: &PrivateCluster) {
    let mut p = PgConnection::connect(&primary.url("postgres"))
        .await
        .expect("the primary answers");
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut p)
        .await
        .expect("the primary's WAL position");
    let mut s = PgConnection::connect(&standby.url("postgres"))
        .await
        .expect("the standby answers");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let done: Option<bool> =
            sqlx::query_scalar("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn")
                .bind(&lsn)
                .fetch_one(&mut s)
                .await
                .expect("the standby's replay position");
        if done == Some(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never replayed {lsn}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How the primary replicates to the standby (`pg_stat_replication.sync_state`).
pub(crate) async fn sync_state(primary: &PrivateCluster) -> Option<String> {
    let mut p = PgConnection::connect(&primary.url("postgres"))
        .await
        .expect("the primary answers");
    sqlx::query_scalar("SELECT sync_state FROM pg_stat_replication WHERE application_name = $1")
        .bind(STANDBY)
        .fetch_optional(&mut p)
        .await
        .expect("pg_stat_replication")
}

/// Kills the primary (`kill -9`), promotes the standby and points `proxy` at it.
async fn fail_over(primary: &mut Option<PrivateCluster>, standby: &PrivateCluster, proxy: &Proxy) {
    let mut old = primary.take().expect("the primary runs until the failover");
    *primary = Some(
        tokio::task::spawn_blocking(move || {
            old.kill_9();
            old
        })
        .await
        .expect("the primary was killed"),
    );
    standby.promote().await;
    proxy.switch_upstream(standby.tcp_addr());
    // Connections to the dead primary ended with it; none may linger at the proxy.
    proxy.drop_connections();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_failover_to_a_synchronous_standby_loses_nothing_acknowledged() {
    let settings = &["synchronous_standby_names=claimd_standby"];
    let (primary, standby, _replication) = pair(settings).await;
    let proxy = Proxy::start(primary.tcp_addr()).await;
    // Committed only once the standby has it: the standby is streaming.
    let url = through(&proxy, &primary.create_database().await);
    let addr = free_addr();
    let _server = replica_with(&url, addr, &["--db-timeout", "2s"]).await;
    assert_eq!(sync_state(&primary).await.as_deref(), Some("sync"));
    let mut primary = Some(primary);
    let verdict = under_load(&[addr], 2 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        fail_over(&mut primary, &standby, &proxy).await;
    })
    .await;
    verdict.assert_valid();
    assert!(
        verdict.unknown > 0,
        "the failover cut no call short: {verdict:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_failover_to_an_asynchronous_standby_that_lags_loses_acknowledged_receipts() {
    let (primary, standby, replication) = pair(&[]).await;
    let proxy = Proxy::start(primary.tcp_addr()).await;
    let url = through(&proxy, &primary.create_database().await);
    let addr = free_addr();
    let _server = replica_with(&url, addr, &["--db-timeout", "2s"]).await;
    // The schema is on the standby; from now on nothing more reaches it, and the primary
    // acknowledges every commit regardless (no synchronous_standby_names).
    caught_up(&primary, &standby).await;
    assert_eq!(sync_state(&primary).await.as_deref(), Some("async"));
    replication.blackhole();
    let mut primary = Some(primary);
    let verdict = under_load(&[addr], 2 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        fail_over(&mut primary, &standby, &proxy).await;
    })
    .await;
    let lost = verdict
        .violations
        .iter()
        .filter(|v| v.starts_with("durability:"))
        .count();
    assert!(
        lost > 0,
        "the checker found no acknowledged receipt lost with asynchronous replication: \
         {verdict:?}"
    );
}

/// Issue 34: a Claim whose commit waits for the synchronous standby longer than most of its
/// lease (right after a failover the new leader has no standby yet; here the replication
/// link is cut for 1.5 s under a 1 s lease) is answered with a lease that has not ended:
/// claimd claims again, the same attempt on its own token, before it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_claim_whose_commit_outlasts_its_lease_is_answered_with_a_live_lease() {
    let settings = &["synchronous_standby_names=claimd_standby"];
    let (primary, _standby, replication) = pair(settings).await;
    let url = primary.create_database().await;
    let addr = free_addr();
    let _server = replica_with(&url, addr, &["--db-timeout", "5s"]).await;
    assert_eq!(sync_state(&primary).await.as_deref(), Some("sync"));
    replication.blackhole();
    let claim = tokio::spawn(async move {
        let mut client = crate::history::workload::channel(addr, Duration::from_secs(10));
        let request = claimd::pb::ClaimRequest {
            namespace: "slow".into(),
            key: "commit".into(),
            fingerprint: b"fp".to_vec(),
            lease_ttl: Some(prost_types::Duration {
                seconds: 1,
                nanos: 0,
            }),
            ..Default::default()
        };
        client.claim(request).await
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    replication.normal();
    let answer = claim
        .await
        .expect("the call ran")
        .expect("answered")
        .into_inner();
    let answered_at = std::time::SystemTime::now();
    assert_eq!(answer.decision(), claimd::pb::Decision::Claimed);
    let receipt = answer.receipt.expect("a receipt");
    assert_eq!(receipt.attempt, 1, "the same attempt, with a fresh lease");
    let end = receipt.lease_expires_at.expect("a lease");
    let end = std::time::UNIX_EPOCH + Duration::new(end.seconds as u64, end.nanos as u32);
    assert!(
        end > answered_at,
        "the lease ended {:?} before the answer arrived",
        answered_at.duration_since(end).unwrap_or_default()
    );
}
