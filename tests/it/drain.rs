//! Graceful drain through the real binary: after SIGTERM a slow call already in flight
//! completes, a new call is refused with UNAVAILABLE, and the process exits 0 — on both
//! stores, and through both Connect encodings over HTTP/1.1 (where a refused connection is
//! what a Connect client reports as UNAVAILABLE). The in-flight call is made slow by holding
//! a lock on its row (PostgreSQL) or the database's write lock (SQLite) from the test.

use crate::common::app::{Backend, connect, decision};
use crate::common::blocker::Blocker;
use crate::common::probe;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use claimd::pb::{ClaimRequest, CompleteRequest, Decision};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

fn claim(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "drain".into(),
        key: key.into(),
        ..Default::default()
    }
}

async fn a_slow_call_finishes_after_sigterm_while_new_calls_are_refused(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args(["--listen", &addr.to_string(), "--database-url", &url])
        .args(["--db-timeout", "30s", "--shutdown-grace", "30s"])
        .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    let mut server = Claimd::start(cmd, addr).await;
    let (client_addr, _translator) = backend.door.in_front_of(addr).await;
    let mut client = connect(client_addr).await;
    let claimed = client.claim(claim("slow")).await.unwrap().into_inner();
    assert_eq!(decision(&claimed), Decision::Claimed);

    let mut blocker = Blocker::hold(&url, "slow").await;
    let mut slow_client = connect(client_addr).await;
    let slow = tokio::spawn(async move {
        let request = CompleteRequest {
            namespace: "drain".into(),
            key: "slow".into(),
            claim_token: claimed.claim_token,
            response: b"done".to_vec(),
        };
        slow_client.complete(request).await
    });
    blocker.wait_for_waiter().await;
    server.signal(Signal::SIGTERM);
    // Health turns NOT_SERVING only after the drain has started.
    let channel = probe::plaintext_channel(addr).await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    while probe::check(channel.clone(), "").await != Ok(ServingStatus::NotServing) {
        assert!(Instant::now() < deadline, "health never turned NOT_SERVING");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match client.claim(claim("new")).await {
        Err(status) => assert_eq!(
            status.code(),
            Code::Unavailable,
            "{status:?}\n{}",
            server.log()
        ),
        Ok(_) => panic!("a new call was accepted while draining"),
    }
    assert!(
        !slow.is_finished(),
        "the slow call ended before its lock was released"
    );
    blocker.release().await;
    let done = slow
        .await
        .unwrap()
        .expect("the in-flight Complete succeeds");
    assert_eq!(done.into_inner().receipt.unwrap().response, b"done");
    let status = server.wait_for_exit(PATIENCE).await.expect("claimd exits");
    assert!(status.success(), "exit status {status}:\n{}", server.log());
}

conformance_every_door!(a_slow_call_finishes_after_sigterm_while_new_calls_are_refused);

/// SIGTERM the moment the port accepts, five times: each claimd drains and exits 0. The
/// signal handlers are installed before anything binds; they used to be installed only
/// once serving had begun, and a signal in between killed the process (found when the
/// embedded-store start test failed under load).
#[tokio::test]
async fn a_sigterm_as_soon_as_the_port_accepts_is_a_clean_shutdown() {
    for _ in 0..5 {
        // A test cannot run claimd without a directory for its data.
        let dir = tempfile::tempdir().expect("temp dir");
        let addr = free_addr();
        let mut cmd = claimd();
        cmd.args(["--listen", &addr.to_string()])
            .arg("--data-dir")
            .arg(dir.path());
        let server = Claimd::start(cmd, addr).await;
        let status = server.terminate().await;
        assert!(status.success(), "exit status {status}");
    }
}
