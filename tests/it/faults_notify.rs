//! The fault matrix's notification-queue row (docs/RELIABILITY.md, docs/DESIGN.md §2.9): a
//! replica SIGSTOPped under load while tens of megabytes of notifications go out, so its
//! listening connection's backend blocks on a full socket and holds PostgreSQL's
//! notification queue. The queue (8 GB, one per cluster) cannot be made smaller, so the
//! replicas run with `--notify-queue-max-usage` at 0.00002 (about 170 KB of it) and the test
//! checks the guard at that threshold: filling the real queue takes minutes (measured once,
//! by hand: docs/RELIABILITY.md).
//!
//! A listening session of the test's own that never reads holds the queue too, until the
//! test lets it go: it is not claimd's, so no claimd terminates it, and the queue stays
//! above the threshold while the test looks (no race with the termination it waits for).
//! A third replica only listens: its heartbeats must keep it from being cut off.

use crate::common::pg::PrivateCluster;
use crate::common::process::{Claimd, free_addr};
use crate::common::receipt_ops::{FP, NS, claim_request, secs};
use crate::faults::{SECOND, under};
use crate::faults_network::replica_with;
use crate::history::workload::{Workload, channel};
use claimd::domain::ReceiptKey;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, ClaimResponse, CompleteRequest, Decision};
use claimd::store::settles::Mark;
use nix::sys::signal::Signal;
use sqlx::postgres::PgListener;
use sqlx::{Connection, Executor, PgConnection};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

/// The replicas' `--notify-queue-max-usage`: about 21 of the queue's 8 KB pages.
const MAX_USAGE: f64 = 0.00002;
/// Far longer than anything here should take.
const PATIENCE: Duration = Duration::from_secs(30);

/// A claimd on `url` with the small threshold, stale listeners after 2 s, and its gauges
/// refreshed every 200 ms on a `/metrics` address of its own.
struct Replica {
    server: Claimd,
    addr: SocketAddr,
    metrics: SocketAddr,
}

impl Replica {
    async fn start(url: &str) -> Replica {
        let (addr, metrics) = (free_addr(), free_addr());
        let flags = [
            "--notify-queue-max-usage",
            &MAX_USAGE.to_string(),
            "--notify-listener-stale-after",
            "2s",
            "--metrics-interval",
            "200ms",
            "--metrics-listen",
            &metrics.to_string(),
        ];
        let server = replica_with(url, addr, &flags).await;
        Replica {
            server,
            addr,
            metrics,
        }
    }

    fn client(&self) -> ClaimServiceClient<Channel> {
        channel(self.addr, 2 * PATIENCE)
    }

