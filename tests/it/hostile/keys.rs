//! Wrong API keys against the real binary (issue 27 §5): a source over its failed-
//! authentication limit (`--auth-failure-limit`, 30) is answered RESOURCE_EXHAUSTED for its
//! wrong keys, but a correct key this claimd has never seen is still served from it — also
//! one created after the source was throttled, and while it keeps sending a wrong key a
//! second; and one failure each from 10,001 other loopback addresses does not give the
//! throttled source its allowance back. `--auth-failure-window 1h`, so nothing refills
//! while a test runs.

use super::{BOUND, Target};
use claimd::auth::generate_key;
use claimd::pb::Decision;
use futures::StreamExt;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tonic::Code;

/// The default `--auth-failure-limit`.
const LIMIT: usize = 30;

/// A claimd with an API key whose failed authentications never refill during the test.
async fn target() -> Target {
    Target::start_with_key(&["--auth-failure-window", "1h"]).await
}

/// A well-formed key with a random id and secret: no stored key has it.
fn wrong_key() -> String {
    generate_key().key
}

/// The code a Claim with `key` from `from` (127.0.0.1 if `None`) is answered with.
async fn code(target: &Target, from: Option<IpAddr>, key: &str) -> Code {
    match target.claim_from(from, Some(key)).await {
        Ok(decision) => {
            assert_eq!(decision, Decision::Claimed);
            Code::Ok
        }
        Err(status) => {
            assert!(!status.message().contains(key), "the key was echoed");
            status.code()
        }
    }
}

/// Sends wrong keys from 127.0.0.1 until its limit is spent: [`LIMIT`] are UNAUTHENTICATED,
/// the next RESOURCE_EXHAUSTED.
async fn throttle(target: &Target) {
    for n in 0..LIMIT {
        let answered = code(target, None, &wrong_key()).await;
        assert_eq!(answered, Code::Unauthenticated, "wrong key {n}");
    }
    let answered = code(target, None, &wrong_key()).await;
    assert_eq!(answered, Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_key_never_used_is_served_from_a_source_over_its_failure_limit() {
    let target = target().await;
    throttle(&target).await;
    // Created after the source was throttled, never used by this claimd.
    let fresh = target.create_key();
    assert_eq!(
        code(&target, None, &fresh).await,
        Code::Ok,
        "{}",
        target.log()
    );
    assert_eq!(
        code(&target, None, &wrong_key()).await,
        Code::ResourceExhausted
    );
    let throttled = target.metric("claimd_auth_throttled_sources_total").await;
    assert_eq!(throttled, 1.0);
    let refused = target.metric("claimd_auth_throttled_total").await;
    assert_eq!(refused, 2.0);
    target
        .assert_survived("31 wrong API keys, then a new correct one")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_wrong_key_a_second_does_not_keep_correct_keys_out() {
    let target = target().await;
    let fresh: Vec<String> = (0..5).map(|_| target.create_key()).collect();
    throttle(&target).await;
    for (n, key) in fresh.iter().enumerate() {
        let wrong = code(&target, None, &wrong_key()).await;
        assert_eq!(wrong, Code::ResourceExhausted, "round {n}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(code(&target, None, key).await, Code::Ok, "round {n}");
    }
    target
        .assert_survived("a wrong API key a second from a throttled source")
        .await;
}

/// The `n`th of the other sources: 127.1.0.1, 127.1.0.2, …
fn other_source(n: usize) -> IpAddr {
    let n = u32::try_from(n + 1).expect("a small number");
    IpAddr::V4(Ipv4Addr::from(0x7f01_0000 | n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_from_10001_other_sources_do_not_reset_a_throttled_source() {
    const OTHERS: usize = 10_001;
    let target = target().await;
    throttle(&target).await;

    let target = &target;
    let started = std::time::Instant::now();
    let answers = futures::stream::iter(0..OTHERS)
        .map(|n| async move { code(target, Some(other_source(n)), &wrong_key()).await })
        .buffer_unordered(16)
        .collect::<Vec<Code>>()
        .await;
    let unauthenticated = answers
        .iter()
        .filter(|c| **c == Code::Unauthenticated)
        .count();
    assert_eq!(unauthenticated, OTHERS, "{:?}", &answers[..20]);
    println!(
        "one wrong API key from each of 10,001 sources: {:?}",
        started.elapsed()
    );

    let after = tokio::time::timeout(BOUND, code(target, None, &wrong_key())).await;
    assert_eq!(after.expect("answered"), Code::ResourceExhausted);
    let fresh = target.create_key();
    assert_eq!(code(target, None, &fresh).await, Code::Ok);
    target
        .assert_survived("one wrong API key from each of 10,001 sources")
        .await;
}
