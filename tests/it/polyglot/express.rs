//! The Express Idempotency-Key middleware (`examples/node/idempotency.js`) against the real
//! claimd binary: its `node --test` suite (`examples/node/test/idempotency.test.js`), which
//! starts Express apps on port 0 and talks to them over HTTP, runs against claimd on its
//! embedded store, on PostgreSQL (`CLAIMD_ADDR`), and on two replicas of one fresh
//! PostgreSQL database (`CLAIMD_ADDRS`: the suite's two apps each talk to their own
//! replica, so a retry waits on one replica for a request running through the other). The
//! dependencies come from the package's lock file (`npm ci`, on first use); the test report
//! (spec reporter, one line per test) is shown when a test fails. A missing `node` or `npm`
//! fails the test with what to install — never a skip.

use super::node::require_node;
use super::tools;
use crate::common::{pg, process};
use std::net::SocketAddr;
use std::process::Command;

/// Runs the middleware's test suite with `var` (`CLAIMD_ADDR` or `CLAIMD_ADDRS`) = `value`.
fn express_suite(var: &str, value: &str) {
    require_node();
    let package = tools::npm_ci("examples/node");
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "test/idempotency.test.js"])
            .current_dir(&package)
            .env_remove("CLAIMD_ADDR")
            .env_remove("CLAIMD_ADDRS")
            .env(var, value),
        "node --test test/idempotency.test.js in examples/node",
    );
}

/// Two claimd replicas serving one fresh database of the harness's PostgreSQL, as a
/// deployment runs them: started at once (both migrate it), one seal key.
struct Replicas {
    /// The processes (killed when dropped).
    _claimds: Vec<process::Claimd>,
    /// Where each serves gRPC.
    addrs: Vec<SocketAddr>,
}

impl Replicas {
    async fn start() -> Replicas {
        let url = pg::fresh_database().await;
        let first = process::free_addr();
        let second = loop {
            let addr = process::free_addr();
            if addr != first {
                break addr;
            }
        };
        let addrs = vec![first, second];
        let mut claimds: Vec<process::Claimd> = addrs
            .iter()
            .map(|addr| {
                let mut cmd = process::claimd();
                cmd.args(["serve", "--database-url", &url])
                    .arg("--listen")
                    .arg(addr.to_string())
                    // Each replica seals and opens the other's rows with the same key.
                    .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
                process::Claimd::spawn(cmd)
            })
            .collect();
        for (claimd, addr) in claimds.iter_mut().zip(&addrs) {
            claimd.wait_until_serving(*addr).await;
        }
        Replicas {
            _claimds: claimds,
            addrs,
        }
    }

    /// `host:port,host:port` for `CLAIMD_ADDRS`.
    fn targets(&self) -> String {
        let targets: Vec<String> = self.addrs.iter().map(SocketAddr::to_string).collect();
        targets.join(",")
    }
}

#[tokio::test]
async fn express_middleware_runs_each_keyed_request_once_and_replays_it_on_embedded_claimd() {
    let live = tools::Live::embedded().await;
    express_suite("CLAIMD_ADDR", &live.target());
}

#[tokio::test]
async fn express_middleware_runs_each_keyed_request_once_and_replays_it_on_postgres_claimd() {
    let live = tools::Live::postgres().await;
    express_suite("CLAIMD_ADDR", &live.target());
}

#[tokio::test]
async fn express_middleware_runs_each_keyed_request_once_across_two_postgres_replicas() {
    let replicas = Replicas::start().await;
    express_suite("CLAIMD_ADDRS", &replicas.targets());
}
