//! The postgres overlay as a cluster runs it, on podman: a PostgreSQL pod (the test's own
//! image), the Secret `claimd` (the database URL and a seal key), the migrate Job and the
//! first-key pod of deploy/kubernetes/tasks, then the rendered Deployment behind its
//! Service. Claim, Complete and a duplicate go through the Service; then a rolling restart
//! as the Deployment's strategy declares it (maxSurge 1, maxUnavailable 0: a new pod, ready,
//! then one old pod out of the Service, its preStop sleep, SIGTERM) while the history
//! workload keeps calling through the Service.

use super::calls::{self, Client};
use super::deployment::{Deployment, run_task};
use super::service::Service;
use super::{images, key_in, manifests, podman};
use claimd::pb::Decision;
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

/// Plays tests/it/deploy/postgres/pod.yaml on `image` and waits until PostgreSQL takes
/// connections; its database URL as a pod in the cluster reaches it.
async fn start_postgres(image: &str) -> String {
    let path = format!(
        "{}/tests/it/deploy/postgres/pod.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    // The pod's manifest is part of the checkout.
    let yaml = std::fs::read_to_string(path).expect("the PostgreSQL pod's manifest");
    podman::play(yaml.replace("localhost/claimd-test-postgres:15", image)).await;
    let url = format!(
        "postgres://postgres@{}:5432/claimd",
        podman::ip_of("claimd-test-postgres")
    );
    let deadline = Instant::now() + 30 * SECOND;
    loop {
        use sqlx::Connection;
        match sqlx::PgConnection::connect(&url).await {
            Ok(connection) => {
                drop(connection.close().await);
                return url;
            }
            Err(e) => assert!(
                Instant::now() < deadline,
                "PostgreSQL did not take connections at {url}: {e}\n{}",
                podman::logs("claimd-test-postgres-postgres")
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A new seal key, as `openssl rand -base64 32` makes one.
fn seal_key() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_postgres_overlay_answers_through_its_service_and_rolls_under_load_losing_nothing() {
    let _turn = podman::turn().await;
    let (image, postgres) = (images::claimd().await, images::postgres().await);
    let _cleaned = podman::Cleaned::new();
    let began = Instant::now();
    let url = start_postgres(postgres).await;
    let seal = seal_key();
    podman::secret("claimd", &[("database-url", &url), ("seal-keys", &seal)]);

    let migrated = run_task(&manifests::task("migrate-job.yaml"), image, &[]).await;
    assert!(migrated.contains("migrations applied"), "{migrated}");
    let first_key = run_task(&manifests::task("first-key-postgres.yaml"), image, &[]).await;
    let api_key = key_in(&first_key);

    let objects = manifests::render("postgres");
    let mut deployment = Deployment::of(&objects, image);
    assert!(
        deployment.replicas >= 2,
        "the postgres overlay runs 2+ replicas"
    );
    deployment.play(&objects).await;
    let service = Service::start().await;
    for pod in deployment.pods.clone() {
        deployment.ready(&pod).await;
        service.add(deployment.endpoint(&pod));
    }

    let client = Client::new(service.addr, &api_key);
    let (decision, token, _) = client.claim("evt-before").await;
    assert_eq!(decision, Decision::Claimed);
    client.complete("evt-before", &token, b"sent").await;
    let (duplicate, _, receipt) = client.claim("evt-before").await;
    assert_eq!(duplicate, Decision::Completed);
    assert_eq!(receipt.map(|r| r.response).as_deref(), Some(&b"sent"[..]));
    let ready_after = began.elapsed();

    let originals = deployment.pods.clone();
    let mut stopped = Vec::new();
    let run = calls::under_rollout(service.addr, &api_key, 2 * SECOND, async {
        tokio::time::sleep(2 * SECOND).await;
        for old in &originals {
            let new = deployment.add_pod().await;
            deployment.ready(&new).await;
            service.add(deployment.endpoint(&new));
            stopped.push((old.name.clone(), deployment.stop(old, &service).await));
        }
    })
    .await;
    // Shown with --nocapture: how long each step took.
    println!(
        "postgres overlay: serving through the Service {ready_after:?} after the start; \
         drains {:?}",
        stopped
            .iter()
            .map(|(_, s)| s.drained_in)
            .collect::<Vec<_>>()
    );
    run.verdict.assert_valid();
    assert!(
        run.internal.is_empty(),
        "calls answered INTERNAL during the rollout: {:?}",
        run.internal
    );
    assert!(
        run.verdict.claimed > 20,
        "too little load: {:?}",
        run.verdict
    );
    let left = deployment.grace - deployment.pre_stop;
    for (pod, s) in &stopped {
        assert_eq!(s.exit_code, 0, "{pod} after SIGTERM:\n{}", s.log);
        assert!(s.drained_in < left, "{pod} drained in {:?}", s.drained_in);
        assert!(
            s.log.contains("draining in-flight calls"),
            "{pod}:\n{}",
            s.log
        );
    }
    assert_eq!(deployment.pods.len(), originals.len());
    assert!(
        deployment
            .pods
            .iter()
            .all(|p| !originals.iter().any(|o| o.name == p.name))
    );
    let before = client.get("evt-before").await;
    assert_eq!(
        before.response, b"sent",
        "the receipt from before the rollout"
    );
    for pod in &deployment.pods {
        let log = pod.log();
        assert!(
            !log.contains(&seal) && !log.contains(&api_key),
            "a secret in {}",
            pod.name
        );
    }
}
