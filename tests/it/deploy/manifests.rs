//! The manifests under deploy/kubernetes as the tests read them: an overlay rendered by
//! `kubectl kustomize` (what a user applies), turned into JSON offline (`kubectl label
//! --local -o json`, which changes nothing here: every object already has the label), and
//! what the manifests declare that the tests act on — the readiness probe, the preStop
//! sleep, the grace period, the Service's target port, the flags. Podman 4.3's `kube play`
//! takes Pods, Deployments, PersistentVolumeClaims and ConfigMaps; [`for_podman`] gives it
//! those, with the one change it needs (below).

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// deploy/kubernetes in this checkout.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// Runs kubectl, failing the test with what to install when it is missing.
fn kubectl(args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = Command::new("kubectl");
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("the deployment tests need kubectl with kustomize (Debian: apt-get install kubernetes-client): {e}")
    });
    if let Some(text) = stdin {
        // The child reads its whole stdin.
        let mut pipe = child.stdin.take().expect("kubectl's stdin");
        pipe.write_all(text.as_bytes()).expect("write to kubectl");
    }
    drop(child.stdin.take());
    // A started kubectl can be waited for.
    let out = child.wait_with_output().expect("kubectl ran");
    assert!(
        out.status.success(),
        "kubectl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A stream of YAML documents as JSON objects.
fn as_json(yaml: &str) -> Vec<Value> {
    let label = "app.kubernetes.io/part-of=claimd";
    let args = [
        "label",
        "--local",
        "--overwrite",
        "-o",
        "json",
        "-f",
        "-",
        label,
    ];
    let json = kubectl(&args, Some(yaml));
    serde_json::Deserializer::from_str(&json)
        .into_iter::<Value>()
        // kubectl prints JSON.
        .map(|v| v.expect("kubectl's JSON"))
        .collect()
}

/// `kubectl kustomize deploy/kubernetes/overlays/{overlay}`, as JSON objects.
pub fn render(overlay: &str) -> Vec<Value> {
    let dir = root().join("overlays").join(overlay);
    as_json(&kubectl(&["kustomize", &dir.display().to_string()], None))
}

/// deploy/kubernetes/tasks/{file} as one JSON object.
pub fn task(file: &str) -> Value {
    let path = root().join("tasks").join(file);
    let yaml = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut objects = as_json(&yaml);
    assert_eq!(objects.len(), 1, "{file} holds one object");
    objects.remove(0)
}

/// The one object of `kind` among `objects`.
pub fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in the rendered overlay");
    found[0]
}

/// The flags the overlay gives claimd: the data of the ConfigMap `claimd-flags-<hash>`.
pub fn flags(objects: &[Value]) -> BTreeMap<String, String> {
    // Both overlays have their flags there (docs/DEPLOY.md), as a map of strings.
    let map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && name(o).starts_with("claimd-flags"))
        .expect("the claimd-flags ConfigMap");
    let data = map["data"].as_object().expect("the flags' data");
    data.iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// `metadata.name`.
pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The claimd container of a pod spec.
pub fn container(pod_spec: &Value) -> &Value {
    // Every pod spec of deploy/kubernetes runs one container named claimd.
    let containers = pod_spec["containers"].as_array().expect("containers");
    containers
        .iter()
        .find(|c| c["name"] == "claimd")
        .expect("a container named claimd")
}

fn seconds(v: &Value, default: u64) -> Duration {
    Duration::from_secs(v.as_u64().unwrap_or(default))
}

/// A gRPC probe as declared: `grpc.port`, `grpc.service` and its timing (Kubernetes'
/// defaults where it gives none).
#[derive(Debug, Clone)]
pub struct Probe {
    pub port: u16,
    pub service: String,
    pub period: Duration,
    pub timeout: Duration,
    pub failures: u32,
}

impl Probe {
    /// The probe `which` (`readinessProbe`, …) of `container`; fails unless it is gRPC.
    pub fn of(container: &Value, which: &str) -> Probe {
        let probe = &container[which];
        let port = probe["grpc"]["port"].as_u64();
        let port = port.unwrap_or_else(|| panic!("{which} is a gRPC probe: {probe}"));
        Probe {
            // Kubernetes takes only port numbers there.
            port: u16::try_from(port).expect("a port number"),
            service: probe["grpc"]["service"].as_str().unwrap_or("").to_owned(),
            period: seconds(&probe["periodSeconds"], 10),
            timeout: seconds(&probe["timeoutSeconds"], 1),
            failures: u32::try_from(probe["failureThreshold"].as_u64().unwrap_or(3))
                .unwrap_or(u32::MAX),
        }
    }
}

/// The port the Service sends to, as the claimd container declares it (`targetPort` by
/// name or number).
pub fn target_port(objects: &[Value], container: &Value) -> u16 {
    let target = &one(objects, "Service")["spec"]["ports"][0]["targetPort"];
    let port = match target.as_u64() {
        Some(number) => number,
        None => container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == *target)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("no container port named {target}")),
    };
    // Kubernetes takes only port numbers there.
    u16::try_from(port).expect("a port number")
}

/// Sets the image of every container of a pod spec (the tests' build of the image).
pub fn set_image(pod_spec: &mut Value, image: &str) {
    for c in pod_spec["containers"].as_array_mut().into_iter().flatten() {
        c["image"] = Value::from(image);
    }
}

/// What `kube play` runs of `objects`: the ConfigMaps, PersistentVolumeClaims, Pods and
/// Deployments (Secrets are podman secrets, made by the test; Services, budgets and
/// policies it does not know), with `image` for claimd's. Podman 4.3 publishes every
/// `containerPort` on the host, where two replicas' ports collide: the ports are left out
/// (the Service's target port was read first, [`target_port`]).
pub fn for_podman(objects: &[Value], image: &str) -> Vec<Value> {
    let kinds = ["ConfigMap", "PersistentVolumeClaim", "Pod", "Deployment"];
    let mut played: Vec<Value> = objects
        .iter()
        .filter(|o| kinds.iter().any(|k| o["kind"] == *k))
        .cloned()
        .collect();
    for object in &mut played {
        let spec = match object["kind"].as_str() {
            Some("Pod") => &mut object["spec"],
            Some("Deployment") => &mut object["spec"]["template"]["spec"],
            _ => continue,
        };
        set_image(spec, image);
        for c in spec["containers"].as_array_mut().into_iter().flatten() {
            c.as_object_mut().map(|c| c.remove("ports"));
        }
    }
    played
}

/// A pod made from `template` (a Deployment's or a Job's), named `name`, as the
/// ReplicaSet or Job controller makes one.
pub fn pod_from(template: &Value, name: &str) -> Value {
    let mut metadata = template["metadata"].clone();
    metadata["name"] = Value::from(name);
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"].clone(),
    })
}

/// Documents for `kube play` (JSON is YAML).
pub fn to_yaml(objects: &[Value]) -> String {
    let docs: Vec<String> = objects.iter().map(Value::to_string).collect();
    docs.join("\n---\n")
}
