//! Issue 46 §12 through the real binary: with a collector that accepts connections and
//! never answers (a TCP listener that only holds them), every export fails at the
//! exporter's timeout (10 s, the default). While claimd serves, the failures are logged —
//! a warning with the counts and the exporter's error, never a span's content — and on
//! SIGTERM claimd exits within `--shutdown-grace`: the spans still queued get what the drain
//! left of it, not the SDK's own 5 s (before the fix it exited 5 s after the drain).

use super::{claim, parent, traced, with_parent};
use claimd::pb::claim_service_client::ClaimServiceClient;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// The grace the test gives claimd.
const GRACE: &str = "1s";
/// How long after SIGTERM claimd may take to exit: the grace and time to start the exit
/// (the flush before the fix alone took 5 s).
const EXITS_WITHIN: Duration = Duration::from_secs(4);
/// How long the test waits for the first failed export to be logged: the exporter's
/// timeout of 10 s and slack.
const LOGGED_WITHIN: Duration = Duration::from_secs(30);
/// The line a failed export logs.
const FAILED: &str = "traces: exporting spans to the collector failed";

/// A traced Claim of key `silent-CANARY-n`.
async fn claim_one(client: &mut ClaimServiceClient<Channel>, n: u8) {
    let (_, _, header) = parent(200 + n);
    let request = with_parent(claim(&format!("silent-CANARY-{n}")), &header);
    client.claim(request).await.expect("answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_collector_that_never_answers_failed_exports_are_logged_and_sigterm_exits_within_the_grace()
 {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a port");
    let at = silent.local_addr().expect("a bound address");
    // Accepts every connection and keeps it, reading and writing nothing.
    let _held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let mut traced = traced(at, &["--shutdown-grace", GRACE], &[]).await;
    let mut client = traced.client().await;
    claim_one(&mut client, 1).await;

    let started = Instant::now();
    while !traced.claimd.log().contains(FAILED) {
        assert!(
            started.elapsed() < LOGGED_WITHIN,
            "no failed export logged within {LOGGED_WITHIN:?}:\n{}",
            traced.claimd.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = traced.claimd.log();
    let warning = log.lines().find(|l| l.contains(FAILED)).unwrap_or_default();
    assert!(warning.contains("failed_exports"), "{warning}");
    assert!(
        !warning.contains("CANARY"),
        "a span's content was logged: {warning}"
    );

    // Spans queued while an export hangs on the collector, then SIGTERM.
    for n in 2..=6 {
        claim_one(&mut client, n).await;
    }
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    traced.claimd.signal(Signal::SIGTERM);
    let exited = traced.claimd.wait_for_exit(EXITS_WITHIN).await;
    let took = signalled.elapsed();
    let Some(status) = exited else {
        panic!(
            "claimd still runs {EXITS_WITHIN:?} after SIGTERM (--shutdown-grace {GRACE}):\n{}",
            traced.claimd.log()
        );
    };
    assert!(status.success(), "{status:?}:\n{}", traced.claimd.log());
    println!("a collector that never answers: exited {took:?} after SIGTERM (grace {GRACE})");
    let log = traced.claimd.log();
    assert!(!log.contains("panicked"), "{log}");
}
