//! The embedded overlay on podman: the first-key pod of deploy/kubernetes/tasks writes the
//! first API key on the claim's volume, the rendered Deployment serves behind its Service,
//! and its pod is replaced as `strategy: Recreate` does it (the old pod stopped first, then
//! a new one on the same volume) with every receipt still there. And a flag claimd refuses,
//! put in the ConfigMap: the pod never turns ready and its log says why in claimd's words.

use super::calls::Client;
use super::deployment::{Deployment, run_task};
use super::service::{self, Service};
use super::{images, key_in, manifests, podman};
use claimd::pb::{Decision, State};
use serde_json::Value;
use std::time::Instant;
use tonic_health::pb::health_check_response::ServingStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_overlay_keeps_its_receipts_when_its_pod_is_replaced() {
    let _turn = podman::turn().await;
    let image = images::claimd().await;
    let _cleaned = podman::Cleaned::new();
    let objects = manifests::render("embedded");
    let claims: Vec<Value> = objects
        .iter()
        .filter(|o| o["kind"] == "PersistentVolumeClaim")
        .cloned()
        .collect();
    assert_eq!(claims.len(), 1, "the embedded overlay claims one volume");
    let first_key = run_task(&manifests::task("first-key-embedded.yaml"), image, &claims).await;
    let api_key = key_in(&first_key);

    let mut deployment = Deployment::of(&objects, image);
    assert_eq!(deployment.replicas, 1);
    deployment.play(&objects).await;
    let first = deployment.pods[0].clone();
    deployment.ready(&first).await;
    let service = Service::start().await;
    service.add(deployment.endpoint(&first));
    let client = Client::new(service.addr, &api_key);
    let (decision, token, _) = client.claim("order-1").await;
    assert_eq!(decision, Decision::Claimed);
    client.complete("order-1", &token, b"shipped").await;

    // Recreate: the old pod is gone before its replacement opens the same volume.
    let stopped = deployment.stop(&first, &service).await;
    assert_eq!(stopped.exit_code, 0, "after SIGTERM:\n{}", stopped.log);
    let second = deployment.add_pod().await;
    deployment.ready(&second).await;
    service.add(deployment.endpoint(&second));

    let (duplicate, _, receipt) = client.claim("order-1").await;
    assert_eq!(
        duplicate,
        Decision::Completed,
        "the receipt outlived its pod"
    );
    assert_eq!(
        receipt.map(|r| r.response).as_deref(),
        Some(&b"shipped"[..])
    );
    let receipt = client.get("order-1").await;
    assert_eq!((receipt.state(), receipt.attempt), (State::Completed, 1));
    let log = second.log();
    assert!(
        log.contains("payloads are sealed under key") && !log.contains("generated a seal key"),
        "the replacement did not read the seal key on the volume:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_flag_in_the_config_map_fails_readiness_with_claimds_start_up_error_in_the_log() {
    let _turn = podman::turn().await;
    let image = images::claimd().await;
    let _cleaned = podman::Cleaned::new();
    let mut objects = manifests::render("embedded");
    // Both overlays have their flags in claimd-flags (the render test reads them there).
    let flags = objects
        .iter_mut()
        .find(|o| o["kind"] == "ConfigMap" && manifests::name(o).starts_with("claimd-flags"))
        .expect("the claimd-flags ConfigMap");
    // A unit claimd does not take, as a hand-edited manifest may hold.
    flags["data"]["CLAIMD_SHUTDOWN_GRACE"] = Value::from("10sec");

    let mut deployment = Deployment::of(&objects, image);
    deployment.play(&objects).await;
    let pod = deployment.pods[0].clone();
    // The declared readiness probe, for two of its periods: never SERVING.
    let probe = deployment.readiness.clone();
    let until = Instant::now() + probe.period * 2;
    let mut answers = Vec::new();
    while Instant::now() < until {
        let answer = service::check(pod.ip, &probe).await;
        assert_ne!(answer, Ok(ServingStatus::Serving), "ready with a bad flag");
        answers.push(answer);
        tokio::time::sleep(probe.period / 4).await;
    }
    let log = pod.log();
    let (_, exit_code, restarts) = podman::state(&pod.container());
    assert!(
        log.contains("invalid value '10sec' for '--shutdown-grace"),
        "claimd's start-up error is not in the log (probe said {answers:?}):\n{log}"
    );
    assert!(exit_code != 0 || restarts > 0, "claimd kept running");
}
