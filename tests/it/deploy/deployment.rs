//! A rendered Deployment run by podman as the controllers run it: `kube play` of the
//! Deployment makes its first pods (`<name>-pod-<n>`); a replacement is a pod made from its
//! template (`<name>-r<n>`), as a new ReplicaSet's; a pod is ready when its declared
//! readiness probe says SERVING; and a pod is stopped as the kubelet stops it — out of the
//! Service first, the preStop sleep, then SIGTERM (`podman stop`) with what is left of
//! `terminationGracePeriodSeconds` before SIGKILL.

use super::manifests::{self, Probe};
use super::podman;
use super::service::{self, Service};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// A pod of the Deployment.
#[derive(Debug, Clone)]
pub struct Pod {
    pub name: String,
    pub ip: IpAddr,
}

impl Pod {
    /// Its claimd container, as podman names it.
    pub fn container(&self) -> String {
        format!("{}-claimd", self.name)
    }

    /// What claimd printed.
    pub fn log(&self) -> String {
        podman::logs(&self.container())
    }
}

/// How a stopped pod ended.
#[derive(Debug)]
pub struct Stopped {
    pub exit_code: i32,
    /// From SIGTERM to exit.
    pub drained_in: Duration,
    pub log: String,
}

/// The Deployment of a rendered overlay and its pods.
pub struct Deployment {
    name: String,
    deployment: Value,
    /// The ConfigMaps and claims played with every pod (kube play resolves them per file).
    with: Vec<Value>,
    image: String,
    pub replicas: usize,
    pub readiness: Probe,
    startup: Probe,
    pub pre_stop: Duration,
    pub grace: Duration,
    /// The port the Service sends to.
    pub port: u16,
    made: usize,
    pub pods: Vec<Pod>,
}

impl Deployment {
    /// The Deployment of `objects` (a rendered overlay), to run on `image`.
    pub fn of(objects: &[Value], image: &str) -> Deployment {
        let deployment = manifests::one(objects, "Deployment").clone();
        let spec = &deployment["spec"]["template"]["spec"];
        let container = manifests::container(spec);
        let with = manifests::for_podman(objects, image)
            .into_iter()
            .filter(|o| o["kind"] == "ConfigMap")
            .collect();
        // Both overlays declare a preStop sleep (the render test checks it).
        let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"].as_u64();
        Deployment {
            name: manifests::name(&deployment).to_owned(),
            with,
            image: image.to_owned(),
            replicas: usize::try_from(deployment["spec"]["replicas"].as_u64().unwrap_or(1))
                .unwrap_or(1),
            readiness: Probe::of(container, "readinessProbe"),
            startup: Probe::of(container, "startupProbe"),
            pre_stop: Duration::from_secs(pre_stop.expect("a preStop sleep")),
            grace: Duration::from_secs(
                spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30),
            ),
            port: manifests::target_port(objects, container),
            made: 0,
            deployment,
            pods: Vec::new(),
        }
    }

    /// `kube play` of the Deployment (with `objects`' ConfigMaps and claims): its first pods.
    /// A claim whose volume exists already (a task mounted it first) is not played again.
    pub async fn play(&mut self, objects: &[Value]) {
        let mut docs = manifests::for_podman(objects, &self.image);
        docs.retain(|o| {
            o["kind"] != "PersistentVolumeClaim"
                || !podman::output(&["volume", "exists", manifests::name(o)])
                    .status
                    .success()
        });
        podman::play(manifests::to_yaml(&docs)).await;
        for n in 0..self.replicas {
            let name = format!("{}-pod-{n}", self.name);
            let ip = podman::ip_of(&name);
            self.pods.push(Pod { name, ip });
        }
    }

    /// A new pod from the template, started (not yet ready).
    pub async fn add_pod(&mut self) -> Pod {
        self.made += 1;
        let name = format!("{}-r{}", self.name, self.made);
        let pod = manifests::pod_from(&self.deployment["spec"]["template"], &name);
        let mut docs = self.with.clone();
        docs.extend(manifests::for_podman(&[pod], &self.image));
        podman::play(manifests::to_yaml(&docs)).await;
        let pod = Pod {
            ip: podman::ip_of(&name),
            name,
        };
        self.pods.push(pod.clone());
        pod
    }

    /// The pod's endpoint behind the Service.
    pub fn endpoint(&self, pod: &Pod) -> SocketAddr {
        SocketAddr::new(pod.ip, self.port)
    }

    /// Waits until the declared readiness probe answers SERVING (within the startup probe's
    /// budget); the probe runs every 200 ms rather than every period, to keep the test short.
    pub async fn ready(&self, pod: &Pod) {
        let budget = self.startup.period * self.startup.failures;
        let every = Duration::from_millis(200);
        service::wait_serving(pod.ip, &self.readiness, every, budget, || pod.log()).await;
    }

    /// Takes `pod` out of `service`, sleeps its preStop, sends SIGTERM and waits for it to
    /// exit (SIGKILL at the end of the grace period), then removes the pod.
    pub async fn stop(&mut self, pod: &Pod, service: &Service) -> Stopped {
        service.remove(self.endpoint(pod));
        tokio::time::sleep(self.pre_stop).await;
        let left = self
            .grace
            .saturating_sub(self.pre_stop)
            .as_secs()
            .to_string();
        let sent = Instant::now();
        let args = ["stop", "--time", &left, &pod.container()];
        podman::run_async(args.map(String::from).to_vec()).await;
        let drained_in = sent.elapsed();
        let (status, exit_code, _) = podman::state(&pod.container());
        assert_eq!(status, "exited", "{} after podman stop", pod.name);
        let log = pod.log();
        let rm = ["pod", "rm", "--force", &pod.name];
        podman::run_async(rm.map(String::from).to_vec()).await;
        self.pods.retain(|p| p.name != pod.name);
        Stopped {
            exit_code,
            drained_in,
            log,
        }
    }
}

/// Runs a task of deploy/kubernetes/tasks — a Job (its pod, as the Job controller makes
/// it) or a Pod — on `image` with `with` (the claims it mounts), waits for it to end, and
/// returns its log; fails unless it exited 0. Its pod is removed.
pub async fn run_task(task: &Value, image: &str, with: &[Value]) -> String {
    let name = manifests::name(task).to_owned();
    let pod = match task["kind"].as_str() {
        Some("Job") => manifests::pod_from(&task["spec"]["template"], &name),
        _ => task.clone(),
    };
    let mut docs = with.to_vec();
    docs.extend(manifests::for_podman(&[pod], image));
    podman::play(manifests::to_yaml(&docs)).await;
    let container = format!("{name}-claimd");
    let code = podman::exit_code(&container, Duration::from_secs(60)).await;
    let log = podman::logs(&container);
    assert_eq!(code, 0, "the task {name} failed:\n{log}");
    let rm = ["pod", "rm", "--force", &name];
    podman::run_async(rm.map(String::from).to_vec()).await;
    log
}
