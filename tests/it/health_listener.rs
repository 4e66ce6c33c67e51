//! docs/DESIGN.md §5 "health may be left open on a separate flag for probes": `--health-listen` is a
//! second, plaintext listener with nothing but grpc.health.v1.Health (the main listener's
//! status, no TLS, no API key), which keeps answering NOT_SERVING while the main one drains.
//! The main listener answers health Check and Watch without an API key too (probes and
//! meshes send none); reflection and ClaimService there still need one.

use crate::common::app::{Backend, TestApp, store_options, tls_channel};
use crate::common::certs::Pki;
use crate::common::probe::{health_in_plaintext, health_over_tls, plaintext_channel, wait_for};
use claimd::auth::generate_key;
use claimd::config::Config;
use claimd::pb::ClaimRequest;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::store::keys::NewApiKey;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;

const SERVICE: &str = "claimd.v1.ClaimService";

/// A claimd serving TLS (mTLS with `mtls`) with a health-only listener on a free port, after
/// `configure` adjusted the rest.
async fn spawn_with_health(pki: &Pki, mtls: bool, configure: impl FnOnce(&mut Config)) -> TestApp {
    TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c: &mut Config| {
            pki.serve_tls(c, mtls);
            c.health_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            configure(c);
        })
        .spawn()
        .await
}

fn claim_request(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "health".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    }
}

/// What a Claim of `key` and a reflection ListServices, sent without credentials over
/// `channel`, are answered: `Ok` or the status code.
async fn claim_and_reflection(
    channel: &tonic::transport::Channel,
    key: &str,
) -> (Result<(), Code>, Result<(), Code>) {
    let claim = ClaimServiceClient::new(channel.clone())
        .claim(claim_request(key))
        .await;
    let list = ServerReflectionRequest {
        message_request: Some(MessageRequest::ListServices(String::new())),
        ..Default::default()
    };
    let reflection = ServerReflectionClient::new(channel.clone())
        .server_reflection_info(futures::stream::iter([list]))
        .await;
    (
        claim.map(drop).map_err(|s| s.code()),
        reflection.map(drop).map_err(|s| s.code()),
    )
}

