//! claimd where a cluster runs it (docs/DEPLOY.md): the image `scripts/image` builds and the
//! manifests under deploy/kubernetes, rendered with `kubectl kustomize` and run by podman's
//! `kube play` — podman 4.3 with the `runc` runtime, cgroupfs and no default ulimits
//! (`podman.rs`; `scripts/test` installs podman and runc as root). Podman runs Pods,
//! Deployments, claims and ConfigMaps but no Services, probes or controllers: the tests do
//! those as Kubernetes does (`service.rs`, `deployment.rs`), from what the manifests declare.
//!
//! The image under test packages this run's debug binary (`images.rs`): the release build
//! `scripts/image` makes by default takes ten minutes here. PostgreSQL runs from an image made
//! of Debian's postgresql-15 (`deploy/postgres/`, test only), rebuilt when its stamp changes.
//! The tests take turns (one pod set at a time) and clean up before and after.

mod calls;
mod deployment;
mod embedded;
mod images;
mod manifests;
mod podman;
mod rolling;
mod service;

use manifests::Probe;
use serde_json::Value;

/// The API key a first-key task printed (the line `claimd_<id>_<secret>`).
fn key_in(log: &str) -> String {
    let key = log
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("claimd_"));
    let key = key.unwrap_or_else(|| panic!("no API key in the task's log:\n{log}"));
    key.to_owned()
}

/// The port of a `host:port` flag.
fn port_of(flag: &str) -> u16 {
    let port = flag.rsplit(':').next().and_then(|p| p.parse().ok());
    port.unwrap_or_else(|| panic!("{flag} ends with a port"))
}

/// Whole seconds of a flag's duration (`10s`, `2m`).
fn seconds_of(flag: &str) -> u64 {
    let (number, unit) = flag.split_at(flag.trim_end_matches(char::is_alphabetic).len());
    let n: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("{flag} is a duration"));
    match unit {
        "s" | "" => n,
        "m" => n * 60,
        other => panic!("{flag}: a unit the test does not read: {other}"),
    }
}

