//! The Node helper (`examples/node`) against the real claimd binary: its `node --test`
//! suite (`examples/node/test/claimd.test.js`) runs once against claimd on its embedded
//! store and once against claimd on PostgreSQL, with `CLAIMD_ADDR` pointing at it. The
//! dependencies come from the package's lock file (`npm ci`, on first use); the test
//! report (spec reporter, one line per test) is shown when a test fails. A missing `node`
//! fails the test with what to install — never a skip.

use super::tools;
use std::process::Command;

/// The oldest Node.js the helper supports (`engines` in its package.json).
const MIN_NODE: u32 = 18;

/// Fails with what to install unless `node` is there and new enough.
pub(super) fn require_node() {
    let hint = format!("install Node.js {MIN_NODE}+ (Debian: apt-get install nodejs npm)");
    let version = Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| panic!("`node` is needed by the Node helper tests; {hint}"));
    let major = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    assert!(
        major.is_some_and(|m| m >= MIN_NODE),
        "the Node helper tests need Node.js {MIN_NODE}+, found {version}; {hint}"
    );
}

/// Runs the helper's test suite against `live`.
fn node_suite(live: &tools::Live) {
    require_node();
    let package = tools::npm_ci("examples/node");
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "test/claimd.test.js"])
            .current_dir(&package)
            .env("CLAIMD_ADDR", live.target()),
        "node --test in examples/node",
    );
}

#[tokio::test]
async fn node_helper_against_embedded_claimd() {
    let live = tools::Live::embedded().await;
    node_suite(&live);
}

#[tokio::test]
async fn node_helper_against_postgres_claimd() {
    let live = tools::Live::postgres().await;
    node_suite(&live);
}
