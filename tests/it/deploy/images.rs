//! The images the deployment tests run. claimd's: `scripts/image` packaging this test run's
//! own binary (the debug build cargo made for the tests, stripped: a release build would take
//! ten minutes here), tagged `localhost/claimd:<version>-test` so it never replaces a release
//! image built with `scripts/image`; podman's layer cache makes an unchanged binary cheap.
//! PostgreSQL's (test only): `tests/it/deploy/postgres/build`, run again only when its stamp
//! under target/ — the build script, the Containerfile, `postgres --version` — changed or the
//! image is gone.

use super::podman;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::process::Command;
use tokio::sync::OnceCell;

/// claimd's version (proto/VERSION), the image's tag.
pub fn version() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto/VERSION");
    // The checkout always has proto/VERSION.
    let text = std::fs::read_to_string(path).expect("proto/VERSION");
    text.trim().to_owned()
}

/// The tests' build of claimd's image; built once per test run.
pub async fn claimd() -> &'static str {
    static IMAGE: OnceCell<String> = OnceCell::const_new();
    IMAGE
        .get_or_init(|| async {
            // build_claimd fails the test itself when the build fails.
            tokio::task::spawn_blocking(build_claimd)
                .await
                .expect("scripts/image ran")
        })
        .await
}

fn build_claimd() -> String {
    let tag = format!("localhost/claimd:{}-test", version());
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // scripts/image is part of the checkout.
    let out = Command::new(repo.join("scripts/image"))
        .args(["--binary", env!("CARGO_BIN_EXE_claimd"), "--tag", &tag])
        .env("CONTAINERS_CONF", podman::conf())
        .output()
        .expect("scripts/image runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "scripts/image failed: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Shown with --nocapture: the image and its size.
    println!("{}", said.trim());
    // The layers an earlier binary left behind.
    podman::run(&["image", "prune", "--force"]);
    tag
}

/// The tests' PostgreSQL image; built when its stamp is stale.
pub async fn postgres() -> &'static str {
    static IMAGE: OnceCell<String> = OnceCell::const_new();
    IMAGE
        .get_or_init(|| async {
            // build_postgres fails the test itself when the build fails.
            tokio::task::spawn_blocking(build_postgres)
                .await
                .expect("the PostgreSQL image was built")
        })
        .await
}

fn build_postgres() -> String {
    let tag = "localhost/claimd-test-postgres:15".to_owned();
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/deploy/postgres");
    let pg_bin = std::env::var("CLAIMD_PG_BIN").unwrap_or("/usr/lib/postgresql/15/bin".into());
    let postgres = Command::new(format!("{pg_bin}/postgres"))
        .arg("--version")
        .output();
    let postgres = postgres.unwrap_or_else(|e| {
        panic!(
            "{pg_bin}/postgres: {e}: install PostgreSQL 15 (Debian: apt-get install postgresql-15)"
        )
    });
    let mut stamp = Sha256::new();
    for file in ["build", "Containerfile"] {
        // Both are part of the checkout.
        stamp.update(std::fs::read(here.join(file)).expect("the image's sources"));
    }
    stamp.update(&postgres.stdout);
    let stamp = format!("{:x}\n", stamp.finalize());
    let stamp_file = podman::dir().join("postgres-image.stamp");
    let exists = podman::output(&["image", "exists", &tag]).status.success();
    if exists && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str()) {
        return tag;
    }
    // The build script is part of the checkout.
    let out = Command::new(here.join("build"))
        .arg(podman::dir().join("postgres-context"))
        .arg(&tag)
        .env("PG_BIN", &pg_bin)
        .env("CONTAINERS_CONF", podman::conf())
        .output()
        .expect("the PostgreSQL image's build script runs");
    assert!(
        out.status.success(),
        "tests/it/deploy/postgres/build failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The target directory is writable wherever the tests build.
    std::fs::write(&stamp_file, stamp).expect("write the stamp");
    tag
}
