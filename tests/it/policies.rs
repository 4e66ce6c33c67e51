//! Namespace policies: applied per namespace on both stores and replaced for the next call;
//! and the policy file as an operator meets it, through the real binary — `check-config`
//! printing the effective policies or naming the bad key, `serve --config` refusing a bad
//! file, and SIGHUP putting a rewritten file in force without a restart (a bad rewrite is
//! refused and the policies in force stay).

use crate::common::app::{Backend, TestApp, connect, decision};
use crate::common::process::{Claimd, claimd, free_addr};
use chrono::TimeDelta;
use claimd::domain::{Policies, Policy};
use claimd::pb::{self, Decision, State};
use nix::sys::signal::Signal;
use std::path::Path;
use std::time::{Duration, Instant};

type Client = pb::claim_service_client::ClaimServiceClient<tonic::transport::Channel>;

/// The lease a Claim without `lease_ttl` got, in seconds.
fn lease_secs(receipt: &pb::Receipt) -> i64 {
    let at = |t: &Option<prost_types::Timestamp>| t.as_ref().expect("timestamp").seconds;
    at(&receipt.lease_expires_at) - at(&receipt.updated_at)
}

/// Claims `key` in `ns` without a lease; the receipt.
async fn claim_default_lease(client: &mut Client, ns: &str, key: &str) -> pb::Receipt {
    let request = pb::ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    let reply = client.claim(request).await.expect("Claim").into_inner();
    assert_eq!(decision(&reply), Decision::Claimed, "{reply:?}");
    reply.receipt.expect("a receipt")
}

fn fast() -> Policies {
    let mut policies = Policies::default();
    let fast = Policy {
        lease_ttl: TimeDelta::seconds(5),
        max_attempts: 1,
        ..Policy::default()
    };
    policies.namespaces.insert("fast".into(), fast);
    policies
}

async fn each_namespace_gets_its_own_lease_and_attempt_budget(backend: Backend) {
    let app: TestApp = TestApp::builder()
        .backend(backend)
        .configure(|c| c.policies = fast())
        .spawn()
        .await;
    let mut client = app.client.clone();
    let r = claim_default_lease(&mut client, "fast", "Ev1").await;
    assert_eq!(lease_secs(&r), 5);
    let r = claim_default_lease(&mut client, "other", "Ev1").await;
    assert_eq!(lease_secs(&r), 90);

    // One attempt in "fast": the first expired lease quarantines instead of a takeover.
    app.advance(Duration::from_secs(6));
    let reply = app.claim("fast", "Ev1", b"fp").await;
    assert_eq!(decision(&reply), Decision::Quarantined, "{reply:?}");
    app.advance(Duration::from_secs(90));
    let reply = app.claim("other", "Ev1", b"fp").await;
    assert_eq!(decision(&reply), Decision::Claimed, "{reply:?}");
    assert_eq!(reply.receipt.expect("a receipt").state(), State::Processing);

    // Replaced policies apply to the very next call.
    let mut next = fast();
    next.default.lease_ttl = TimeDelta::seconds(42);
    app.policies.replace(next);
    let r = claim_default_lease(&mut client, "other", "Ev2").await;
    assert_eq!(lease_secs(&r), 42);
    app.shutdown().await;
}

conformance!(each_namespace_gets_its_own_lease_and_attempt_budget);

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the policy file");
    path
}

/// Bad files and the key each error must name.
const BAD: [(&str, &str); 5] = [
    (
        "[namespaces.\"slack-events\"]\nleese = \"5s\"\n",
        "namespaces.\"slack-events\".leese",
    ),
    (
        "[namespaces.\"slack-events\"]\nlease = \"5 minutes\"\n",
        "namespaces.\"slack-events\".lease",
    ),
    (
        "[default]\nretention = \"1d\"\nresponse_retention = \"2d\"\n",
        "default.response_retention: must not exceed retention",
    ),
    (
        "[namespaces.\"slack events\"]\nlease = \"5s\"\n",
        "namespaces.\"slack events\": namespace",
    ),
    (
        "[namespaces.x]\nmax_attempts = 0\n",
        "namespaces.\"x\".max_attempts",
    ),
];

