//! Issue 34 §1, §2: a PostgreSQL that accepts no writes — a standby claimd was pointed at,
//! a primary still being promoted, a database set read-only — through the real server and
//! a real cluster. A write it refuses (SQLSTATE 25006) is UNAVAILABLE saying so, never
//! INTERNAL; health reports NOT_SERVING while the database is read-only; and claimd
//! follows it back to writable without a restart, dropping the pooled connections that
//! reached it read-only.

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use crate::faults_network::{health_becomes, replica_with};
use crate::history::workload;
use claimd::pb;
use sqlx::{Connection, PgConnection};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

/// A Claim of a new key on `addr`.
async fn claim(addr: SocketAddr, key: &str) -> Result<pb::ClaimResponse, tonic::Status> {
    let mut client = workload::channel(addr, Duration::from_secs(10));
    let request = pb::ClaimRequest {
        namespace: "ha".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    client.claim(request).await.map(|r| r.into_inner())
}

/// The answer a read-only database gives a Claim: UNAVAILABLE, saying why.
fn refused_as_read_only(answer: Result<pb::ClaimResponse, tonic::Status>, server: &Claimd) {
    let status = answer.expect_err("a read-only database writes nothing");
    assert_eq!(
        status.code(),
        Code::Unavailable,
        "{status:?}\n{}",
        server.log()
    );
    assert!(status.message().contains("accepts no writes"), "{status:?}");
}

/// Claims until one is CLAIMED (15 s at most): claimd writes again.
async fn writes_again(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(15);
    for n in 0.. {
        match claim(addr, &format!("again-{n}")).await {
            Ok(r) if r.decision() == pb::Decision::Claimed => return,
            other => assert!(Instant::now() < deadline, "never wrote again: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The database a harness URL names (`postgres://…/NAME?host=…`).
fn database_name(url: &str) -> String {
    let path = url.split('?').next().unwrap_or(url);
    path.rsplit('/').next().expect("a database name").to_owned()
}

/// `sql` on `url`'s database as a session of its own.
async fn run(url: &str, sql: &str) {
    let mut conn = PgConnection::connect(url)
        .await
        .expect("the cluster answers");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_claimd_aimed_at_a_standby_is_not_serving_and_unavailable_until_it_is_promoted() {
    let primary = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the primary starts");
    let db_url = primary.create_database().await;
    let db = database_name(&db_url);
    // Migrated on the primary, as the standby will then hold it.
    let migrated = replica_with(&db_url, free_addr(), &[]).await;
    assert!(migrated.terminate().await.success());
    let at = primary.tcp_addr();
    let standby =
        tokio::task::spawn_blocking(move || PrivateCluster::standby_of(&primary, "ha_standby", at))
            .await
            .expect("the standby starts");
    let url = standby.url(&db);
    // Migrating needs writes: claimd refuses to start on the standby, saying what to do.
    let mut refused = claimd();
    refused.args([
        "serve",
        "--listen",
        &free_addr().to_string(),
        "--database-url",
        &url,
    ]);
    refused.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    let mut refused = Claimd::spawn(refused);
    let status = refused.wait_for_exit(PATIENCE).await;
    let log = refused.log();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    assert!(
        log.contains("accepts no writes") || log.contains("read-only"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    // With --no-migrate it starts, and says it cannot write.
    let addr = free_addr();
    let server = replica_with(&url, addr, &["--no-migrate", "--health-interval", "200ms"]).await;
    health_becomes(addr, ServingStatus::NotServing).await;
    refused_as_read_only(claim(addr, "on-the-standby").await, &server);
    // Promoted (the failover done), the same claimd writes without a restart.
    standby.promote().await;
    health_becomes(addr, ServingStatus::Serving).await;
    writes_again(addr).await;
    let log = server.log();
    assert!(
        !log.contains("panicked") && !log.contains("internal error"),
        "{log}"
    );
    assert!(log.contains("database unavailable: NOT_SERVING"), "{log}");
    assert!(server.terminate().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_database_turned_read_only_is_unavailable_and_claimd_follows_it_back() {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the cluster starts");
    let url = cluster.create_database().await;
    let db = database_name(&url);
    let addr = free_addr();
    let server = replica_with(&url, addr, &["--health-interval", "200ms"]).await;
    writes_again(addr).await;
    // Every new session of the database is read-only, and claimd's are cut: the ones it
    // opens next refuse writes (SQLSTATE 25006), as a standby's would.
    let admin = cluster.url("postgres");
    run(
        &admin,
        &format!("ALTER DATABASE \"{db}\" SET default_transaction_read_only = on"),
    )
    .await;
    let cut = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = '{db}' AND pid <> pg_backend_pid()"
    );
    run(&admin, &cut).await;
    health_becomes(addr, ServingStatus::NotServing).await;
    let mut refusals = 0;
    for n in 0..20 {
        match claim(addr, &format!("read-only-{n}")).await {
            Ok(r) => panic!("a read-only database answered {r:?}"),
            Err(s)
                if s.code() == Code::Unavailable && s.message().contains("accepts no writes") =>
            {
                refusals += 1
            }
            // A connection cut under a call is UNAVAILABLE too, in other words.
            Err(s) => assert_eq!(s.code(), Code::Unavailable, "{s:?}\n{}", server.log()),
        }
    }
    assert!(refusals > 0, "no call was refused as read-only");
    // Writable again: the sessions claimd opened while it was read-only stay read-only
    // (their default was read when they began); claimd must drop them on its own.
    run(
        &admin,
        &format!("ALTER DATABASE \"{db}\" RESET default_transaction_read_only"),
    )
    .await;
    health_becomes(addr, ServingStatus::Serving).await;
    writes_again(addr).await;
    for n in 0..20 {
        let answer = claim(addr, &format!("after-{n}")).await;
        assert!(answer.is_ok(), "{answer:?}\n{}", server.log());
    }
    let log = server.log();
    assert!(
        !log.contains("internal error") && !log.contains("panicked"),
        "{log}"
    );
    // Logged once per change, not once per failed call: 20 refused calls, a few warnings.
    assert!(
        log.matches("database unavailable: NOT_SERVING").count() <= 2,
        "{log}"
    );
    // claimd's own warnings; sqlx warns once per pooled connection the cut broke (how many
    // the pool held then varies with the machine's load), never per call: at most the pool.
    let warnings = log.lines().filter(|l| l.contains(" WARN claimd")).count();
    assert!(
        warnings <= 5,
        "{warnings} warnings for 20 refused calls:\n{log}"
    );
    let pool = log.lines().filter(|l| l.contains(" WARN sqlx")).count();
    let pool_size = usize::try_from(claimd::config::defaults::DB_POOL_SIZE).unwrap_or(16);
    assert!(
        pool <= pool_size,
        "{pool} pool warnings, more than the pool's {pool_size} connections:\n{log}"
    );
    assert!(server.terminate().await.success());
}
