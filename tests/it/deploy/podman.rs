//! Podman as the deployment tests run it: a containers.conf of their own (the `runc`
//! runtime, cgroupfs, no default ulimits — what podman needs on these machines, with nothing
//! global edited), each command off the async workers, and every pod, volume and secret the
//! tests make removed before and after each test. The tests take [`turn`]s: one at a time,
//! as their pods, volumes and the Secret share the manifests' names.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What podman on these machines needs (crun cannot set rlimits here; there is no systemd).
const CONTAINERS_CONF: &str = "\
[containers]
default_ulimits = []

[engine]
runtime = \"runc\"
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
";

static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held for a whole deployment test: the next one waits.
pub async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    TURN.lock().await
}

/// Where the deployment tests keep their podman configuration, build contexts and stamps.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("deploy")
}

/// The containers.conf every podman command here reads (`CONTAINERS_CONF`).
pub fn conf() -> PathBuf {
    static WRITTEN: OnceLock<PathBuf> = OnceLock::new();
    WRITTEN
        .get_or_init(|| {
            let path = dir().join("containers.conf");
            // The target directory is writable wherever the tests build.
            std::fs::create_dir_all(dir()).expect("target/tmp/deploy");
            std::fs::write(&path, CONTAINERS_CONF).expect("write containers.conf");
            path
        })
        .clone()
}

/// Fails the test, saying what to install, when podman or runc is missing.
fn require() {
    static FOUND: OnceLock<()> = OnceLock::new();
    FOUND.get_or_init(|| {
        for (tool, arg) in [("podman", "--version"), ("runc", "--version")] {
            let ran = Command::new(tool).arg(arg).stdout(Stdio::null()).status();
            assert!(
                ran.is_ok_and(|s| s.success()),
                "the deployment tests need `{tool}`: install podman and runc \
                 (Debian: apt-get install podman runc; scripts/test installs them as root)"
            );
        }
    });
}

/// `podman` reading the tests' containers.conf.
pub fn command() -> Command {
    require();
    let mut cmd = Command::new("podman");
    cmd.env("CONTAINERS_CONF", conf());
    cmd
}

/// Runs `podman args…` and returns what it printed, whether it succeeded or not.
pub fn output(args: &[&str]) -> Output {
    // A test without podman has failed in `require` already.
    command().args(args).output().expect("podman runs")
}

/// Runs `podman args…`, failing the test with podman's words if it fails; its stdout.
pub fn run(args: &[&str]) -> String {
    let out = output(args);
    assert!(
        out.status.success(),
        "podman {} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`run`] on a blocking thread, so the async workers (and a workload on them) carry on.
pub async fn run_async(args: Vec<String>) -> String {
    // `run` fails the test itself when podman does.
    tokio::task::spawn_blocking(move || run(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .expect("a podman command ran")
}

/// `podman kube play` of `yaml` (documents separated by `---`); the pods it made start.
pub async fn play(yaml: String) -> String {
    // The temporary directory is writable wherever the tests run.
    let file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("a temporary file for kube play");
    std::fs::write(file.path(), yaml).expect("write the kube play file");
    let path = file.path().display().to_string();
    run_async(vec!["kube".into(), "play".into(), path]).await
}

/// The address of pod `pod` on podman's kube network.
pub fn ip_of(pod: &str) -> IpAddr {
    let infra = run(&["pod", "inspect", pod, "--format", "{{.InfraContainerID}}"]);
    let format = "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}";
    let ip = run(&["inspect", infra.trim(), "--format", format]);
    ip.trim()
        .parse()
        .unwrap_or_else(|e| panic!("pod {pod} has no address ({ip:?}): {e}"))
}

/// Everything container `container` wrote to stdout and stderr.
pub fn logs(container: &str) -> String {
    let out = output(&["logs", container]);
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The container's status (`running`, `exited`, …), exit code and restarts so far.
pub fn state(container: &str) -> (String, i32, u32) {
    let format = "{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}";
    let line = run(&["inspect", container, "--format", format]);
    let mut words = line.split_whitespace();
    let status = words.next().unwrap_or_default().to_owned();
    let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
    let restarts = words.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, code, restarts)
}

/// Waits until `container` has exited (a task's pod) and returns its exit code.
pub async fn exit_code(container: &str, patience: Duration) -> i32 {
    let deadline = Instant::now() + patience;
    loop {
        let (status, code, _) = state(container);
        if status == "exited" {
            return code;
        }
        assert!(
            Instant::now() < deadline,
            "{container} still {status} after {patience:?}:\n{}",
            logs(container)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A podman secret named `name` holding `data`, as `kube play` reads a Secret's keys
/// (`secretKeyRef`): a JSON object of base64 values.
pub fn secret(name: &str, data: &[(&str, &str)]) {
    use base64::Engine;
    let map: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| {
            let value = base64::engine::general_purpose::STANDARD.encode(v);
            ((*k).to_owned(), serde_json::Value::String(value))
        })
        .collect();
    // The temporary directory is writable wherever the tests run.
    let file = tempfile::NamedTempFile::new().expect("a temporary file for the secret");
    std::fs::write(file.path(), serde_json::Value::Object(map).to_string()).expect("write it");
    run(&["secret", "create", name, &file.path().display().to_string()]);
}

/// Removes every pod whose name starts with `claimd`, the volumes the manifests make
/// (`claimd-*`, and `tmp`: kube play turns the emptyDir into a named volume) and the
/// secret `claimd`; what is not there is skipped. It never panics: it also runs while a
/// failed test unwinds.
pub fn clean() {
    let quiet = |args: &[&str]| -> String {
        let out = command()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    // podman 4.3 at times refuses to remove a pod whose container stopped meanwhile
    // ("container state improper"): asked again, it does.
    for _ in 0..5 {
        let pods = quiet(&["pod", "ps", "--format", "{{.Name}}"]);
        let pods: Vec<&str> = pods.lines().filter(|p| p.starts_with("claimd")).collect();
        if pods.is_empty() {
            break;
        }
        quiet(&[&["pod", "rm", "--force", "--time", "0"][..], &pods].concat());
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let volumes = quiet(&["volume", "ls", "--format", "{{.Name}}"]);
    let volumes: Vec<&str> = volumes
        .lines()
        .filter(|v| v.starts_with("claimd-") || *v == "tmp")
        .collect();
    if !volumes.is_empty() {
        quiet(&[&["volume", "rm", "--force"][..], &volumes].concat());
    }
    quiet(&["secret", "rm", "claimd"]);
}

/// Cleans when made and when dropped (a test that failed leaves nothing running).
pub struct Cleaned;

impl Cleaned {
    pub fn new() -> Cleaned {
        clean();
        Cleaned
    }
}

impl Drop for Cleaned {
    fn drop(&mut self) {
        clean();
    }
}
