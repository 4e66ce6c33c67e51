//! claimd behind a real PgBouncer (`common::pgbouncer`): in transaction pool mode it refuses
//! to start, naming the mode and what to do instead, before it writes anything; in session
//! mode it serves. Both with the usual `ignore_startup_parameters = extra_float_digits`
//! (sqlx sends that startup parameter, which PgBouncer refuses otherwise). docs/DESIGN.md
//! §4.1 says why.

use crate::common::pg::PrivateCluster;
use crate::common::pgbouncer::PgBouncer;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use sqlx::{Connection, PgConnection};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// What every PgBouncer in front of sqlx needs.
const IGNORE: &str = "ignore_startup_parameters = extra_float_digits";

/// A cluster on TCP with a fresh database, a PgBouncer in `mode` in front of it, and the
/// database's URL through PgBouncer and directly.
async fn bouncer(mode: &'static str) -> (PrivateCluster, PgBouncer, String, String) {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let direct = cluster.create_database().await;
    let path = direct.split('?').next().unwrap_or(&direct);
    let db = path.rsplit('/').next().unwrap_or_default().to_owned();
    let upstream = cluster.tcp_addr();
    let bouncer = tokio::task::spawn_blocking(move || PgBouncer::start(upstream, mode, &[IGNORE]))
        .await
        .expect("pgbouncer starts");
    let url = format!("postgres://postgres@127.0.0.1:{}/{db}", bouncer.port());
    (cluster, bouncer, url, direct)
}

/// `claimd serve` on `addr` against `url`, not yet waited on.
fn serve(url: &str, addr: SocketAddr) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--database-url",
        url,
    ]);
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimd_refuses_to_start_through_pgbouncer_in_transaction_mode_and_says_what_to_do() {
    let (_cluster, bouncer, url, direct) = bouncer("transaction").await;
    let mut server = Claimd::spawn(serve(&url, free_addr()));
    let exit = server.wait_for_exit(PATIENCE).await;
    let log = server.log();
    let status = exit.unwrap_or_else(|| panic!("claimd started through transaction mode:\n{log}"));
    assert!(!status.success(), "claimd exited 0:\n{log}");
    for words in [
        "transaction pool mode",
        "PgBouncer",
        "session mode",
        "directly",
    ] {
        assert!(
            log.contains(words),
            "the error does not say {words:?}:\n{log}"
        );
    }
    // Refused before the migrations: nothing half-written.
    let mut conn = PgConnection::connect(&direct)
        .await
        .expect("the database answers");
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_one(&mut conn)
    .await
    .expect("the table count");
    assert_eq!(
        tables,
        0,
        "claimd wrote before refusing:\n{}",
        bouncer.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimd_serves_through_pgbouncer_in_session_mode_with_its_statement_timeout() {
    let (_cluster, _bouncer, url, direct) = bouncer("session").await;
    let addr = free_addr();
    let mut cmd = serve(&url, addr);
    cmd.args(["--db-timeout", "1s"]);
    let _server = Claimd::start(cmd, addr).await;
    let mut client = crate::history::workload::channel(addr, Duration::from_secs(30));
    let claim = |key: &str| claimd::pb::ClaimRequest {
        namespace: "bounced".into(),
        key: key.into(),
        ..Default::default()
    };
    for key in ["a", "b", "a"] {
        let answer = client.claim(claim(key)).await;
        assert!(answer.is_ok(), "a Claim through PgBouncer: {answer:?}");
    }
    // The session settings reach the server: a statement stuck behind a lock is cancelled
    // there (statement_timeout), not only given up on by claimd.
    let mut holder = PgConnection::connect(&direct)
        .await
        .expect("the database answers");
    sqlx::raw_sql("BEGIN; LOCK TABLE receipts IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .expect("the table lock");
    let answer = client
        .claim(claim("c"))
        .await
        .map(drop)
        .map_err(|s| s.code());
    assert_eq!(answer, Err(tonic::Code::Unavailable));
    let mut watcher = PgConnection::connect(&direct)
        .await
        .expect("the database answers");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut watcher)
        .await
        .expect("pg_stat_activity");
        if waiting == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "claimd's statement still waits for the lock: no statement_timeout on its session"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .expect("unlock");
}