#[test]
fn both_overlays_render_with_probes_security_and_a_grace_period_that_covers_the_drain() {
    let image = format!("localhost/claimd:{}", images::version());
    for overlay in ["embedded", "postgres"] {
        let objects = manifests::render(overlay);
        let flags = manifests::flags(&objects);
        let deployment = manifests::one(&objects, "Deployment");
        let pod = &deployment["spec"]["template"]["spec"];
        let claimd = manifests::container(pod);
        let at = format!("overlays/{overlay}");
        assert_eq!(
            claimd["image"],
            image.as_str(),
            "{at}: the image of proto/VERSION"
        );
        let security = &pod["securityContext"];
        assert_eq!(security["runAsNonRoot"], true, "{at}");
        assert_eq!(security["runAsUser"], 65532, "{at}");
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault", "{at}");
        let security = &claimd["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true, "{at}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{at}");
        assert_eq!(
            security["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{at}"
        );
        assert_eq!(
            pod["enableServiceLinks"], false,
            "{at}: CLAIMD_* service variables"
        );
        assert!(
            claimd["resources"]["requests"].is_object(),
            "{at}: resources"
        );

        let health = port_of(&flags["CLAIMD_HEALTH_LISTEN"]);
        for which in ["startupProbe", "readinessProbe", "livenessProbe"] {
            assert_eq!(Probe::of(claimd, which).port, health, "{at}: {which}");
        }
        let listen = port_of(&flags["CLAIMD_LISTEN"]);
        assert_eq!(manifests::target_port(&objects, claimd), listen, "{at}");
        let port = &manifests::one(&objects, "Service")["spec"]["ports"][0];
        assert_eq!(port["appProtocol"], "grpc", "{at}");

        let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        let pre_stop = claimd["lifecycle"]["preStop"]["sleep"]["seconds"].as_u64();
        let drain = pre_stop.unwrap_or(0) + seconds_of(&flags["CLAIMD_SHUTDOWN_GRACE"]);
        assert!(
            grace >= drain + 5,
            "{at}: a grace of {grace}s for {drain}s of drain"
        );

        let selected = &deployment["spec"]["selector"]["matchLabels"];
        let budget = manifests::one(&objects, "PodDisruptionBudget");
        assert_eq!(&budget["spec"]["selector"]["matchLabels"], selected, "{at}");
        let policy = manifests::one(&objects, "NetworkPolicy");
        assert_eq!(
            &policy["spec"]["podSelector"]["matchLabels"], selected,
            "{at}"
        );
        assert!(
            objects.iter().all(|o| o["kind"] != "Secret")
                && !flags.contains_key("CLAIMD_SEAL_KEYS")
                && !flags.contains_key("CLAIMD_DATABASE_URL"),
            "{at}: secrets are only referred to"
        );
        match overlay {
            "embedded" => {
                assert_eq!(deployment["spec"]["replicas"], 1, "{at}");
                assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate", "{at}");
                let data = flags["CLAIMD_DATA_DIR"].as_str();
                // The embedded overlay mounts its claim.
                let mounts = claimd["volumeMounts"].as_array().expect("mounts");
                assert!(
                    mounts.iter().any(|m| m["mountPath"] == data),
                    "{at}: {data}"
                );
            }
            _ => {
                assert!(deployment["spec"]["replicas"].as_u64() >= Some(2), "{at}");
                // The order the rolling test's rollout follows.
                let rolling = &deployment["spec"]["strategy"]["rollingUpdate"];
                assert_eq!(
                    (&rolling["maxSurge"], &rolling["maxUnavailable"]),
                    (&1.into(), &0.into())
                );
                // The postgres overlay's container takes its secrets from the environment.
                let env = claimd["env"].as_array().expect("env");
                for name in ["CLAIMD_DATABASE_URL", "CLAIMD_SEAL_KEYS"] {
                    let from = env.iter().find(|e| e["name"] == name).expect(name);
                    assert_eq!(from["valueFrom"]["secretKeyRef"]["name"], "claimd", "{at}");
                }
            }
        }
    }
    for task in [
        "migrate-job.yaml",
        "first-key-postgres.yaml",
        "first-key-embedded.yaml",
    ] {
        let object: Value = manifests::task(task);
        let spec = match object["kind"].as_str() {
            Some("Job") => &object["spec"]["template"]["spec"],
            _ => &object["spec"],
        };
        assert_eq!(
            manifests::container(spec)["image"],
            image.as_str(),
            "tasks/{task}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_claimd_from_scratch_as_uid_65532_without_a_shell() {
    let image = images::claimd().await;
    let config = podman::run(&["image", "inspect", image, "--format", "{{json .Config}}"]);
    // podman prints the image's configuration as JSON.
    let config: Value = serde_json::from_str(&config).expect("the image's configuration");
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"], serde_json::json!(["claimd"]));
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]));
    assert_eq!(config["WorkingDir"], "/var/lib/claimd");
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        images::version().as_str()
    );
    assert!(labels["org.opencontainers.image.source"].is_string());

    let version = podman::run(&["run", "--rm", image, "--version"]);
    assert!(
        version.starts_with(&format!("claimd {}", images::version())),
        "{version}"
    );
    let shell = podman::output(&[
        "run",
        "--rm",
        "--entrypoint",
        "/bin/sh",
        image,
        "-c",
        "true",
    ]);
    assert!(!shell.status.success(), "the image has a shell");
    let bytes = podman::run(&["image", "inspect", image, "--format", "{{.Size}}"]);
    // podman prints the size as a number of bytes.
    let bytes: u64 = bytes.trim().parse().expect("a size in bytes");
    // Shown with --nocapture: the size of the tests' (debug) image.
    println!("{image}: {:.1} MB", bytes as f64 / 1e6);
    assert!(bytes <= 40_000_000, "{image} is {bytes} bytes");
}
