//! The embedded default (docs/DESIGN.md §4, §5): with no `--database-url` claimd serves SQLite from
//! `claimd.db` in its data directory, creating the directory on first start, and one
//! SQLite file serves one claimd process — a second one refuses to start and names the
//! process that holds the file.

use crate::common::app::connect;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use claimd::pb::{self, Decision};
use std::path::Path;

async fn claim(addr: std::net::SocketAddr, key: &str) -> Decision {
    let request = pb::ClaimRequest {
        namespace: "embedded".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    let answer = connect(addr).await.claim(request).await;
    answer.expect("Claim answers").into_inner().decision()
}

/// Whether `text` holds `number` as a whole number (not inside a longer one).
fn mentions_number(text: &str, number: u32) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|word| word == number.to_string())
}

fn serve_data_dir(dir: &Path, addr: std::net::SocketAddr) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
        .arg(dir);
    cmd
}

#[tokio::test]
async fn a_second_claimd_on_the_same_sqlite_file_refuses_to_start_and_names_the_first() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("data");
    let first_addr = free_addr();
    let first = Claimd::start(serve_data_dir(&data, first_addr), first_addr).await;
    assert_eq!(claim(first_addr, "before").await, Decision::Claimed);

    // The same file, reached through --database-url this time.
    let url = format!("sqlite://{}", data.join("claimd.db").display());
    let second_addr = free_addr();
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &second_addr.to_string(),
        "--database-url",
        &url,
    ]);
    let mut second = Claimd::spawn(cmd);
    let Some(status) = second.wait_for_exit(PATIENCE).await else {
        panic!("the second claimd is still running:\n{}", second.log());
    };
    let message = second.log();
    assert!(!status.success(), "the second claimd exited 0:\n{message}");
    assert!(
        mentions_number(&message, first.pid()),
        "the refusal does not name process {}:\n{message}",
        first.pid()
    );
    assert!(
        tokio::net::TcpStream::connect(second_addr).await.is_err(),
        "the second claimd listened on {second_addr} before refusing"
    );

    // The first one was not disturbed.
    assert_eq!(claim(first_addr, "after").await, Decision::Claimed);
    assert_eq!(claim(first_addr, "before").await, Decision::InFlight);
    let lock = std::fs::read_to_string(data.join("claimd.db.lock")).expect("lock file");
    assert_eq!(
        lock.trim(),
        first.pid().to_string(),
        "the lock still names the first"
    );
    let status = first.terminate().await;
    assert!(
        status.success(),
        "the first claimd did not exit 0: {status}"
    );
}

#[tokio::test]
async fn a_data_dir_that_does_not_exist_yet_is_created_on_first_start_and_holds_claimd_db() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("nested").join("dir");
    assert!(!data.exists());
    let addr = free_addr();
    let server = Claimd::start(serve_data_dir(&data, addr), addr).await;
    assert_eq!(claim(addr, "evt-1").await, Decision::Claimed);
    assert!(
        data.join("claimd.db").is_file(),
        "no claimd.db in {}",
        data.display()
    );
    let status = server.terminate().await;
    assert!(
        status.success(),
        "claimd did not exit 0 on SIGTERM: {status}"
    );

    // The receipt is in that file: a restart on the same data directory still knows it.
    let addr = free_addr();
    let server = Claimd::start(serve_data_dir(&data, addr), addr).await;
    assert_eq!(claim(addr, "evt-1").await, Decision::InFlight);
    assert!(server.terminate().await.success());
}

#[tokio::test]
async fn migrate_without_a_url_creates_claimd_data_claimd_db_in_the_working_directory() {
    let cwd = tempfile::tempdir().expect("temp dir");
    let output = claimd()
        .arg("migrate")
        .current_dir(cwd.path())
        .output()
        .expect("claimd runs");
    assert!(
        output.status.success(),
        "claimd migrate failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let db = cwd.path().join("claimd-data").join("claimd.db");
    assert!(db.is_file(), "no {}", db.display());

    // The file holds the schema: a server started on it without migrating can claim.
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["serve", "--no-migrate", "--listen", &addr.to_string()])
        .current_dir(cwd.path());
    let server = Claimd::start(cmd, addr).await;
    assert_eq!(claim(addr, "evt-1").await, Decision::Claimed);
    assert!(server.terminate().await.success());
}
