//! The installable Node package (`clients/node`) against the real claimd: `npm pack`, the
//! tarball installed into an empty directory, its own `node --test` suite and a typed usage
//! file checked with `tsc --noEmit`.
//!
//! Each test packs the package afresh into a temporary directory and installs the tarball
//! with `npm install <tarball>` into another, empty one (npm's cache for it lives under
//! cargo's target directory, so later runs install offline). The package's suite
//! (`clients/node/test/*.test.js`) is copied next to that installation, so its
//! `require('@claimd/client')` loads the installed package by name, never the checkout; it
//! runs against claimd on its embedded store and on PostgreSQL (`CLAIMD_ADDR`), its quota
//! tests against a claimd whose anonymous tenant is over its Claims quota after one Claim
//! (`CLAIMD_QUOTA_ADDR`). The express
//! suite (`test/express*.js`: its test files and the module they share) is
//! [`super::express`]'s, on the same installation plus express. The typed usage files (`clients/node/test/types/*.ts` with their strict
//! `tsconfig.json`, one of them the `@claimd/client/express` entry point with express's
//! types) are compiled against the installed package's declarations by the `typescript` of
//! the package's own devDependencies (`npm ci` in `clients/node`, on first use). A plain test
//! holds the package's proto copy and version to `proto/` and `proto/VERSION`. A missing
//! `node` or `npm` fails the test with what to install — never a skip.

use super::node::require_node;
use super::tools;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The package's directory, relative to the repository.
const PACKAGE: &str = "clients/node";
/// The package's name, as `npm install` and `require` know it.
const NAME: &str = "@claimd/client";

/// The package's directory.
fn package() -> PathBuf {
    tools::repo().join(PACKAGE)
}

/// A file of the repository as text, failing the test when it is unreadable.
fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{} is unreadable: {e}", path.display()))
}

/// A JSON file of the package.
fn package_json(name: &str) -> Value {
    let text = read(&package().join(name));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{PACKAGE}/{name} is not valid JSON: {e}"))
}

/// Fails with what to install unless `npm` runs.
fn require_npm() {
    let found = Command::new("npm").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        panic!(
            "`npm` is needed by the Node package tests; install Node.js 18+ with npm \
             (Debian: apt-get install nodejs npm)"
        );
    }
}

/// npm's cache for the installs of the packed tarball: its dependencies are fetched once.
fn npm_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("polyglot/npm-cache")
}

/// The package as a user gets it: packed, and the tarball installed into an empty
/// directory.
pub(super) struct Installed {
    /// The directory the tarball was installed into; its `node_modules` holds the package.
    pub(super) app: PathBuf,
    _dir: tempfile::TempDir,
}

/// Whether a file of `clients/node/test` belongs to the suite of the express entry point
/// (`express*.test.js` and the `express-support.js` they share), run by
/// [`super::express`], not here.
pub(super) fn is_express_suite(name: &str) -> bool {
    name.starts_with("express") && name.ends_with(".js")
}

/// `name@version` for a development dependency of the package, at its pinned version.
fn dev_dependency(name: &str) -> String {
    let manifest = package_json("package.json");
    let version = manifest["devDependencies"][name]
        .as_str()
        .unwrap_or_else(|| panic!("{PACKAGE}/package.json pins no devDependencies.{name}"));
    format!("{name}@{version}")
}

