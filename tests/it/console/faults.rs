//! The console when PostgreSQL does not answer (the link to it blackholed by a proxy): a
//! page and an action are answered 503 "unavailable" — never 500 — within the database
//! timeout and a margin; the action changed nothing (the dead letter is still one once the
//! link is back), and the console serves again by itself.

use super::page::{addr, csrf, get, post, receipt_path, sign_in, text};
use crate::common::app::{TestApp, secs};
use crate::common::pg::PrivateCluster;
use crate::common::proxy::Proxy;
use crate::faults_network::through;
use claimd::pb::{ClaimRequest, GetRequest, QuarantineRequest, State};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Request;

fn with_key<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("a header value");
    request.metadata_mut().insert("authorization", value);
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_unreachable_database_is_unavailable_on_the_console_and_changes_nothing() {
    let cluster = tokio::task::spawn_blocking(|| PrivateCluster::start_on_tcp(&[]))
        .await
        .expect("the private cluster starts");
    let proxy = Proxy::start(cluster.tcp_addr()).await;
    let url = through(&proxy, &cluster.create_database().await);
    let app = TestApp::builder()
        .database_url(url)
        .configure(|c| {
            c.console_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            c.key_cache_ttl = Duration::from_millis(200);
            c.store.acquire_timeout = Duration::from_secs(1);
        })
        .spawn()
        .await;
    let (_, key) = app.create_key("acme", None).await;
    let mut client = app.new_client().await;
    let claim = ClaimRequest {
        namespace: "hooks".into(),
        key: "ev-1".into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        ..Default::default()
    };
    let token = client
        .claim(with_key(claim, &key))
        .await
        .unwrap()
        .into_inner()
        .claim_token;
    let quarantine = QuarantineRequest {
        namespace: "hooks".into(),
        key: "ev-1".into(),
        claim_token: token,
        error: "poison".into(),
    };
    client.quarantine(with_key(quarantine, &key)).await.unwrap();
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let token = csrf(console, &session).await;

    proxy.blackhole();
    let started = Instant::now();
    let page = get(console, &receipt_path("hooks", "ev-1"), Some(&session)).await;
    assert_eq!(page.status, 503, "{}", text(&page));
    let form = [
        ("namespace", "hooks"),
        ("key", "ev-1"),
        ("csrf", token.as_str()),
    ];
    let action = post(console, "/receipt/redrive", &form, Some(&session), &[]).await;
    assert_eq!(action.status, 503, "{}", text(&action));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered, not hung"
    );

    proxy.normal();
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(console, "/", Some(&session)).await.status != 200 {
        assert!(Instant::now() < deadline, "the console did not serve again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let get = GetRequest {
        namespace: "hooks".into(),
        key: "ev-1".into(),
    };
    let receipt = client
        .get(with_key(get, &key))
        .await
        .unwrap()
        .into_inner()
        .receipt
        .unwrap();
    assert_eq!(
        receipt.state(),
        State::Quarantined,
        "the refused Redrive changed nothing"
    );
}
