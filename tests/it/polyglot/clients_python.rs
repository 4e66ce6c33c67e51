//! The installable Python package (`clients/python`) against the real claimd: its wheel and
//! sdist built, the wheel installed into a fresh venv, its own pytest suite run on both
//! stores.
//!
//! What is built and installed where:
//! - a **build venv** with `clients/python/requirements-dev.txt` (build, hatchling, the pinned
//!   grpcio-tools, pytest, mypy, the frameworks of the middleware tests) and a
//!   **wheelhouse** of what the wheel and the tests install (`TEST_DEPS`),
//!   under `target/tmp/polyglot/clients-python`, made again only when `requirements-dev.txt`
//!   or `pyproject.toml` change;
//! - the **wheel and sdist** (`python -m build --no-isolation`), built again whenever any file
//!   of the package changes (the stamp is a digest of all of them);
//! - per test, a **fresh venv** without pip, into which the build venv's pip installs the
//!   wheel and the test deps from the wheelhouse only (`--no-index`): nothing of the checkout is
//!   importable there, and the suite checks that it runs against the installed wheel.
//!
//! The suite (`clients/python/tests`, with the `claimd.idempotent` decorator and the
//! Idempotency-Key handling over real HTTP: the ASGI middleware and the FastAPI dependency
//! under uvicorn, the WSGI middleware under Flask/waitress, the Django middleware under
//! waitress and Django's test client) runs whole against claimd on the embedded store and
//! on PostgreSQL, and without its `slow` cases (lease timing: heartbeats, takeovers, due
//! retries) with an API key (`Live::embedded_with_key`) and over mutual TLS (the test PKI
//! of `common::certs`). Besides: the committed stubs against a fresh generation from
//! `proto/` (`gen_stubs.py --check`), the package's version against `proto/VERSION`, what
//! the wheel and sdist hold, and `mypy --strict`. A missing `python3` fails the tests with
//! what to install, never a skip.

mod cases;

use super::tools;
use crate::common::certs::Pki;
use cases::{IDEMPOTENCY_CASES, KINDS, PER_KIND_CASES, QUICK_CASES, SLOW_CASES};
use std::ffi::OsString;
use std::fs::{self, File};
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What to install when `python3` is missing.
const PYTHON_HINT: &str =
    "install Python 3.10+ with venv and pip (Debian: apt-get install python3 python3-venv)";

/// Directories in the package that are build or tool output, never package files.
const NOT_PACKAGE_FILES: &[&str] = &[
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".venv",
    "build",
    "dist",
];

/// `clients/python` in the checkout.
fn package() -> PathBuf {
    tools::repo().join("clients/python")
}

/// Where this module keeps what it installs: `target/tmp/polyglot/clients-python`.
fn home() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("polyglot/clients-python");
    // The target directory is writable whenever cargo can build.
    fs::create_dir_all(&dir).expect("create target/tmp/polyglot/clients-python");
    dir
}

/// Fails the test with `hint` unless `program --version` runs.
fn require(program: &str, hint: &str) {
    let found = Command::new(program).arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        panic!("`{program}` is needed by the Python client package tests; {hint}");
    }
}

/// Runs `make` unless the stamp of `name` already records `key`; one process at a time.
fn cached(name: &str, key: &str, make: impl FnOnce()) {
    let home = home();
    // An exclusive lock on a file in the target directory: parallel test binaries wait.
    let lock = File::create(home.join(format!("{name}.lock"))).expect("create lock file");
    lock.lock().expect("lock the install");
    let stamp = home.join(format!("{name}.stamp"));
    if fs::read_to_string(&stamp).ok().as_deref() != Some(key) {
        make();
        fs::write(&stamp, key).expect("write install stamp");
    }
}

/// Every file of the package (sorted), build and tool output left out.
fn package_files(dir: &Path, files: &mut Vec<PathBuf>) {
    // The package directory is part of the checkout the test runs from.
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        // A directory listing that started does not fail midway on a local disk.
        let path = entry.expect("directory entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if NOT_PACKAGE_FILES.contains(&name.as_ref()) || name.ends_with(".egg-info") {
            continue;
        }
        if path.is_dir() {
            package_files(&path, files);
        } else {
            files.push(path);
        }
    }
    files.sort();
}

