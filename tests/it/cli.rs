//! The `claimd` binary as an operator runs it: `migrate`, `serve` with flags and `CLAIMD_*`
//! variables, a clear error without a database, and a clean exit on SIGTERM.

use crate::common::app::{connect, decision};
use crate::common::pg;
use claimd::pb::Decision;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn claimd() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_claimd"));
    cmd.env_remove("CLAIMD_DATABASE_URL")
        .env_remove("CLAIMD_LISTEN")
        .env("CLAIMD_METRICS_LISTEN", "127.0.0.1:0");
    cmd
}

fn free_addr() -> SocketAddr {
    // Binding port 0 on loopback always succeeds on a test machine.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("bound address")
}

/// Waits until the child serves gRPC on `addr`, failing if it exits first.
async fn wait_until_serving(child: &mut Child, addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("claimd exited before serving: {status}");
        }
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "claimd did not listen on {addr} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn has_receipts_table(url: &str) -> bool {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let found: Option<String> = sqlx::query_scalar("SELECT to_regclass('receipts')::text")
        .fetch_one(&pool)
        .await
        .unwrap();
    found.is_some()
}

#[tokio::test]
async fn migrate_creates_the_schema_and_serve_without_migrating_uses_it() {
    let url = pg::fresh_database().await;
    assert!(!has_receipts_table(&url).await);
    let status = claimd()
        .args(["migrate", "--database-url", &url])
        .status()
        .unwrap();
    assert!(status.success(), "claimd migrate failed: {status}");
    assert!(has_receipts_table(&url).await);

    // Configured through the environment this time, as a container would be.
    let addr = free_addr();
    let mut child = claimd()
        .args(["serve", "--no-migrate"])
        .env("CLAIMD_DATABASE_URL", &url)
        .env("CLAIMD_LISTEN", addr.to_string())
        .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until_serving(&mut child, addr).await;
    let mut client = connect(addr).await;
    let response = client
        .claim(claimd::pb::ClaimRequest {
            namespace: "ops".into(),
            key: "evt-1".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(decision(&response), Decision::Claimed);

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "claimd did not exit 0 on SIGTERM: {status}"
    );
}

#[tokio::test]
async fn serve_with_an_unknown_database_scheme_says_which_are_supported() {
    let output = claimd()
        .args(["--listen", &free_addr().to_string()])
        .args(["--database-url", "mysql://root:hunter2@localhost/claimd"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("postgres://") && stderr.contains("sqlite://"),
        "unhelpful error: {stderr}"
    );
    assert!(
        !stderr.contains("hunter2"),
        "the URL's password leaked into the error: {stderr}"
    );
}

#[tokio::test]
async fn serve_refuses_a_database_it_cannot_reach_instead_of_starting_half_alive() {
    let url = "postgres://postgres@localhost/nowhere?host=/nonexistent-socket-dir";
    let output = claimd()
        .args([
            "--listen",
            &free_addr().to_string(),
            "--database-url",
            url,
            "--db-timeout",
            "2s",
        ])
        .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The flag and where the URL leads (issue 29 item 6).
    assert!(
        stderr.contains("(--database-url): cannot reach the socket directory /nonexistent"),
        "unhelpful error: {stderr}"
    );
}