#[test]
fn check_config_prints_the_effective_policies() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "claimd.toml",
        "[default]\nretention = \"7d\"\n\n[namespaces.\"slack-events\"]\nlease = \"30s\"\n\
         response_retention = \"1d\"\n",
    );
    let out = claimd()
        .args(["check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let slack = stdout
        .split("[namespaces.\"slack-events\"]")
        .nth(1)
        .expect(&stdout);
    for line in [
        "lease = \"30s\"",
        "max_attempts = 8",
        "retention = \"7d\"",
        "response_retention = \"1d\"",
    ] {
        assert!(slack.contains(line), "{line} missing in {stdout}");
    }
    assert!(
        stdout.starts_with("[default]\nlease = \"90s\"\n"),
        "{stdout}"
    );
}

#[test]
fn check_config_refuses_bad_files_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in BAD {
        let file = write(dir.path(), "bad.toml", text);
        let out = claimd()
            .arg("check-config")
            .env("CLAIMD_CONFIG", &file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?} accepted");
        assert!(
            stderr.contains(key),
            "{text:?}: {stderr} does not name {key}"
        );
    }
}

#[tokio::test]
async fn serve_refuses_to_start_with_a_bad_policy_file() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in BAD {
        let file = write(dir.path(), "bad.toml", text);
        let addr = free_addr();
        let mut cmd = claimd();
        cmd.args(["serve", "--listen", &addr.to_string(), "--config"])
            .arg(&file);
        cmd.arg("--data-dir").arg(dir.path().join("data"));
        let mut server = Claimd::spawn(cmd);
        let status = server.wait_for_exit(crate::common::process::PATIENCE).await;
        let status = status.expect("claimd exits on a bad policy file");
        assert!(!status.success(), "{text:?} accepted");
        assert!(
            server.log().contains(key),
            "{text:?}: {} does not name {key}",
            server.log()
        );
        // The flag and the file, and what to do (issue 29 item 6).
        let named = format!("--config: policy file {}: ", file.display());
        assert!(server.log().contains(&named), "{}", server.log());
        assert!(server.log().contains("fix it there"), "{}", server.log());
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "it served"
        );
    }
}

/// Claims fresh keys until one gets an `expected`-second default lease, for up to 10 s.
async fn eventually_lease(client: &mut Client, expected: i64, round: &mut u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        *round += 1;
        let r = claim_default_lease(client, "slack-events", &format!("Ev{round}")).await;
        if lease_secs(&r) == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "lease still {}s, not {expected}s",
            lease_secs(&r)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn sighup_puts_a_rewritten_policy_file_in_force_and_keeps_it_over_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |lease: &str| format!("[namespaces.\"slack-events\"]\nlease = \"{lease}\"\n");
    let file = write(dir.path(), "claimd.toml", &policy("60s"));
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string(), "--config"])
        .arg(&file);
    cmd.arg("--data-dir").arg(dir.path().join("data"));
    let server = Claimd::start(cmd, addr).await;
    let mut client = connect(addr).await;
    let mut round = 0;
    eventually_lease(&mut client, 60, &mut round).await;

    // Rewritten as an operator should: a new file renamed over the old one.
    let next = write(dir.path(), "claimd.toml.new", &policy("120s"));
    std::fs::rename(&next, &file).unwrap();
    server.signal(Signal::SIGHUP);
    eventually_lease(&mut client, 120, &mut round).await;

    let bad = write(
        dir.path(),
        "claimd.toml.new",
        "[namespaces.\"slack-events\"]\nlease = \"2\"\n",
    );
    std::fs::rename(&bad, &file).unwrap();
    server.signal(Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains("policy file refused") {
        assert!(
            Instant::now() < deadline,
            "no refusal logged:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        server.log().contains("namespaces.\"slack-events\".lease"),
        "{}",
        server.log()
    );
    eventually_lease(&mut client, 120, &mut round).await;
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn sighup_without_a_policy_file_is_logged_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string()])
        .arg("--data-dir")
        .arg(dir.path());
    let mut server = Claimd::start(cmd, addr).await;
    server.signal(Signal::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains("nothing to reload") {
        assert!(
            Instant::now() < deadline,
            "SIGHUP not logged:\n{}",
            server.log()
        );
        assert!(
            server.wait_for_exit(Duration::ZERO).await.is_none(),
            "SIGHUP ended claimd"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut client = connect(addr).await;
    claim_default_lease(&mut client, "slack-events", "Ev1").await;
    assert!(server.terminate().await.success());
}