/// A digest of the names and contents of `files`: the stamp of what was built from them.
fn digest(files: &[PathBuf]) -> String {
    let mut hasher = DefaultHasher::new();
    for file in files {
        hasher.write(file.to_string_lossy().as_bytes());
        // Files listed a moment ago are readable unless the checkout changes underfoot.
        hasher.write(&fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())));
    }
    format!("{:016x} over {} files\n", hasher.finish(), files.len())
}

/// What the suite needs besides the wheel: pytest, and the frameworks, servers and HTTP
/// client of the middleware tests (Django too: the package's optional `django` extra, never
/// a dependency of the wheel), and the OpenTelemetry API of the traces tests (each pinned in
/// requirements-dev.txt).
const TEST_DEPS: &[&str] = &[
    "pytest",
    "fastapi",
    "uvicorn",
    "flask",
    "waitress",
    "django",
    "httpx",
    "opentelemetry-api",
];

/// `TEST_DEPS` as pinned, `name==version` each.
fn test_deps() -> Vec<String> {
    TEST_DEPS.iter().map(|name| pinned(name)).collect()
}

/// The one pinned version of `name` in requirements-dev.txt, as `name==version`.
fn pinned(name: &str) -> String {
    let path = package().join("requirements-dev.txt");
    // The requirements file is part of the checkout.
    let text = fs::read_to_string(&path).expect("clients/python/requirements-dev.txt");
    let prefix = format!("{name}==");
    text.lines()
        .map(str::trim)
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("requirements-dev.txt pins no {name}"))
        .to_owned()
}

/// `proto/VERSION`, trimmed.
fn proto_version() -> String {
    // The proto's version file is part of the checkout.
    let text = fs::read_to_string(tools::repo().join("proto/VERSION")).expect("proto/VERSION");
    text.trim().to_owned()
}

/// A command for the build venv's Python, with no bytecode written into the checkout.
fn build_python() -> Command {
    let mut cmd = Command::new(build_venv().join("bin/python"));
    cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// The build venv, installed on first use (again when requirements-dev.txt changes), with
/// the wheelhouse beside it (again when pyproject.toml changes too).
fn build_venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        require("python3", PYTHON_HINT);
        let venv = home().join("build-venv");
        let requirements = package().join("requirements-dev.txt");
        let pip = || {
            let mut cmd = Command::new(venv.join("bin/python"));
            cmd.args(["-m", "pip", "--quiet", "--disable-pip-version-check"])
                .env("PYTHONDONTWRITEBYTECODE", "1");
            cmd
        };
        cached(
            "build-venv",
            &digest(std::slice::from_ref(&requirements)),
            || {
                let _ = fs::remove_dir_all(&venv);
                tools::run(
                    Command::new("python3").arg("-m").arg("venv").arg(&venv),
                    "python3 -m venv (the build venv)",
                );
                tools::run(
                    pip().arg("install").arg("-r").arg(&requirements),
                    "pip install -r clients/python/requirements-dev.txt",
                );
            },
        );
        let wheelhouse = home().join("wheelhouse");
        let inputs = [requirements.clone(), package().join("pyproject.toml")];
        cached("wheelhouse", &digest(&inputs), || {
            let _ = fs::remove_dir_all(&wheelhouse);
            // The package's dependencies as its metadata states them, and the test deps.
            tools::run(
                pip()
                    .args(["download", "--no-build-isolation", "--dest"])
                    .arg(&wheelhouse)
                    .arg(package())
                    .args(test_deps()),
                "pip download (the wheelhouse)",
            );
        });
        venv
    })
}

/// The wheel and the sdist of the package's current files.
struct Dist {
    wheel: PathBuf,
    sdist: PathBuf,
}

/// Builds the wheel and the sdist, unless the package's files are those of the last build.
fn dist() -> &'static Dist {
    static DIST: OnceLock<Dist> = OnceLock::new();
    DIST.get_or_init(|| {
        let out = home().join("dist");
        let mut files = Vec::new();
        package_files(&package(), &mut files);
        cached("dist", &digest(&files), || {
            let _ = fs::remove_dir_all(&out);
            tools::run(
                build_python()
                    .args(["-m", "build", "--no-isolation", "--outdir"])
                    .arg(&out)
                    .arg(package()),
                "python -m build clients/python",
            );
        });
        // The file names carry the version: finding them checks it against proto/VERSION.
        let version = proto_version();
        let wheel = out.join(format!("claimd-{version}-py3-none-any.whl"));
        let sdist = out.join(format!("claimd-{version}.tar.gz"));
        let built: Vec<_> = fs::read_dir(&out)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            wheel.is_file() && sdist.is_file(),
            "the build made {built:?}, not claimd {version} (proto/VERSION)"
        );
        Dist { wheel, sdist }
    })
}

