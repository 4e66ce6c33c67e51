//! docs/DESIGN.md §5 "Standard services" and shutdown: grpc.health.v1 follows the database, server
//! reflection lists and describes every service, and a stopped server refuses connections.

use crate::common::app::{TestApp, decision};
use crate::common::pg::PrivateCluster;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{
    ClaimRequest, CompleteRequest, Decision, GetRequest, ListOrphanedRequest, ListRequest,
    RedriveRequest, State,
};
use prost::Message;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SERVICE: &str = "claimd.v1.ClaimService";

/// A connected channel (the generated health and reflection clients have no `connect`).
async fn channel(addr: SocketAddr) -> Result<Channel, tonic::transport::Error> {
    Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
}

async fn health_client(addr: SocketAddr) -> HealthClient<Channel> {
    HealthClient::new(channel(addr).await.unwrap())
}

/// The status Check reports for `service`, or the gRPC code if Check fails.
async fn check(health: &HealthClient<Channel>, service: &str) -> Result<ServingStatus, Code> {
    let request = HealthCheckRequest {
        service: service.into(),
    };
    match health.clone().check(request).await {
        Ok(r) => Ok(r.into_inner().status()),
        Err(status) => Err(status.code()),
    }
}

/// Polls Check every 100 ms until both "" and the ClaimService report `want` (15 s at most):
/// waiting for a state change, not asserting how fast it comes.
async fn wait_for(health: &HealthClient<Channel>, want: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = (check(health, "").await, check(health, SERVICE).await);
        if now == (Ok(want), Ok(want)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "health never became {want:?}; last {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn claim_request(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "ns".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    }
}

#[tokio::test]
async fn health_reports_serving_for_the_server_and_the_claim_service_while_the_database_answers() {
    let app = TestApp::builder().spawn().await;
    let health = health_client(app.addr).await;
    wait_for(&health, ServingStatus::Serving).await;
    assert_eq!(check(&health, "no.such.Service").await, Err(Code::NotFound));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_turns_health_not_serving_and_calls_unavailable_until_it_returns() {
    let (mut cluster, app) = PrivateCluster::with_app().await;
    let health = health_client(app.addr).await;
    let before = app.claim("ns", "Ev-before", b"fp").await;
    assert_eq!(decision(&before), Decision::Claimed);
    wait_for(&health, ServingStatus::Serving).await;

    cluster = tokio::task::spawn_blocking(move || {
        cluster.stop();
        cluster
    })
    .await
    .unwrap();
    wait_for(&health, ServingStatus::NotServing).await;

    let mut client = app.client.clone();
    let complete = CompleteRequest {
        namespace: "ns".into(),
        key: "Ev-before".into(),
        claim_token: before.claim_token.clone(),
        response: b"200".to_vec(),
    };
    let get = GetRequest {
        namespace: "ns".into(),
        key: "Ev-before".into(),
    };
    let outcomes = [
        (
            "Claim",
            client.claim(claim_request("Ev-during")).await.map(drop),
        ),
        ("Get", client.get(get).await.map(drop)),
        (
            "Complete",
            client.complete(complete.clone()).await.map(drop),
        ),
        (
            "ListOrphaned",
            client
                .list_orphaned(ListOrphanedRequest::default())
                .await
                .map(drop),
        ),
        ("List", client.list(ListRequest::default()).await.map(drop)),
        (
            "Redrive",
            client
                .redrive(RedriveRequest {
                    namespace: "ns".into(),
                    key: "Ev-before".into(),
                })
                .await
                .map(drop),
        ),
    ];
    for (rpc, outcome) in outcomes {
        let status = outcome.expect_err(rpc);
        assert_eq!(
            status.code(),
            Code::Unavailable,
            "{rpc} during the outage: {status:?}"
        );
    }

    cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .unwrap();
    wait_for(&health, ServingStatus::Serving).await;

    let after = client
        .claim(claim_request("Ev-after"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(decision(&after), Decision::Claimed);
    let kept = app.get("ns", "Ev-before").await.unwrap();
    assert_eq!((kept.state(), kept.attempt), (State::Processing, 1));
    assert_eq!(kept, before.receipt.unwrap());
    assert_eq!(
        app.get("ns", "Ev-during").await.unwrap_err().code(),
        Code::NotFound
    );
    // The token from before the outage is still the current one.
    let done = client.complete(complete).await.unwrap().into_inner();
    assert_eq!(done.receipt.unwrap().state(), State::Completed);
    app.shutdown().await;
    drop(cluster);
}

/// ListServices and FileContainingSymbol over one reflection version (`v1` or `v1alpha`):
/// the listed services and the descriptor files returned for the ClaimService.
macro_rules! reflect {
    ($name:ident, $version:ident) => {
        async fn $name(addr: SocketAddr) -> (Vec<String>, Vec<prost_types::FileDescriptorProto>) {
            use tonic_reflection::pb::$version::ServerReflectionRequest;
            use tonic_reflection::pb::$version::server_reflection_client::ServerReflectionClient;
            use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
            use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
            let mut client = ServerReflectionClient::new(channel(addr).await.unwrap());
            let requests = [
                MessageRequest::ListServices(String::new()),
                MessageRequest::FileContainingSymbol(SERVICE.into()),
            ]
            .map(|m| ServerReflectionRequest {
                host: String::new(),
                message_request: Some(m),
            });
            let mut answers = client
                .server_reflection_info(futures::stream::iter(requests))
                .await
                .unwrap()
                .into_inner();
            let (mut services, mut files) = (Vec::new(), Vec::new());
            while let Some(answer) = answers.message().await.unwrap() {
                match answer.message_response {
                    Some(MessageResponse::ListServicesResponse(list)) => {
                        services.extend(list.service.into_iter().map(|s| s.name))
                    }
                    Some(MessageResponse::FileDescriptorResponse(found)) => {
                        files.extend(found.file_descriptor_proto.iter().map(|bytes| {
                            prost_types::FileDescriptorProto::decode(bytes.as_slice()).unwrap()
                        }))
                    }
                    other => panic!("unexpected reflection answer: {other:?}"),
                }
            }
            (services, files)
        }
    };
}
reflect!(reflect_v1, v1);
reflect!(reflect_v1alpha, v1alpha);

#[tokio::test]
async fn server_reflection_v1_and_v1alpha_list_every_service_and_describe_the_claim_service() {
    let app = TestApp::builder().spawn().await;
    for (version, (services, files)) in [
        ("v1", reflect_v1(app.addr).await),
        ("v1alpha", reflect_v1alpha(app.addr).await),
    ] {
        let reflection = format!("grpc.reflection.{version}.ServerReflection");
        for wanted in [SERVICE, "grpc.health.v1.Health", reflection.as_str()] {
            assert!(
                services.iter().any(|s| s == wanted),
                "{version}: {wanted} not in {services:?}"
            );
        }
        let claims = files.iter().find(|f| f.package() == "claimd.v1");
        let claims = claims.unwrap_or_else(|| panic!("{version}: no claimd.v1 descriptor"));
        assert_eq!(claims.name(), "claimd/v1/claims.proto");
        let service = claims
            .service
            .iter()
            .find(|s| s.name() == "ClaimService")
            .unwrap();
        let methods: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
        for rpc in [
            "Claim",
            "Complete",
            "Heartbeat",
            "Retry",
            "Quarantine",
            "Get",
            "ListOrphaned",
            "List",
            "Redrive",
        ] {
            assert!(
                methods.contains(&rpc),
                "{version}: {rpc} not in {methods:?}"
            );
        }
    }
    app.shutdown().await;
}

#[tokio::test]
async fn after_a_graceful_shutdown_the_server_has_exited_and_refuses_connections() {
    let app = TestApp::builder().spawn().await;
    let addr = app.addr;
    let mut old_client = app.client.clone();
    assert_eq!(
        decision(&app.claim("ns", "Ev1", b"fp").await),
        Decision::Claimed
    );
    app.shutdown().await; // panics unless the server task ended with Ok

    let endpoint = format!("http://{addr}");
    assert!(
        ClaimServiceClient::connect(endpoint.clone()).await.is_err(),
        "a new connection was accepted"
    );
    assert!(channel(addr).await.is_err());
    let status = old_client.claim(claim_request("Ev2")).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
}

#[tokio::test]
async fn a_draining_server_tells_health_watchers_not_serving_and_refuses_new_connections() {
    let app = TestApp::builder()
        .configure(|c| c.shutdown_grace = Duration::from_secs(2))
        .spawn()
        .await;
    let addr = app.addr;
    let mut health = health_client(addr).await;
    wait_for(&health, ServingStatus::Serving).await;
    let request = HealthCheckRequest {
        service: SERVICE.into(),
    };
    // An open Watch is an in-flight call: it keeps the server draining for the grace period.
    let mut watch = health.watch(request).await.unwrap().into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);

    let shutdown = tokio::spawn(app.shutdown());
    let next = watch.message().await.unwrap().unwrap();
    assert_eq!(next.status(), ServingStatus::NotServing);
    // NOT_SERVING is announced just before the listener closes: wait for that change.
    let deadline = Instant::now() + Duration::from_secs(15);
    while channel(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "still accepting connections while draining"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.await.unwrap(); // returns once the grace period is over
}
