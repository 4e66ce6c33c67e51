//! One version (issue 29 §5): the server, the Rust client, the benchmark and the packages
//! (the Go module's `Version` and the Java artifact's too, issue 33) carry the contract's
//! version, `proto/VERSION`, and `claimd --version` prints it with the
//! proto's.

use crate::common::process::claimd;
use std::path::Path;

fn repo(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn contract() -> String {
    repo("proto/VERSION").trim().to_owned()
}

#[test]
fn claimd_version_prints_the_contracts_version_and_the_protos() {
    let out = claimd().arg("--version").output().expect("claimd runs");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    let v = contract();
    assert_eq!(printed.trim(), format!("claimd {v} (proto claimd.v1 {v})"));
}

#[test]
fn the_go_module_and_the_java_artifact_carry_the_contracts_version() {
    let go = repo("clients/go/doc.go");
    assert!(
        go.contains(&format!("const Version = \"{}\"", contract())),
        "clients/go/doc.go's Version is not proto/VERSION"
    );
    let pom = repo("clients/java/pom.xml");
    let after_artifact = pom
        .split("<artifactId>claimd-client</artifactId>")
        .nth(1)
        .expect("the pom names claimd-client");
    let version = after_artifact
        .split("<version>")
        .nth(1)
        .and_then(|v| v.split("</version>").next());
    assert_eq!(version, Some(contract().as_str()), "clients/java/pom.xml");
}

#[test]
fn every_crate_of_the_workspace_carries_the_contracts_version() {
    for manifest in ["Cargo.toml", "clients/rust/Cargo.toml", "bench/Cargo.toml"] {
        let parsed: toml::Table = toml::from_str(&repo(manifest)).expect("a TOML manifest");
        let version = parsed["package"]["version"].as_str().expect("a version");
        assert_eq!(version, contract(), "{manifest}");
    }
}
