//! The console's Quarantine when PostgreSQL does not answer (its link blackholed by the
//! test's proxy), so the page says whether anything may have changed: a Quarantine whose
//! read cannot be made is 503 "Nothing changed" and the receipt is exactly as before — no
//! lease left behind, so the same form quarantines it once the database is back; one whose
//! write committed but whose answer was lost is 503 "Perhaps quarantined", and Get shows it
//! quarantined with the operator's reason.

use super::operator::{Operator, policies};
use super::page::text;
use super::quarantine::refused;
use crate::common::app::TestApp;
use crate::common::blocker::Blocker;
use crate::common::pg::PrivateCluster;
use crate::common::proxy::Proxy;
use crate::faults_network::through;
use claimd::pb::State;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// `--db-timeout` here: claimd gives a statement up 0.5 s after it.
const DB_TIMEOUT: Duration = Duration::from_secs(2);

/// A private PostgreSQL on TCP, a fresh database on it (its URL), the test's proxy in front
/// of it, and a claimd with the console and one group-commit lane reaching it through the
/// proxy. Keys stay cached for a minute, so a session is served while the link is down.
async fn behind_a_proxy() -> (PrivateCluster, String, Proxy, TestApp) {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let url = cluster.create_database().await;
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let app = TestApp::builder()
        .database_url(through(&proxy, &url))
        .configure(|c| {
            c.console_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            c.key_cache_ttl = Duration::from_secs(60);
            c.store.acquire_timeout = DB_TIMEOUT;
            c.store.batch.lanes = Some(1);
            c.policies = policies();
        })
        .spawn()
        .await;
    (cluster, url, proxy, app)
}

/// Waits until Get answers again after the link is back.
async fn back(operator: &Operator<'_>, key: &str) -> claimd::pb::Receipt {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(receipt) = operator.get(key).await {
            return receipt;
        }
        assert!(
            Instant::now() < deadline,
            "the database did not answer again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_quarantine_the_database_cannot_answer_changes_nothing_and_can_be_sent_again() {
    let (_cluster, _url, proxy, app) = behind_a_proxy().await;
    let operator = Operator::new(&app).await;
    operator.claimed("ev-1", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("ev-1").await;
    let before = operator.get("ev-1").await.unwrap();

    proxy.blackhole();
    let failed = operator.quarantine(&form, "poison").await;
    refused(&failed, 503, "the database is unavailable");
    proxy.normal();
    assert_eq!(back(&operator, "ev-1").await, before, "exactly as before");

    let again = operator.quarantine(&form, "poison").await;
    assert_eq!(again.status, 303, "{}", text(&again));
    let receipt = operator.get("ev-1").await.unwrap();
    assert_eq!((receipt.state(), receipt.attempt), (State::Quarantined, 1));
    assert_eq!(receipt.last_error, "poison");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_quarantine_whose_answer_was_lost_says_it_may_have_been_quarantined_and_get_shows_it()
 {
    let (_cluster, url, proxy, app) = behind_a_proxy().await;
    let operator = Operator::new(&app).await;
    operator.claimed("ev-1", 1).await;
    app.advance(Duration::from_secs(2));
    let form = operator.form("ev-1").await;

    // The write waits on the test's row lock; the link goes dark, the lock is released, and
    // the write commits with its answer held. claimd gives it up and reads the row again,
    // which the dark link does not answer either.
    let mut lock = Blocker::hold(&url, "ev-1").await;
    let reason = "poison: quarantined by the on-call";
    let lost = operator.quarantine_within(&form, reason, Duration::from_secs(40));
    let choreography = async {
        lock.wait_for_waiter().await;
        proxy.blackhole();
        lock.release().await;
    };
    let (answer, ()) = tokio::join!(lost, choreography);
    proxy.normal();
    let page = text(&answer);
    assert_eq!(answer.status, 503, "{page}");
    assert!(page.contains("Perhaps quarantined"), "{page}");
    assert!(!page.contains("Nothing changed"), "{page}");
    assert!(
        page.contains("id=\"receipt-now\""),
        "a link to its page: {page}"
    );

    let receipt = back(&operator, "ev-1").await;
    assert_eq!((receipt.state(), receipt.attempt), (State::Quarantined, 1));
    assert_eq!(
        receipt.last_error, reason,
        "the operator's reason was written"
    );
}