/// `npm pack` of the package and `npm install` of the tarball into an empty directory,
/// with `with` (development dependencies of the package, at their pinned versions, e.g.
/// express for its peer dependency); checks what the tarball holds and that `require`
/// finds the installed copy.
pub(super) fn install_packed(with: &[&str]) -> Installed {
    require_node();
    require_npm();
    // Packing and installing need a directory of their own.
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("pack");
    let app = dir.path().join("app");
    for empty in [&pack, &app] {
        // A fresh temporary directory takes subdirectories.
        fs::create_dir(empty).expect("create a directory in the temp dir");
    }

    let packed = tools::run(
        Command::new("npm")
            .args(["pack", "--json", "--loglevel=error", "--pack-destination"])
            .arg(&pack)
            .current_dir(package()),
        "npm pack in clients/node",
    );
    // `npm pack --json` prints one object per packed package.
    let listing: Value = serde_json::from_slice(&packed.stdout).expect("npm pack --json output");
    let filename = listing[0]["filename"]
        .as_str()
        .unwrap_or_else(|| panic!("npm pack --json named no tarball: {listing}"));
    let files: Vec<&str> = listing[0]["files"]
        .as_array()
        .map(|files| files.iter().filter_map(|f| f["path"].as_str()).collect())
        .unwrap_or_default();
    for shipped in [
        "package.json",
        "index.js",
        "index.d.ts",
        "express.js",
        "express.d.ts",
        "lib/express-request.js",
        "lib/replies.js",
        "lib/request-identity.js",
        "lib/route-errors.js",
        "lib/stored-response.js",
        "proto/claimd/v1/claims.proto",
        "README.md",
        "CHANGELOG.md",
    ] {
        assert!(
            files.contains(&shipped),
            "the tarball lacks {shipped}: {files:?}"
        );
    }
    assert!(
        files.iter().all(|f| !f.starts_with("test/")),
        "the tarball ships the tests: {files:?}"
    );

    tools::run(
        Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefer-offline",
                "--cache",
            ])
            .arg(npm_cache())
            .arg(pack.join(filename))
            .args(with.iter().map(|name| dev_dependency(name)))
            .current_dir(&app),
        "npm install of the packed clients/node tarball into an empty directory",
    );
    let resolved = tools::run(
        Command::new("node")
            .args(["-p", &format!("require.resolve('{NAME}')")])
            .current_dir(&app),
        "require.resolve of the installed package",
    );
    let resolved = PathBuf::from(String::from_utf8_lossy(&resolved.stdout).trim());
    assert!(
        resolved.starts_with(app.join("node_modules")),
        "require('{NAME}') must load the installed package, got {}",
        resolved.display()
    );
    Installed { app, _dir: dir }
}

/// The package's own suite, copied next to the installed package, against `live` (and
/// [`tools::Live::embedded_with_quota`] for its quota tests, `CLAIMD_QUOTA_ADDR`).
fn package_suite(live: &tools::Live, quota: &tools::Live) {
    let installed = install_packed(&[]);
    let source = package().join("test");
    let target = installed.app.join("test");
    // The install directory is ours to write in.
    fs::create_dir(&target).expect("create test/ next to the installed package");
    let mut suites = Vec::new();
    let entries = fs::read_dir(&source).unwrap_or_else(|e| panic!("{PACKAGE}/test: {e}"));
    for entry in entries {
        // A directory being read lists its entries.
        let name = entry.expect("a clients/node/test entry").file_name();
        let name = name.to_string_lossy().into_owned();
        if name.ends_with(".test.js") && !is_express_suite(&name) {
            // Both directories are there; a failed copy is a broken environment.
            fs::copy(source.join(&name), target.join(&name)).expect("copy a test file");
            suites.push(format!("test/{name}"));
        }
    }
    suites.sort();
    assert!(!suites.is_empty(), "{PACKAGE}/test holds no *.test.js");
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec"])
            .args(&suites)
            .current_dir(&installed.app)
            .env_remove("NODE_PATH")
            .env("CLAIMD_ADDR", live.target())
            .env("CLAIMD_QUOTA_ADDR", quota.target()),
        "node --test of clients/node/test against the installed package",
    );
}

#[tokio::test]
async fn node_package_installed_from_its_tarball_passes_its_suite_on_embedded_claimd() {
    let live = tools::Live::embedded().await;
    let quota = tools::Live::embedded_with_quota().await;
    package_suite(&live, &quota);
}

#[tokio::test]
async fn node_package_installed_from_its_tarball_passes_its_suite_on_postgres_claimd() {
    let live = tools::Live::postgres().await;
    let quota = tools::Live::embedded_with_quota().await;
    package_suite(&live, &quota);
}

#[test]
fn node_package_typed_usage_compiles_in_strict_mode_against_the_installed_declarations() {
    let installed = install_packed(&["express", "@types/express"]);
    let tsc = tools::npm_ci(PACKAGE).join("node_modules/typescript/bin/tsc");
    let source = package().join("test/types");
    let config: Value = serde_json::from_str(&read(&source.join("tsconfig.json")))
        .unwrap_or_else(|e| panic!("{PACKAGE}/test/types/tsconfig.json is not JSON: {e}"));
    assert_eq!(
        config["compilerOptions"]["strict"],
        Value::Bool(true),
        "the typed usage is checked in strict mode"
    );
    let target = installed.app.join("types");
    // The install directory is ours to write in.
    fs::create_dir(&target).expect("create types/ next to the installed package");
    let entries = fs::read_dir(&source).unwrap_or_else(|e| panic!("{PACKAGE}/test/types: {e}"));
    for entry in entries {
        // A directory being read lists its entries.
        let name = entry.expect("a clients/node/test/types entry").file_name();
        // Both directories are there; a failed copy is a broken environment.
        fs::copy(source.join(&name), target.join(&name)).expect("copy the typed usage");
    }
    tools::run(
        Command::new("node")
            .arg(&tsc)
            .args(["--noEmit", "-p"])
            .arg(target.join("tsconfig.json"))
            .current_dir(&installed.app),
        "tsc --noEmit of clients/node/test/types against the installed package",
    );
}