    /// The value of the unlabelled sample `name` on `/metrics`, if there is one.
    async fn metric(&self, name: &str) -> Option<f64> {
        let mut stream = tokio::net::TcpStream::connect(self.metrics).await.ok()?;
        let request = "GET /metrics HTTP/1.1\r\nHost: claimd\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await.ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }
}

/// Polls `check` every 50 ms until it gives a value; fails naming `what` after
/// [`PATIENCE`]. A waiting loop, not a timing.
async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, check: impl Fn() -> F) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {PATIENCE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The backends of claimd's listening connections on `url`'s database.
async fn listeners(url: &str) -> Vec<i32> {
    let mut conn = PgConnection::connect(url).await.expect("a connection");
    let sql = "SELECT pid FROM pg_stat_activity WHERE application_name = 'claimd-listen' \
               AND datname = current_database() ORDER BY pid";
    let pids = sqlx::query_scalar(sql).fetch_all(&mut conn).await;
    pids.expect("pg_stat_activity")
}

/// Whether backend `pid` is still there.
async fn alive(url: &str, pid: i32) -> bool {
    let mut conn = PgConnection::connect(url).await.expect("a connection");
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE pid = $1";
    let n: i64 = sqlx::query_scalar(sql)
        .bind(pid)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    n == 1
}

/// `key` claimed through `client` with a 10-minute lease: the token.
async fn held(client: &mut ClaimServiceClient<Channel>, key: &str) -> String {
    let request = ClaimRequest {
        lease_ttl: secs(600),
        ..claim_request(key, FP)
    };
    let answer = client.claim(request).await.expect("Claim").into_inner();
    assert_eq!(answer.decision(), Decision::Claimed, "{answer:?}");
    answer.claim_token
}

/// A Claim of `key` with a 60 s wait through `client`, answered in a task.
fn waiter(
    mut client: ClaimServiceClient<Channel>,
    key: &str,
) -> tokio::task::JoinHandle<ClaimResponse> {
    let request = ClaimRequest {
        wait: secs(60),
        ..claim_request(key, FP)
    };
    tokio::spawn(async move { client.claim(request).await.expect("Claim").into_inner() })
}

async fn complete(client: &mut ClaimServiceClient<Channel>, key: &str, token: &str) {
    let request = CompleteRequest {
        namespace: NS.into(),
        key: key.into(),
        claim_token: token.into(),
        response: b"done".to_vec(),
    };
    client.complete(request).await.expect("Complete succeeds");
}

/// The mark notifications carry for `key` of the tenant callers without keys act as.
fn mark(key: &str) -> String {
    let id = ReceiptKey {
        namespace: NS.into(),
        key: key.into(),
    };
    Mark::of(claimd::auth::DEFAULT_TENANT, &id).to_hex()
}

/// Waits for `waiter` (within [`PATIENCE`]) and demands COMPLETED.
async fn completed(waiter: tokio::task::JoinHandle<ClaimResponse>) {
    let answer = tokio::time::timeout(PATIENCE, waiter).await;
    let answer = answer.expect("the waiter is answered").unwrap();
    assert_eq!(answer.decision(), Decision::Completed, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_stopped_replica_holding_the_notification_queue_stops_no_write_and_is_cut_off() {
    let cluster = tokio::task::spawn_blocking(PrivateCluster::start)
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    // The replica to be stopped first, so the one listening connection there is its own.
    let stopped = Replica::start(&url).await;
    let stopped_listener = eventually("the first replica listens", || async {
        Some(listeners(&url).await).filter(|l| l.len() == 1)
    })
    .await[0];
    // A bystander that only listens: its heartbeat must keep it from being cut off.
    let bystander = Replica::start(&url).await;
    let bystander_listener = eventually("the bystander listens", || async {
        let pids = listeners(&url).await;
        (pids.len() == 2).then(|| pids.into_iter().find(|p| *p != stopped_listener))?
    })
    .await;
    let healthy = Replica::start(&url).await;
    eventually("the three replicas listen", || async {
        (listeners(&url).await.len() == 3).then_some(())
    })
    .await;
    let mut client = healthy.client();
    // A receipt held (10 minutes) through the healthy replica and waited for (60 s) on the
    // one to be stopped: only a wake-up answers it within PATIENCE.
    let away = held(&mut client, "away").await;
    let away_waiter = waiter(stopped.client(), "away");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!away_waiter.is_finished(), "the waiter waits");

    // Callers that only call the healthy replica: every call must be answered.
    let load = Workload {
        call_timeout: 2 * PATIENCE,
        ..Workload::default()
    };
    let verdict = under(load, &[healthy.addr], 2 * SECOND, async {
        tokio::time::sleep(SECOND).await;
        // A session of the test's own that listens and never reads.
        let mut latch = PgConnection::connect(&url).await.expect("a connection");
        let latch_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut latch)
            .await
            .unwrap();
        latch.execute("LISTEN claimd_settled").await.unwrap();
        stopped.server.signal(Signal::SIGSTOP);
        // 32 MB of notifications that name no receipt: the stopped replica's backend and
        // the latch's block on their sockets and hold the queue's tail.
        let mut admin = PgConnection::connect(&url).await.expect("a connection");
        let fill = "SELECT count(pg_notify('claimd_settled', lpad(g::text || '-' || $1, 7990, '.'))) \
                    FROM generate_series(1, 1000) g";
        for round in 0..4 {
            sqlx::query(fill).bind(round).execute(&mut admin).await.unwrap();
        }
        let usage: f64 = sqlx::query_scalar("SELECT pg_notification_queue_usage()")
            .fetch_one(&mut admin)
            .await
            .unwrap();
        assert!(usage >= MAX_USAGE, "the queue is held: {usage}");
        eventually("the healthy replica's gauge shows the queue above the threshold", || {
            async { healthy.metric("claimd_notify_queue_usage").await.filter(|u| *u >= MAX_USAGE) }
        })
        .await;
        // The healthy replica cuts the stopped one's listener off, and only claimd's.
        eventually("the stopped replica's listening connection is terminated", || async {
            (!alive(&url, stopped_listener).await).then_some(())
        })
        .await;
        eventually("the termination is counted", || async {
            let name = "claimd_notify_listeners_terminated_total";
            let by_healthy = healthy.metric(name).await.unwrap_or_default();
            let by_bystander = bystander.metric(name).await.unwrap_or_default();
            (by_healthy + by_bystander >= 1.0).then_some(())
        })
        .await;
        assert!(alive(&url, latch_pid).await, "a session not claimd's is left alone");

        // While the queue is that full, a settle wakes the replica's own waiters and
        // notifies nobody.
        let mut reader = PgListener::connect(&url).await.expect("a listener");
        reader.listen("claimd_settled").await.unwrap();
        let quiet = held(&mut client, "quiet").await;
        let quiet_waiter = waiter(healthy.client(), "quiet");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!quiet_waiter.is_finished(), "the waiter waits");
        complete(&mut client, "quiet", &quiet).await;
        completed(quiet_waiter).await;
        complete(&mut client, "away", &away).await;

        // The latch lets go: the queue drains, and settles notify again.
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(latch_pid)
            .execute(&mut admin)
            .await
            .unwrap();
        drop(latch);
        eventually("the healthy replica's gauge shows the queue drained", || async {
            healthy.metric("claimd_notify_queue_usage").await.filter(|u| *u < MAX_USAGE)
        })
        .await;
        let loud = held(&mut client, "loud").await;
        complete(&mut client, "loud", &loud).await;
        let silent = [mark("quiet"), mark("away")];
        let heard = tokio::time::timeout(PATIENCE, async {
            loop {
                let note = reader.recv().await.expect("the reader listens");
                let marks: Vec<&str> = note.payload().split(',').collect();
                if let Some(m) = silent.iter().find(|m| marks.contains(&m.as_str())) {
                    panic!("a settle notified while the queue was full: {m}");
                }
                if marks.contains(&mark("loud").as_str()) {
                    return;
                }
            }
        });
        heard.await.expect("the settle after the queue drained is notified");

        // The stopped replica runs again: its listening connection is gone, it listens
        // again and its waiter reads the receipt settled meanwhile.
        stopped.server.signal(Signal::SIGCONT);
        completed(away_waiter).await;
        let woken = stopped.metric("claimd_claim_wakeups_total{cause=\"settled\"}").await;
        assert!(woken >= Some(1.0), "woken, not run out: {woken:?}");
        let mut again = stopped.client();
        let answer = again.claim(claim_request("after", FP)).await;
        assert_eq!(answer.expect("the stopped replica serves").into_inner().decision(), Decision::Claimed);
        let back = eventually("the stopped replica listens again", || async {
            Some(listeners(&url).await).filter(|l| l.len() == 3)
        })
        .await;
        assert!(!back.contains(&stopped_listener));
        assert!(
            back.contains(&bystander_listener),
            "a replica that showed life kept its listening connection through the full spell"
        );
    })
    .await;
    // Shown with --nocapture: what the replicas logged about the queue.
    for (name, replica) in [
        ("healthy", &healthy),
        ("bystander", &bystander),
        ("stopped", &stopped),
    ] {
        for line in replica
            .server
            .log()
            .lines()
            .filter(|l| l.contains("queue") || l.contains("listen"))
        {
            println!("{name}: {line}");
        }
    }
    verdict.assert_valid();
    assert_eq!(
        verdict.unknown, 0,
        "a call to the healthy replica failed while the queue was full: {verdict:?}"
    );
}
