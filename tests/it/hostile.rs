//! Hostile input at the port (docs/RELIABILITY.md): the real `claimd` binary as a child
//! process on SQLite, fed garbage instead of HTTP/2 (`hostile/frames.rs`), stream-reset
//! floods (`hostile/resets.rs`), malformed and hostile protobuf bodies and a connection
//! flood (`hostile/bodies.rs`), and floods of unfinished request bodies on the HTTP door,
//! plaintext and TLS (`hostile/door.rs`). After each: the offending connection is closed or its call
//! answered with the right status, a normal Claim on a new connection succeeds, the log has
//! no `panicked`, and the resident memory grew by less than [`RSS_BOUND_KIB`]. The property
//! test over decoding and validation is `hostile/fuzz.rs`.

mod bodies;
mod door;
mod frames;
mod fuzz;
mod resets;

use crate::common::certs::Pki;
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, Decision};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How much claimd's resident memory may grow over one hostile input: generous, since
/// allocators keep freed memory, but far below what an unbounded buffer would take.
const RSS_BOUND_KIB: u64 = 64 * 1024;

/// `VmRSS` in KiB from a `/proc/PID/status` file, if it can be read.
fn rss_of(path: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// How long anything claimd should do at once may take at most.
const BOUND: Duration = Duration::from_secs(15);

/// A claimd process serving an embedded database in a temporary directory.
struct Target {
    claimd: Claimd,
    addr: SocketAddr,
    rss_before: u64,
    /// The API key calls are made with, once one was created.
    key: Option<String>,
    /// The certificates claimd serves TLS with, if it does.
    tls: Option<Pki>,
    _dir: tempfile::TempDir,
}

impl Target {
    /// Starts claimd with `args` besides `serve --listen --data-dir`, serves one Claim (so
    /// the baseline memory includes a warmed-up connection and store) and reads its RSS.
    async fn start(args: &[&str]) -> Target {
        Target::start_with(args, false, None).await
    }

    /// [`Target::start`] with an API key created first (so every call needs one) and,
    /// with `tls`, serving TLS with a fresh [`Pki`].
    async fn start_keyed(args: &[&str], tls: bool) -> Target {
        // A test cannot run claimd without a directory for its database.
        let dir = tempfile::tempdir().expect("temp dir");
        let mut create = claimd();
        create
            .args(["keys", "create", "--tenant", "hostile", "--data-dir"])
            .arg(dir.path());
        // The binary was built for this test; `keys create` prints the key on stdout.
        let out = create.output().expect("claimd keys create runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let key = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Target::start_with(args, tls, Some((dir, key))).await
    }

    async fn start_with(
        args: &[&str],
        tls: bool,
        keyed: Option<(tempfile::TempDir, String)>,
    ) -> Target {
        let (dir, key) = match keyed {
            Some((dir, key)) => (dir, Some(key)),
            // A test cannot run claimd without a directory for its database.
            None => (tempfile::tempdir().expect("temp dir"), None),
        };
        let tls = tls.then(Pki::new);
        let addr = free_addr();
        let mut cmd = claimd();
        cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(dir.path())
            .args(args);
        if let Some(pki) = &tls {
            cmd.arg("--tls-cert").arg(&pki.server_cert);
            cmd.arg("--tls-key").arg(&pki.server_key);
        }
        let claimd = Claimd::start(cmd, addr).await;
        let mut target = Target {
            claimd,
            addr,
            rss_before: 0,
            key,
            tls,
            _dir: dir,
        };
        target.assert_serves().await;
        target.rss_before = target.rss_kib();
        target
    }

    /// `VmRSS` of the process, in KiB, from `/proc/PID/status`.
    fn rss_kib(&self) -> u64 {
        let path = format!("/proc/{}/status", self.claimd.pid());
        // Linux only: the hostile tests read memory the way an operator would; every live
        // Linux process has a VmRSS line.
        rss_of(&path).expect("VmRSS in KiB from /proc/PID/status (Linux)")
    }

    /// A Claim of a fresh key on a new connection is CLAIMED.
    async fn assert_serves(&self) {
        static KEY: AtomicU32 = AtomicU32::new(0);
        let key = format!("after-{}", KEY.fetch_add(1, Ordering::Relaxed));
        let mut request = tonic::Request::new(ClaimRequest {
            namespace: "hostile".into(),
            key,
            ..Default::default()
        });
        if let Some(key) = &self.key {
            // A key is ASCII, so always a valid metadata value.
            let bearer = format!("Bearer {key}").parse().expect("ASCII");
            request.metadata_mut().insert("authorization", bearer);
        }
        let call = async {
            let unavailable =
                |e: tonic::transport::Error| tonic::Status::unavailable(e.to_string());
            let channel = match &self.tls {
                None => tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
                    .expect("a valid URI")
                    .connect()
                    .await
                    .map_err(unavailable)?,
                Some(pki) => crate::common::app::tls_channel(self.addr, pki.client_tls())
                    .await
                    .map_err(unavailable)?,
            };
            ClaimServiceClient::new(channel).claim(request).await
        };
        let answer = tokio::time::timeout(BOUND, call).await;
        let answer = answer.unwrap_or_else(|_| panic!("no answer within {BOUND:?}"));
        let answer = answer.unwrap_or_else(|s| panic!("Claim failed: {s:?}\n{}", self.log()));
        assert_eq!(answer.into_inner().decision, Decision::Claimed as i32);
    }

    /// The process log.
    fn log(&self) -> String {
        self.claimd.log()
    }

    /// After `what`: still serving, no panic logged, memory within the bound. Prints the
    /// RSS numbers (shown with `--nocapture`) for docs/RELIABILITY.md.
    async fn assert_survived(&self, what: &str) {
        self.assert_serves().await;
        let log = self.log();
        assert!(!log.contains("panicked"), "{what}: claimd panicked:\n{log}");
        let after = self.rss_kib();
        println!(
            "{what}: RSS {} KiB before, {after} KiB after ({:+} KiB)",
            self.rss_before,
            i128::from(after) - i128::from(self.rss_before)
        );
        assert!(
            after < self.rss_before + RSS_BOUND_KIB,
            "{what}: RSS grew from {} KiB to {after} KiB",
            self.rss_before
        );
    }
}