/// Every `.proto` file under `dir`, as paths relative to it.
fn protos(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            // A directory being read lists its entries.
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(root, &path, found);
            } else if path.extension().is_some_and(|ext| ext == "proto") {
                // The walk starts at the root, so every path is under it.
                found.push(path.strip_prefix(root).expect("under the root").to_owned());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, dir, &mut found);
    found.sort();
    found
}

#[test]
fn node_package_ships_an_exact_copy_of_the_proto_and_has_its_version() {
    let repo = tools::repo();
    let shipped = package().join("proto");
    let originals = protos(&repo.join("proto"));
    assert_eq!(
        protos(&shipped),
        originals,
        "{PACKAGE}/proto must hold exactly the .proto files of proto/"
    );
    for proto in &originals {
        assert!(
            read(&shipped.join(proto)) == read(&repo.join("proto").join(proto)),
            "{PACKAGE}/proto/{0} differs from proto/{0}: copy it over",
            proto.display()
        );
    }

    let version = read(&repo.join("proto/VERSION")).trim().to_owned();
    let manifest = package_json("package.json");
    assert_eq!(
        manifest["version"].as_str(),
        Some(version.as_str()),
        "{PACKAGE}/package.json's version must be proto/VERSION: \
         `npm version --no-git-tag-version {version}` in {PACKAGE}"
    );
    let lock = package_json("package-lock.json");
    assert_eq!(
        lock["packages"][""]["version"].as_str(),
        Some(version.as_str()),
        "{PACKAGE}/package-lock.json is older than package.json: `npm install` in {PACKAGE}"
    );
    let changelog = read(&package().join("CHANGELOG.md"));
    assert!(
        changelog
            .lines()
            .any(|line| line == format!("## {version}")),
        "{PACKAGE}/CHANGELOG.md has no `## {version}` entry"
    );
}

#[test]
fn node_package_pins_its_dependencies_exactly_and_exports_its_declarations() {
    let manifest = package_json("package.json");
    assert_eq!(manifest["name"].as_str(), Some(NAME));
    assert_eq!(manifest["types"].as_str(), Some("./index.d.ts"));
    assert_eq!(
        manifest["exports"]["."]["types"].as_str(),
        Some("./index.d.ts")
    );
    assert_eq!(
        manifest["exports"]["./express"]["types"].as_str(),
        Some("./express.d.ts")
    );
    assert_eq!(
        manifest["exports"]["./express"]["default"].as_str(),
        Some("./express.js")
    );
    // Express is the user's: a peer dependency, optional for users of the client alone.
    assert_eq!(
        manifest["peerDependencies"]["express"].as_str(),
        Some(">=4")
    );
    assert_eq!(
        manifest["peerDependenciesMeta"]["express"]["optional"],
        Value::Bool(true)
    );
    assert!(
        manifest["dependencies"].get("express").is_none(),
        "express is a peer dependency, not a dependency"
    );
    let exact =
        |v: &str| v.split('.').count() == 3 && v.split('.').all(|n| n.parse::<u32>().is_ok());
    for (section, wanted) in [
        ("dependencies", &["@grpc/grpc-js", "@grpc/proto-loader"][..]),
        (
            "devDependencies",
            &["typescript", "express", "@types/express"][..],
        ),
    ] {
        // Every listed dependency is pinned to one version, never a range.
        let deps = manifest[section]
            .as_object()
            .unwrap_or_else(|| panic!("no {section}"));
        for name in wanted {
            assert!(deps.contains_key(*name), "{section} lacks {name}");
        }
        for (name, version) in deps {
            let version = version.as_str().unwrap_or_default();
            assert!(
                exact(version),
                "{section}.{name} is `{version}`, not an exact version"
            );
        }
    }
}