#[tokio::test]
async fn the_health_listener_answers_health_in_plaintext_and_serves_nothing_else() {
    let pki = Pki::new();
    let app = spawn_with_health(&pki, true, |_| {}).await;
    // The configuration above asked for the health listener.
    let health_addr = app.health_addr.expect("--health-listen was set");
    let channel = plaintext_channel(health_addr).await;
    // The health listener is plaintext by design.
    let channel = channel.expect("the health listener takes plaintext connections");
    wait_for(&channel, "", ServingStatus::Serving).await;
    wait_for(&channel, SERVICE, ServingStatus::Serving).await;

    let (claim, reflection) = claim_and_reflection(&channel, "h").await;
    assert_eq!(claim, Err(Code::Unimplemented), "ClaimService there");
    assert_eq!(reflection, Err(Code::Unimplemented), "reflection there");
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_listener_reports_not_serving_while_the_main_listener_drains() {
    let pki = Pki::new();
    let app = spawn_with_health(&pki, false, |c| c.shutdown_grace = Duration::from_secs(3)).await;
    // The configuration above asked for the health listener.
    let health_addr = app.health_addr.expect("--health-listen was set");
    let probe = plaintext_channel(health_addr).await;
    // The health listener is plaintext by design.
    let probe = probe.expect("the health listener takes plaintext connections");
    wait_for(&probe, "", ServingStatus::Serving).await;
    // A Watch stream on the main listener is a call in flight: draining waits for it.
    let main = tls_channel(app.addr, pki.client_tls()).await;
    // Plain TLS (no client CA): trusting the server's CA is enough.
    let main = main.expect("a client trusting the CA connects");
    let request = HealthCheckRequest { service: "".into() };
    let watch = HealthClient::new(main).watch(request).await;
    // Watch answers at once with the current status while the server runs.
    let mut watch = watch.expect("Watch starts").into_inner();
    let first = watch.message().await.expect("Watch answers");
    assert_eq!(first.map(|r| r.status()), Some(ServingStatus::Serving));

    let stopping = tokio::spawn(app.shutdown());
    wait_for(&probe, "", ServingStatus::NotServing).await;
    wait_for(&probe, SERVICE, ServingStatus::NotServing).await;
    assert!(!stopping.is_finished(), "stopped before the grace period");
    // A panic in shutdown fails the test here.
    stopping.await.expect("shutdown completes");
    let after = health_in_plaintext(health_addr).await;
    assert!(
        after.is_err(),
        "the health listener outlived the server: {after:?}"
    );
}

#[tokio::test]
async fn with_a_key_on_record_health_needs_none_on_either_listener_but_claims_do() {
    let pki = Pki::new();
    let app = spawn_with_health(&pki, false, |c| {
        c.key_cache_ttl = Duration::from_millis(100)
    })
    .await;
    let generated = generate_key();
    let key = NewApiKey {
        id: generated.id,
        tenant: "acme".into(),
        secret_hash: generated.secret_hash,
        label: None,
        namespaces: None,
    };
    // The test's own database takes a new key.
    app.store()
        .await
        .create_key(&key)
        .await
        .expect("key created");

    // With a key on record, the main listener wants one for ClaimService (after the cache).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let main = tls_channel(app.addr, pki.client_tls()).await;
        // Plain TLS (no client CA): trusting the server's CA is enough.
        let main = main.expect("a client trusting the CA connects");
        let claim = ClaimServiceClient::new(main)
            .claim(claim_request("k"))
            .await;
        if claim
            .as_ref()
            .is_err_and(|s| s.code() == Code::Unauthenticated)
        {
            break;
        }
        assert!(Instant::now() < deadline, "main listener Claim: {claim:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Health needs none, on the main listener and on the health listener.
    let main = health_over_tls(app.addr, pki.client_tls()).await;
    assert_eq!(main, Ok(ServingStatus::Serving), "main listener health");
    // The configuration above asked for the health listener.
    let health_addr = app.health_addr.expect("--health-listen was set");
    let probe = health_in_plaintext(health_addr).await;
    assert_eq!(probe, Ok(ServingStatus::Serving));
    app.shutdown().await;
}

/// Kubernetes gRPC probes and mesh health checks send no credentials: with API keys on and
/// no `--health-listen`, the main listener answers health Check and Watch without a key,
/// and refuses reflection and ClaimService without one.
#[tokio::test]
async fn with_api_keys_the_main_listener_answers_health_without_a_key_and_nothing_else() {
    let (url, _dir) = Backend::Sqlite.fresh_database().await;
    // The test's own fresh database opens, migrates and takes a key before claimd starts.
    let store = claimd::store::open(&url, &store_options())
        .await
        .expect("store");
    store.migrate().await.expect("migrations apply");
    let generated = generate_key();
    let key = NewApiKey {
        id: generated.id,
        tenant: "acme".into(),
        secret_hash: generated.secret_hash,
        label: None,
        namespaces: None,
    };
    store.create_key(&key).await.expect("key created");
    drop(store);
    let app = TestApp::builder().database_url(url).spawn().await;
    let channel = plaintext_channel(app.addr).await;
    // The main listener serves plaintext unless TLS is configured.
    let channel = channel.expect("the main listener takes plaintext connections");

    wait_for(&channel, "", ServingStatus::Serving).await;
    wait_for(&channel, SERVICE, ServingStatus::Serving).await;
    let request = HealthCheckRequest {
        service: SERVICE.into(),
    };
    let watch = HealthClient::new(channel.clone()).watch(request).await;
    // Watch answers at once with the current status, credentials or not.
    let mut watch = watch.expect("Watch starts without a key").into_inner();
    let first = watch.message().await.expect("Watch answers");
    assert_eq!(first.map(|r| r.status()), Some(ServingStatus::Serving));

    let claims = ClaimServiceClient::new(channel.clone());
    let (claim, reflection) = claim_and_reflection(&channel, "k").await;
    assert_eq!(claim, Err(Code::Unauthenticated), "Claim without a key");
    assert_eq!(
        reflection,
        Err(Code::Unauthenticated),
        "reflection without a key"
    );
    assert_eq!(app.receipt_rows().await, 0);

    // With the key the same Claim is served: the refusals above were the missing key.
    let mut with_key = tonic::Request::new(claim_request("k"));
    let bearer = format!("Bearer {}", generated.key);
    // A generated key is ASCII, so it is a valid metadata value.
    let bearer = bearer.parse().expect("ASCII metadata");
    with_key.metadata_mut().insert("authorization", bearer);
    claims
        .clone()
        .claim(with_key)
        .await
        .expect("Claim with the key");
    assert_eq!(app.receipt_rows().await, 1);
    app.shutdown().await;
}
