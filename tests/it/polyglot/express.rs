//! The Express Idempotency-Key middleware (`@claimd/client/express`, in `clients/node`)
//! against the real claimd binary, as a user installs it: the package packed, the tarball
//! installed into an empty directory with express (the version the package pins for its
//! tests), and its suite (`clients/node/test/express*.test.js` and the
//! `express-support.js` they share, copied next to that installation: per-route and
//! app.use mounting, the default scope, recovery), which starts Express apps on port 0 and
//! talks to them over HTTP, run
//! against claimd on its embedded store, on PostgreSQL (`CLAIMD_ADDR`), and on two replicas
//! of one fresh PostgreSQL database (`CLAIMD_ADDRS`: the suite's two apps each talk to their
//! own replica, so a retry waits on one replica for a request running through the other);
//! its quota tests against a claimd of their own whose anonymous tenant is over its Claims
//! quota after one Claim (`CLAIMD_QUOTA_ADDR`).
//! On the embedded store the example's wiring (`examples/node/idempotency.js`, on the
//! package as `npm ci` installs it there) runs its own small suite too. The test report
//! (spec reporter, one line per test) is shown when a test fails. A missing `node` or `npm`
//! fails the test with what to install — never a skip.

use super::clients_node::{install_packed, is_express_suite};
use super::node::require_node;
use super::tools;
use crate::common::{pg, process};
use std::fs;
use std::net::SocketAddr;
use std::process::Command;

/// Runs the middleware's test suite, from the installed tarball, with `var` (`CLAIMD_ADDR`
/// or `CLAIMD_ADDRS`) = `value`, and `CLAIMD_QUOTA_ADDR` = a claimd of its own whose
/// anonymous tenant is over its Claims quota after one Claim (the 503 tests).
async fn express_suite(var: &str, value: &str) {
    require_node();
    let quota = tools::Live::embedded_with_quota().await;
    let installed = install_packed(&["express"]);
    let target = installed.app.join("test");
    // The install directory is ours to write in.
    fs::create_dir(&target).expect("create test/ next to the installed package");
    let source = tools::repo().join("clients/node/test");
    let mut suites = Vec::new();
    let entries = fs::read_dir(&source).unwrap_or_else(|e| panic!("clients/node/test: {e}"));
    for entry in entries {
        // A directory being read lists its entries.
        let name = entry.expect("a clients/node/test entry").file_name();
        let name = name.to_string_lossy().into_owned();
        if is_express_suite(&name) {
            // Both directories are there; a failed copy is a broken environment.
            fs::copy(source.join(&name), target.join(&name)).expect("copy an express suite file");
            if name.ends_with(".test.js") {
                suites.push(format!("test/{name}"));
            }
        }
    }
    suites.sort();
    for required in [
        "test/express.test.js",
        "test/express-app-use.test.js",
        "test/express-scope.test.js",
    ] {
        assert!(
            suites.iter().any(|s| s == required),
            "clients/node lacks {required}: {suites:?}"
        );
    }
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec"])
            .args(&suites)
            .current_dir(&installed.app)
            .env_remove("NODE_PATH")
            .env_remove("CLAIMD_ADDR")
            .env_remove("CLAIMD_ADDRS")
            .env(var, value)
            .env("CLAIMD_QUOTA_ADDR", quota.target()),
        "node --test of clients/node/test/express*.test.js against the installed package",
    );
}

/// The example's wiring (`examples/node`) against `live`.
fn example_suite(live: &tools::Live) {
    require_node();
    let package = tools::npm_ci("examples/node");
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "test/idempotency.test.js"])
            .current_dir(&package)
            .env_remove("CLAIMD_ADDRS")
            .env("CLAIMD_ADDR", live.target()),
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
    express_suite("CLAIMD_ADDR", &live.target()).await;
    example_suite(&live);
}

#[tokio::test]
async fn express_middleware_runs_each_keyed_request_once_and_replays_it_on_postgres_claimd() {
    let live = tools::Live::postgres().await;
    express_suite("CLAIMD_ADDR", &live.target()).await;
}

#[tokio::test]
async fn express_middleware_runs_each_keyed_request_once_across_two_postgres_replicas() {
    let replicas = Replicas::start().await;
    express_suite("CLAIMD_ADDRS", &replicas.targets()).await;
}
