//! Proto hygiene with the real `buf` CLI (the `@bufbuild/buf` npm package, pinned in
//! `tools/package.json`): the committed `buf.yaml` covers the proto, `buf lint` (STANDARD
//! and COMMENTS) passes, and the file is `buf format`-clean.

use super::tools;
use std::path::PathBuf;
use std::process::Command;

fn buf() -> Command {
    let bin: PathBuf = tools::npm_ci("tools").join("node_modules/.bin/buf");
    let mut cmd = Command::new(bin);
    cmd.current_dir(tools::repo());
    cmd
}

#[test]
fn buf_yaml_covers_the_claims_proto() {
    let out = tools::run(buf().arg("ls-files"), "buf ls-files");
    let files = String::from_utf8_lossy(&out.stdout);
    assert!(
        files.lines().any(|l| l.ends_with("claimd/v1/claims.proto")),
        "buf.yaml's module does not include the proto; buf ls-files printed:\n{files}"
    );
}

#[test]
fn the_proto_passes_buf_lint() {
    tools::run(buf().arg("lint"), "buf lint (rules in buf.yaml)");
}

#[test]
fn the_proto_is_buf_formatted() {
    tools::run(
        buf().args(["format", "--diff", "--exit-code"]),
        "buf format --diff --exit-code (fix with `buf format -w`)",
    );
}
