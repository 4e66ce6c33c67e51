//! Hostile input at the port (docs/RELIABILITY.md): the real `claimd` binary as a child
//! process on SQLite, fed garbage instead of HTTP/2 (`hostile/frames.rs`), stream-reset
//! floods (`hostile/resets.rs`), malformed and hostile protobuf bodies and a connection
//! flood (`hostile/bodies.rs`), connections that hold a slot and send nothing, plaintext or
//! TLS, from one source while another is served (`hostile/stalls.rs`), floods of wrong
//! API keys from one source and from ten thousand (`hostile/keys.rs`), and floods of
//! unfinished request bodies on the HTTP door, plaintext and TLS (`hostile/door.rs`), of
//! request heads that never end from ten sources, HTTP/1.1 (plaintext and TLS) and HTTP/2
//! (`hostile/heads.rs`; each head's bounds: `hostile/head_limits.rs`), and of
//! unauthenticated callers at the operator console
//! (`hostile/console.rs`).
//! After each: the offending connection is closed or its call answered with the right
//! status, a normal Claim on a new connection succeeds, the log has no `panicked`, and the
//! resident memory grew by less than [`RSS_BOUND_KIB`]. The property test over decoding
//! and validation is `hostile/fuzz.rs`.

mod bodies;
mod console;
mod door;
mod frames;
mod fuzz;
mod head_limits;
mod heads;
mod keys;
mod resets;
mod stalls;

use crate::common::app::tls_channel;
use crate::common::certs::Pki;
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, Decision};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

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

/// A claimd process serving an embedded database in a temporary directory, with `/metrics`
/// on a port of its own.
struct Target {
    claimd: Claimd,
    addr: SocketAddr,
    metrics: SocketAddr,
    /// How clients reach it over TLS, if it serves TLS.
    tls: Option<ClientTlsConfig>,
    /// The API key its own Claims send, once it has keys.
    key: Option<String>,
    rss_before: u64,
    /// The certificates claimd serves TLS with, when the target made them itself.
    pki: Option<Pki>,
    dir: tempfile::TempDir,
}

impl Target {
    /// Starts claimd with `args` besides `serve --listen --data-dir`, serves one Claim (so
    /// the baseline memory includes a warmed-up connection and store) and reads its RSS.
    async fn start(args: &[&str]) -> Target {
        Target::start_with(args, None, false).await
    }

    /// As [`Target::start`], serving TLS with `pki`'s server files (`--tls-cert`,
    /// `--tls-key`), and with `mtls` requiring client certificates from its CA
    /// (`--tls-client-ca`); its own Claims present the test CA's client certificate.
    async fn start_tls(pki: &Pki, mtls: bool, args: &[&str]) -> Target {
        Target::start_tls_with(pki, mtls, args, false).await
    }

    /// As [`Target::start_tls`], with an API key created before the first Claim when `key`.
    async fn start_tls_with(pki: &Pki, mtls: bool, args: &[&str], key: bool) -> Target {
        let mut all: Vec<String> = vec![
            "--tls-cert".into(),
            pki.server_cert.display().to_string(),
            "--tls-key".into(),
            pki.server_key.display().to_string(),
        ];
        if mtls {
            all.extend(["--tls-client-ca".into(), pki.ca.display().to_string()]);
        }
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let tls = pki.client_tls_as(&pki.client);
        Target::start_with(&all, Some(tls), key).await
    }

    /// [`Target::start`] with an API key created first (so every call needs one) and,
    /// with `tls`, serving TLS with a fresh [`Pki`] of its own.
    async fn start_keyed(args: &[&str], tls: bool) -> Target {
        if !tls {
            return Target::start_with_key(args).await;
        }
        let pki = Pki::new();
        let mut target = Target::start_tls_with(&pki, false, args, true).await;
        target.pki = Some(pki);
        target
    }

    /// As [`Target::start`], with an API key created before the first Claim (so every
    /// call needs one); the Claims of [`Target::assert_serves`] send it.
    async fn start_with_key(args: &[&str]) -> Target {
        Target::start_with(args, None, true).await
    }