/// A fresh venv holding the wheel, its dependencies and the test deps, nothing else.
struct FreshVenv {
    dir: tempfile::TempDir,
}

impl FreshVenv {
    fn new() -> FreshVenv {
        let dist = dist();
        // A test cannot make a venv without a directory for it.
        let dir = tempfile::Builder::new()
            .prefix("claimd-py-")
            .tempdir()
            .expect("temp dir");
        let venv = dir.path().join("venv");
        tools::run(
            Command::new("python3")
                .args(["-m", "venv", "--without-pip"])
                .arg(&venv),
            "python3 -m venv --without-pip (the fresh venv)",
        );
        tools::run(
            build_python()
                .args(["-m", "pip", "--python"])
                .arg(venv.join("bin/python"))
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(["--no-index", "--no-compile", "--find-links"])
                .arg(home().join("wheelhouse"))
                .arg(&dist.wheel)
                .args(test_deps()),
            "pip install the wheel into the fresh venv",
        );
        FreshVenv { dir }
    }

    /// Runs `cases` of the package's pytest suite with `env` added; returns its output.
    fn pytest(&self, cases: Cases, env: &[(&str, OsString)]) -> String {
        let mut cmd = Command::new(self.dir.path().join("venv/bin/python"));
        cmd.args(["-m", "pytest", "-v", "-rs", "--durations=5"]);
        if let Cases::Quick = cases {
            cmd.args(["-m", "not slow"]);
        }
        cmd.arg(package().join("tests"))
            .current_dir(self.dir.path())
            // Bytecode goes to the temp dir: fast imports, nothing written into the checkout.
            .env("PYTHONPYCACHEPREFIX", self.dir.path().join("pycache"))
            .env_remove("PYTHONPATH");
        // What a developer's shell may have set: the suite gets only what this test says.
        super::client_servers::clear_claimd_env(&mut cmd);
        cmd.env("CLAIMD_PROTO_DIR", tools::repo().join("proto"))
            .env("CLAIMD_EXPECT_WHEEL", "1");
        for (name, value) in env {
            cmd.env(name, value);
        }
        let output = tools::run(&mut cmd, "pytest clients/python/tests");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// Which of the suite's tests a run takes.
#[derive(Clone, Copy)]
enum Cases {
    /// Every one.
    All,
    /// All but those marked `slow`, which wait out leases and backoffs: they test lease
    /// timing, which is the same whatever the transport and credentials.
    Quick,
}

/// Installs the wheel into a fresh venv and runs `cases` of the suite against `live` with
/// `env` (the target is added, and `CLAIMD_QUOTA_TARGET`: a claimd of its own whose anonymous
/// tenant is over its Claims quota after one Claim); returns pytest's output. claimd's log is
/// shown if it fails.
async fn suite(live: &tools::Live, cases: Cases, env: Vec<(&'static str, OsString)>) -> String {
    let target = live.target();
    let quota = tools::Live::embedded_with_quota().await;
    let quota_target = quota.target();
    // On a blocking thread: installing and the suite take seconds.
    let run = tokio::task::spawn_blocking(move || {
        let venv = FreshVenv::new();
        let mut env = env;
        env.push(("CLAIMD_TARGET", target.into()));
        env.push(("CLAIMD_QUOTA_TARGET", quota_target.into()));
        venv.pytest(cases, &env)
    });
    match run.await {
        Ok(output) => output,
        Err(failed) => {
            eprintln!("--- claimd log\n{}", live.claimd.log());
            eprintln!("--- claimd log (quota)\n{}", quota.claimd.log());
            std::panic::resume_unwind(failed.into_panic())
        }
    }
}

/// Fails unless pytest's verbose `output` shows each of `tests` as PASSED.
fn assert_passed(output: &str, tests: &[&str]) {
    for test in tests {
        assert!(
            output.contains(&format!("::{test} PASSED")),
            "{test} did not pass:\n{output}"
        );
    }
}

/// Fails unless every `PER_KIND_CASES` case passed on every kind of mounting.
fn assert_passed_on_every_kind(output: &str) {
    for case in PER_KIND_CASES {
        for kind in KINDS {
            assert_passed(output, &[&format!("{case}[{kind}]")]);
        }
    }
}

/// The whole suite, the wheel installed into a fresh venv, against claimd on SQLite.
#[tokio::test]
async fn the_installed_wheel_passes_its_suite_against_claimd_on_the_embedded_store() {
    let live = tools::Live::embedded().await;
    let output = suite(&live, Cases::All, vec![]).await;
    assert_passed(&output, QUICK_CASES);
    assert_passed(&output, IDEMPOTENCY_CASES);
    assert_passed_on_every_kind(&output);
    assert_passed(&output, SLOW_CASES);
}

/// The whole suite against claimd on a fresh PostgreSQL database.
#[tokio::test]
async fn the_installed_wheel_passes_its_suite_against_claimd_on_postgresql() {
    let live = tools::Live::postgres().await;
    let output = suite(&live, Cases::All, vec![]).await;
    assert_passed(&output, QUICK_CASES);
    assert_passed(&output, IDEMPOTENCY_CASES);
    assert_passed_on_every_kind(&output);
    assert_passed(&output, SLOW_CASES);
}

/// The quick cases against a claimd with keys: every call carries the key; none or a
/// wrong one is UNAUTHENTICATED and never echoed.
#[tokio::test]
async fn the_installed_wheel_sends_its_api_key_and_passes_its_suite_against_a_claimd_with_keys() {
    let (live, key) = tools::Live::embedded_with_key(|_| {}).await;
    let output = suite(&live, Cases::Quick, vec![("CLAIMD_API_KEY", key.into())]).await;
    assert_passed(&output, QUICK_CASES);
    assert_passed(&output, IDEMPOTENCY_CASES);
    assert_passed_on_every_kind(&output);
    assert_passed(
        &output,
        &[
            "test_without_the_api_key_claimd_answers_unauthenticated",
            "test_a_wrong_api_key_is_unauthenticated_and_never_echoed",
            "test_the_api_key_is_sent_with_every_call",
        ],
    );
}

/// The quick cases over mutual TLS (and a key): `claimd.TLS` with the test CA and a client
/// certificate; plaintext, an untrusted server and a missing client certificate fail.
#[tokio::test]
async fn the_installed_wheel_passes_its_suite_over_mutual_tls() {
    let pki = Pki::new();
    let (live, key) = tools::Live::embedded_with_key(|cmd| {
        cmd.arg("--tls-cert").arg(&pki.server_cert);
        cmd.arg("--tls-key").arg(&pki.server_key);
        cmd.arg("--tls-client-ca").arg(&pki.ca);
    })
    .await;
    let (cert, client_key) = &pki.client_files;
    let env = vec![
        ("CLAIMD_API_KEY", key.into()),
        ("CLAIMD_CA_FILE", pki.ca.clone().into()),
        ("CLAIMD_CLIENT_CERT", cert.clone().into()),
        ("CLAIMD_CLIENT_KEY", client_key.clone().into()),
    ];
    let output = suite(&live, Cases::Quick, env).await;
    assert_passed(&output, QUICK_CASES);
    assert_passed(&output, IDEMPOTENCY_CASES);
    assert_passed_on_every_kind(&output);
    assert_passed(
        &output,
        &[
            "test_over_tls_every_call_works",
            "test_a_plaintext_channel_to_the_tls_claimd_fails_unavailable",
            "test_a_server_certificate_from_an_unknown_ca_is_refused",
            "test_without_a_client_certificate_the_mtls_claimd_refuses_the_call",
        ],
    );
}

/// The committed generated modules equal a fresh generation from `proto/` by the pinned
/// grpcio-tools: a proto change without `python gen_stubs.py` fails here.
#[test]
fn the_committed_stubs_are_what_the_pinned_grpcio_tools_makes_of_proto() {
    let output = tools::run(
        build_python()
            .arg(package().join("gen_stubs.py"))
            .arg("--check")
            .arg("--proto")
            .arg(tools::repo().join("proto")),
        "gen_stubs.py --check (stale stubs: run `python gen_stubs.py` in clients/python)",
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("match claimd/v1/claims.proto"));
}

/// `__version__` (which hatch reads as the package's version) is `proto/VERSION`, and so
/// are the names of the built files.
#[test]
fn the_package_version_is_proto_version() {
    let version = proto_version();
    let init = package().join("src/claimd/__init__.py");
    // The package's __init__.py is part of the checkout.
    let text = fs::read_to_string(&init).expect("clients/python/src/claimd/__init__.py");
    assert!(
        text.lines()
            .any(|line| line == format!("__version__ = \"{version}\"")),
        "{} must say __version__ = \"{version}\" (proto/VERSION)",
        init.display()
    );
    // dist() finds claimd-<proto/VERSION> files only: the built metadata says the same.
    let dist = dist();
    assert!(dist.wheel.is_file() && dist.sdist.is_file());
}

/// The member names of a wheel (zip) or sdist (tar.gz), listed by the build venv's Python.
fn members(archive: &Path) -> Vec<String> {
    let script = if archive.extension().is_some_and(|e| e == "whl") {
        "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"
    } else {
        "import sys, tarfile; print('\\n'.join(tarfile.open(sys.argv[1]).getnames()))"
    };
    let output = tools::run(
        build_python().args(["-c", script]).arg(archive),
        "list an archive",
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The wheel ships `py.typed` and the stubs but no tests; the sdist has tests and tools.
#[test]
fn the_wheel_holds_the_typed_package_and_the_sdist_also_its_tests_and_tools() {
    let dist = dist();
    let wheel = members(&dist.wheel);
    for expected in [
        "claimd/__init__.py",
        "claimd/py.typed",
        "claimd/_sync.py",
        "claimd/_aio.py",
        "claimd/asgi.py",
        "claimd/wsgi.py",
        "claimd/fastapi.py",
        "claimd/django.py",
        "claimd/_http.py",
        "claimd/_idempotent.py",
        "claimd/_fingerprint.py",
        "claimd/v1/claims_pb2.py",
        "claimd/v1/claims_pb2.pyi",
        "claimd/v1/claims_pb2_grpc.py",
        "claimd/_rpc/status_pb2.py",
    ] {
        assert!(
            wheel.iter().any(|m| m == expected),
            "the wheel lacks {expected}: {wheel:?}"
        );
    }
    assert!(
        !wheel
            .iter()
            .any(|m| m.starts_with("tests/") || m.contains("__pycache__")),
        "the wheel holds tests or bytecode: {wheel:?}"
    );
    let sdist = members(&dist.sdist);
    let root = format!("claimd-{}/", proto_version());
    for expected in [
        "pyproject.toml",
        "README.md",
        "gen_stubs.py",
        "requirements-dev.txt",
        "src/claimd/v1/claims_pb2.py",
        "tests/test_sync.py",
        "tests/test_async.py",
        "tests/test_http.py",
        "tests/test_http_scope.py",
        "tests/test_fastapi.py",
        "tests/test_django.py",
        "tests/test_scope.py",
        "tests/test_idempotent.py",
    ] {
        let name = format!("{root}{expected}");
        assert!(sdist.contains(&name), "the sdist lacks {name}: {sdist:?}");
    }
}

/// Type hints throughout: mypy --strict over the package, gen_stubs.py and the tests.
#[test]
fn the_package_and_its_tests_type_check_under_mypy_strict() {
    // The settings (strict, the files, the generated modules' exceptions) are pyproject's.
    tools::run(
        build_python()
            .args(["-m", "mypy", "--cache-dir"])
            .arg(home().join("mypy-cache"))
            .current_dir(package()),
        "mypy --strict clients/python",
    );
}

/// Without `python3` the tests fail, naming what to install; they never skip.
#[test]
fn a_missing_python3_fails_with_what_to_install() {
    let failed = std::panic::catch_unwind(|| require("python3-not-installed-here", PYTHON_HINT));
    // require() panics for a program that cannot run, with a formatted (String) message.
    let message = failed.expect_err("a missing program fails the test");
    let message = message.downcast_ref::<String>().map(String::as_str);
    let message = message.unwrap_or_default();
    assert!(
        message.contains("apt-get install python3 python3-venv"),
        "{message}"
    );
}
