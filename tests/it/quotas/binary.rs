//! The `[tenants]` table as an operator meets it, through the real binary: `check-config`
//! printing each tenant section's effective quotas or naming the bad key, SIGHUP putting a
//! lowered quota in force for the next calls without a restart, and a flood of refused
//! Claims that writes nothing, keeps the process's memory bounded and is counted in
//! `claimd_quota_refusals_total` (a process of its own: the metrics recorder is global).

use crate::common::app::{connect, decision};
use crate::common::process::{Claimd, claimd, free_addr};
use crate::common::receipt_ops::{FP, claim_request};
use nix::sys::signal::Signal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;

/// How much claimd's resident memory may grow over the flood: generous, since allocators
/// keep freed memory, far below what keeping anything per refused call would take.
const RSS_BOUND_KIB: u64 = 32 * 1024;

/// `VmRSS` of process `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"));
    // Linux only, as the hostile tests: every live process has a VmRSS line.
    let status = status.expect("/proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:"));
    let kib = line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
    kib.expect("VmRSS in KiB")
}

/// The value of the first series of `metric` with every one of `labels` (`name="value"`)
/// on `/metrics` at `addr`.
async fn scrape(addr: SocketAddr, metric: &str, labels: &[&str]) -> Option<f64> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = "GET /metrics HTTP/1.1\r\nHost: claimd\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut text = String::new();
    stream.read_to_string(&mut text).await.expect("read");
    let line = text.lines().find(|l| {
        l.strip_prefix(metric)
            .is_some_and(|rest| rest.starts_with('{') && labels.iter().all(|x| rest.contains(x)))
    })?;
    let value = line.rsplit(' ').next()?;
    Some(value.trim().parse().expect("a number"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the policy file");
    path
}

#[test]
fn check_config_prints_the_effective_quotas_of_each_tenant_section() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "claimd.toml",
        "[tenants.default]\nclaims_per_second = 50\nburst = 100\n\n[tenants.\"acme\"]\n\
         writes_per_second = 20\nmax_waiting = 8\n",
    );
    let out = claimd()
        .args(["check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let acme = stdout.split("[tenants.\"acme\"]\n").nth(1).expect(&stdout);
    assert!(
        acme.starts_with(
            "claims_per_second = 50\nburst = 100\nwrites_per_second = 20\nmax_waiting = 8\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("[tenants.default]\nclaims_per_second = 50\nburst = 100\n"),
        "{stdout}"
    );
}

#[test]
fn check_config_refuses_a_bad_quota_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = [
        (
            "[tenants.\"acme\"]\nclaims_per_second = 0\n",
            "tenants.\"acme\".claims_per_second: must be a positive number",
        ),
        (
            "[tenants.\"acme\"]\nmax_wait = 3\n",
            "tenants.\"acme\".max_wait: unknown key",
        ),
    ];
    for (text, key) in bad {
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

/// The claimd binary serving from `dir` with the policy file `text`: it, the file, and
/// where it listens.
async fn serve_with(dir: &Path, text: &str) -> (Claimd, PathBuf, SocketAddr) {
    let file = write(dir, "claimd.toml", text);
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string(), "--config"])
        .arg(&file);
    cmd.arg("--data-dir").arg(dir.join("data"));
    (Claimd::start(cmd, addr).await, file, addr)
}

/// The policy file `file` rewritten as an operator should (a new file renamed over it) to
/// `text`, then SIGHUP to `server`.
fn rewrite(server: &Claimd, file: &Path, text: &str) {
    let dir = file.parent().expect("the policy file's directory");
    let next = write(dir, "claimd.toml.new", text);
    std::fs::rename(&next, file).unwrap();
    server.signal(Signal::SIGHUP);
}

#[tokio::test]
async fn sighup_puts_a_lowered_quota_in_force_for_the_next_calls() {
    let dir = tempfile::tempdir().unwrap();
    // Without API keys every call is tenant `default`, whose quota is [tenants.default].
    let quota = |rate: &str| format!("[tenants.default]\nclaims_per_second = {rate}\nburst = 1\n");
    let (server, file, addr) = serve_with(dir.path(), &quota("1000")).await;
    let mut client = connect(addr).await;
    client
        .claim(claim_request("Ev0", FP))
        .await
        .expect("under the quota");

    rewrite(&server, &file, &quota("0.001"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    let refused = loop {
        n += 1;
        match client.claim(claim_request(&format!("Ev{n}"), FP)).await {
            Ok(_) => {}
            Err(status) => break status,
        }
        assert!(
            Instant::now() < deadline,
            "no refusal after SIGHUP:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    super::assert_refused_by(&refused, "claims_per_second");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        server.log().contains("policies reloaded"),
        "{}",
        server.log()
    );
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn sighup_puts_a_lowered_receipts_limit_in_force_for_the_next_claim() {
    let dir = tempfile::tempdir().unwrap();
    let limit = |n: u32| format!("[tenants.default]\nmax_receipts = {n}\n");
    let (server, file, addr) = serve_with(dir.path(), &limit(100)).await;
    let mut client = connect(addr).await;
    for n in 0..3 {
        let answer = client.claim(claim_request(&format!("Ev{n}"), FP)).await;
        answer.expect("under the limit");
    }

    rewrite(&server, &file, &limit(3));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log().contains("policies reloaded") {
        assert!(Instant::now() < deadline, "no reload:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let refused = client
        .claim(claim_request("Ev3", FP))
        .await
        .expect_err("a fourth receipt is over the lowered limit");
    super::assert_refused_by(&refused, "max_receipts");
    // A Claim of a receipt the tenant holds stores nothing new: still answered.
    let again = client.claim(claim_request("Ev0", FP)).await;
    again.expect("a stored key is answered under the limit");
    assert!(server.terminate().await.success());
}

/// Sends `count` Claims of fresh keys from `tasks` concurrent callers on one connection;
/// every one must be refused by `claims_per_second`.
async fn refused_claims(addr: SocketAddr, from: usize, count: usize, tasks: usize) {
    let client = connect(addr).await;
    let mut running = Vec::new();
    for t in 0..tasks {
        let mut client = client.clone();
        running.push(tokio::spawn(async move {
            for n in (from + t..from + count).step_by(tasks) {
                let request = claim_request(&format!("Flood{n}"), FP);
                let status = client.claim(request).await.expect_err("refused");
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
            }
        }));
    }
    for task in running {
        task.await.expect("the caller ends");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_claims_writes_nothing_keeps_rss_bounded_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "claimd.toml",
        "[tenants.default]\nclaims_per_second = 0.001\nburst = 1\n",
    );
    let (addr, metrics) = (free_addr(), free_addr());
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string()])
        .args(["--metrics-listen", &metrics.to_string(), "--config"])
        .arg(&file);
    cmd.arg("--data-dir").arg(dir.path().join("data"));
    let server = Claimd::start(cmd, addr).await;
    let mut client = connect(addr).await;
    let first = client
        .claim(claim_request("Ev0", FP))
        .await
        .expect("the burst");
    assert_eq!(decision(first.get_ref()), claimd::pb::Decision::Claimed);

    refused_claims(addr, 0, 2_000, 16).await;
    let before = rss_kib(server.pid());
    refused_claims(addr, 2_000, 20_000, 16).await;
    let after = rss_kib(server.pid());
    assert!(
        after.saturating_sub(before) < RSS_BOUND_KIB,
        "RSS grew from {before} KiB to {after} KiB over 20,000 refused Claims"
    );
    for n in [0, 9_999, 21_999] {
        let get = claimd::pb::GetRequest {
            namespace: crate::common::receipt_ops::NS.into(),
            key: format!("Flood{n}"),
        };
        let status = client.get(get).await.expect_err("no receipt");
        assert_eq!(status.code(), Code::NotFound, "Flood{n}");
    }
    let labels = [r#"tenant="default""#, r#"quota="claims_per_second""#];
    let refusals = scrape(metrics, "claimd_quota_refusals_total", &labels).await;
    assert_eq!(refusals, Some(22_000.0));
    assert!(server.terminate().await.success());
}