    async fn start_with(args: &[&str], tls: Option<ClientTlsConfig>, key: bool) -> Target {
        // A test cannot run claimd without a directory for its database.
        let dir = tempfile::tempdir().expect("temp dir");
        let (addr, metrics) = (free_addr(), free_addr());
        let mut cmd = claimd();
        cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(dir.path())
            .args(["--metrics-listen", &metrics.to_string()])
            .args(args);
        let claimd = Claimd::start(cmd, addr).await;
        let mut target = Target {
            claimd,
            addr,
            metrics,
            tls,
            key: None,
            rss_before: 0,
            pki: None,
            dir,
        };
        if key {
            target.key = Some(target.create_key());
        }
        target.assert_serves().await;
        target.rss_before = target.rss_kib();
        target
    }

    /// A new API key of tenant `hostile`, created with `claimd keys create` on the
    /// database this claimd serves (so this claimd has never seen it).
    fn create_key(&self) -> String {
        let output = claimd()
            .args(["keys", "create", "--tenant", "hostile", "--data-dir"])
            .arg(self.dir.path())
            .output()
            .expect("claimd keys create runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout.trim().to_owned()
    }

    /// A channel to this claimd from the loopback address `from` (any, if `None`), over TLS
    /// if it serves TLS; the error if it cannot connect.
    async fn channel_from(&self, from: Option<IpAddr>) -> Result<Channel, tonic::transport::Error> {
        let Some(tls) = &self.tls else {
            let endpoint = Endpoint::from_shared(format!("http://{}", self.addr));
            // `http://` and a socket address always make a valid URI.
            let endpoint = endpoint.expect("a valid URI").local_address(from);
            return endpoint.connect().await;
        };
        match from {
            None => tls_channel(self.addr, tls.clone()).await,
            Some(_) => {
                let endpoint = Endpoint::from_shared(format!("https://{}", self.addr));
                // `https://` and a socket address always make a valid URI.
                let endpoint = endpoint.expect("a valid URI").local_address(from);
                let tls = tls.clone().domain_name("localhost");
                endpoint.tls_config(tls)?.connect().await
            }
        }
    }

    /// A Claim of a fresh key (with this target's API key, if it has one) on a new
    /// connection from `from`: the call's answer, or UNAVAILABLE if it cannot connect.
    async fn claim_from(
        &self,
        from: Option<IpAddr>,
        api_key: Option<&str>,
    ) -> Result<Decision, tonic::Status> {
        static KEY: AtomicU32 = AtomicU32::new(0);
        let key = format!("after-{}", KEY.fetch_add(1, Ordering::Relaxed));
        let mut request = tonic::Request::new(ClaimRequest {
            namespace: "hostile".into(),
            key,
            ..Default::default()
        });
        if let Some(api_key) = api_key.or(self.key.as_deref()) {
            let value = format!("Bearer {api_key}").parse().expect("a header value");
            request.metadata_mut().insert("authorization", value);
        }
        let call = async {
            let channel = self.channel_from(from).await;
            let channel = channel.map_err(|e| tonic::Status::unavailable(format!("{e:?}")))?;
            ClaimServiceClient::new(channel).claim(request).await
        };
        let answer = tokio::time::timeout(BOUND, call).await;
        let answer = answer.unwrap_or_else(|_| panic!("no answer within {BOUND:?}"));
        answer.map(|a| a.into_inner().decision())
    }

    /// The value of the series `series` (`name{labels}` as exposed) on `/metrics`; 0 if it
    /// is not there.
    async fn metric(&self, series: &str) -> f64 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // claimd's metrics listener is up while it runs.
        let mut stream = tokio::net::TcpStream::connect(self.metrics)
            .await
            .expect("connect to /metrics");
        let request = "GET /metrics HTTP/1.1\r\nHost: claimd\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut text = String::new();
        stream.read_to_string(&mut text).await.expect("read");
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '));
        value.map_or(0.0, |v| v.trim().parse().expect("a number"))
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
        match self.claim_from(None, None).await {
            Ok(decision) => assert_eq!(decision, Decision::Claimed),
            Err(s) => panic!("Claim failed: {s:?}\n{}", self.log()),
        }
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
