//! The Python Slack receiver (`examples/python`, on the `clients/python` package) against
//! the real claimd binary. Each test runs one
//! scenario of `examples/python/tests` (`python -m unittest`, in the venv of
//! [`tools::python`]) with `CLAIMD_ADDR` pointing at a live claimd. The scenarios start
//! receivers and recovery workers as separate processes, play Slack over real HTTP
//! (signed requests, `X-Slack-Retry-Num`) and count the replies in the example's SQLite
//! table. Their output, with every receiver's log, is shown when a test fails.

use super::tools;
use crate::common::process;
use std::path::Path;
use std::process::Command;

/// Variables of the example that a developer's shell may have set: the scenarios pass
/// what they need explicitly.
const EXAMPLE_ENV: &[&str] = &[
    "CLAIMD_ADDR",
    "CLAIMD_API_KEY",
    "CLAIMD_CA_FILE",
    "CLAIMD_NAMESPACE",
    "CLAIMD_STUBS_DIR",
    "CLAIMD_TLS",
    "CLAIM_DEADLINE_SECONDS",
    "LEASE_SECONDS",
    "LOG_LEVEL",
    "RECEIVER_LISTEN",
    "REPLIES_DB",
    "SLACK_SIGNING_SECRET",
    "WORK_SECONDS",
];

/// Runs `examples/python/tests/<module>` against claimd at `target`, with `api_key` as
/// `CLAIMD_API_KEY` if that claimd has keys; shows `claimd`'s log too if it fails.
async fn scenario(module: &str, target: String, api_key: Option<String>, claimd: &process::Claimd) {
    let module = format!("tests.{module}");
    // On a blocking thread: the scenario takes seconds and tools::run waits for it.
    let run =
        tokio::task::spawn_blocking(move || run_unittest(&module, &target, api_key.as_deref()));
    if let Err(failed) = run.await {
        eprintln!("--- claimd log\n{}", claimd.log());
        std::panic::resume_unwind(failed.into_panic());
    }
}

fn run_unittest(module: &str, target: &str, api_key: Option<&str>) {
    let example = tools::repo().join("examples/python");
    // Databases and logs of one test live in its own directory. The example uses the
    // `claimd` package from clients/python (its shim finds the checkout's copy).
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = python(&example, dir.path());
    cmd.args(["-m", "unittest", "-v", module])
        .env("CLAIMD_ADDR", target);
    if let Some(key) = api_key {
        cmd.env("CLAIMD_API_KEY", key);
    }
    tools::run(&mut cmd, &format!("python -m unittest {module}"));
}

/// The venv's python in `example`, temp files under `tmp`, no `__pycache__` in the tree.
fn python(example: &Path, tmp: &Path) -> Command {
    let mut cmd = Command::new(tools::python());
    cmd.current_dir(example)
        .env("TMPDIR", tmp)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for name in EXAMPLE_ENV {
        cmd.env_remove(name);
    }
    cmd
}

/// Scenario 1: the original delivery while the work is slower than 3 s, Slack's retries 1,
/// 2 and 3 (the last after completion), forged, unsigned and replayed requests: one reply,
/// every answer within 3 s, nothing claimed for the forgeries, COMPLETED with the response.
#[tokio::test]
async fn slack_retry_storm_posts_one_reply() {
    let live = tools::Live::postgres().await;
    scenario("test_retry_storm", live.target(), None, &live.claimd).await;
}

/// Scenario 2: two receiver processes behind one claimd, the original to one and the
/// retries to the other, and simultaneous deliveries to both: one reply per event.
#[tokio::test]
async fn two_receivers_behind_one_claimd_post_one_reply() {
    let live = tools::Live::postgres().await;
    scenario("test_two_receivers", live.target(), None, &live.claimd).await;
}

/// Scenario 3: a receiver SIGKILLed mid-work (before its post, and right after it): the
/// recovery worker finds the orphan with ListOrphaned and completes it, one reply.
#[tokio::test]
async fn receiver_killed_mid_work_is_recovered() {
    let live = tools::Live::embedded().await;
    scenario("test_kill_mid_work", live.target(), None, &live.claimd).await;
}

/// Scenario 4: a transient failure ends RETRY_WAIT (then recovered), a permanent one and a
/// malformed event QUARANTINED, a conflict is acknowledged, a slash command answered without
/// a receipt, an unreachable claimd answered 503.
#[tokio::test]
async fn failure_paths_retry_quarantine_conflict_and_slash_command() {
    let live = tools::Live::embedded().await;
    scenario("test_failures", live.target(), None, &live.claimd).await;
}

/// The receiver's `CLAIMD_API_KEY` against a claimd with keys: sent as bearer metadata; a
/// wrong or missing key answers 500 (Slack retries) and never shows in a log.
#[tokio::test]
async fn api_key_is_sent_and_never_logged() {
    let (live, key) = tools::Live::embedded_with_key(|_| {}).await;
    scenario("test_api_key", live.target(), Some(key), &live.claimd).await;
}

/// Claim with `wait` from Python: a retry gets the first request's response once it
/// completes, takes over after a lease runs out, and is answered IN_FLIGHT when its wait
/// ends (`examples/python/tests/test_wait.py`).
#[tokio::test]
async fn a_python_claim_with_wait_gets_the_stored_response() {
    let live = tools::Live::postgres().await;
    scenario("test_wait", live.target(), None, &live.claimd).await;
}
