//! The decision contract, played by one tenant through its own API key against a claimd
//! on a Citus coordinator: claim, in flight, complete and replay, conflict, orphans and
//! takeover with fencing, retry, quarantine, the attempt budget, List, Redrive and bad
//! input. The app's default policy allows three attempts ([`MAX_ATTEMPTS`]).

use crate::common::app::TestApp;
use claimd::pb::{
    ClaimRequest, ClaimResponse, CompleteRequest, Decision, HeartbeatRequest, ListOrphanedRequest,
    ListRequest, QuarantineRequest, RedriveRequest, RetryRequest, State,
};
use std::time::Duration;
use tonic::{Code, Request};

/// The attempts the app's default policy allows.
pub const MAX_ATTEMPTS: u32 = 3;

const NS: &str = "citus-events";
const FP: &[u8] = b"sha256-of-body";

/// `message` with `key` as its bearer credentials.
pub fn with_key<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("a header value");
    request.metadata_mut().insert("authorization", value);
    request
}

fn secs(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

/// The Claim of `key` with `fp` and a lease of `lease` seconds.
fn claim_of(key: &str, fp: &[u8], lease: i64) -> ClaimRequest {
    ClaimRequest {
        namespace: NS.into(),
        key: key.into(),
        fingerprint: fp.to_vec(),
        lease_ttl: secs(lease),
        recovery_payload: b"the event".to_vec(),
        ..Default::default()
    }
}

async fn claim(app: &TestApp, api: &str, key: &str, fp: &[u8], lease: i64) -> ClaimResponse {
    let answer = app
        .client
        .clone()
        .claim(with_key(claim_of(key, fp, lease), api))
        .await;
    answer
        .unwrap_or_else(|s| panic!("Claim {key}: {s:?}"))
        .into_inner()
}

fn decided(answer: &ClaimResponse) -> Decision {
    Decision::try_from(answer.decision).expect("a known decision")
}

fn attempt(answer: &ClaimResponse) -> u32 {
    answer.receipt.as_ref().expect("a receipt").attempt
}

/// Plays the whole contract as the tenant of `api` (its prefix `tag` keeps its keys apart).
pub async fn plays(app: &TestApp, api: &str, tag: &str) {
    let (k1, k2, k3) = (format!("{tag}-1"), format!("{tag}-2"), format!("{tag}-3"));
    // Claim, in flight, complete and replay, conflict.
    let first = claim(app, api, &k1, FP, 30).await;
    assert_eq!(decided(&first), Decision::Claimed, "{tag}: {first:?}");
    let again = claim(app, api, &k1, FP, 30).await;
    assert_eq!(decided(&again), Decision::InFlight, "{tag}: {again:?}");
    let done = CompleteRequest {
        namespace: NS.into(),
        key: k1.clone(),
        claim_token: first.claim_token.clone(),
        response: b"200 OK".to_vec(),
    };
    app.client
        .clone()
        .complete(with_key(done, api))
        .await
        .expect("Complete");
    let replay = claim(app, api, &k1, FP, 30).await;
    assert_eq!(decided(&replay), Decision::Completed, "{tag}: {replay:?}");
    assert_eq!(
        replay.receipt.as_ref().map(|r| &r.response[..]),
        Some(&b"200 OK"[..])
    );
    let other = claim(app, api, &k1, b"another body", 30).await;
    assert_eq!(decided(&other), Decision::Conflict, "{tag}: {other:?}");

    // An expired lease is an orphan, taken over with a higher attempt; the old token is fenced.
    let held = claim(app, api, &k2, FP, 5).await;
    assert_eq!(decided(&held), Decision::Claimed);
    app.advance(Duration::from_secs(6));
    let orphans = ListOrphanedRequest {
        namespace: NS.into(),
        page_size: 10,
        ..Default::default()
    };
    let orphans = app
        .client
        .clone()
        .list_orphaned(with_key(orphans, api))
        .await;
    let orphans = orphans.expect("ListOrphaned").into_inner().orphans;
    let keys: Vec<&str> = orphans
        .iter()
        .filter_map(|o| o.receipt.as_ref())
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [k2.as_str()],
        "{tag}: the expired lease is the one orphan"
    );
    let taken = claim(app, api, &k2, FP, 30).await;
    assert_eq!(
        (decided(&taken), attempt(&taken)),
        (Decision::Claimed, 2),
        "{tag}: {taken:?}"
    );
    let stale = HeartbeatRequest {
        namespace: NS.into(),
        key: k2.clone(),
        claim_token: held.claim_token.clone(),
        lease_ttl: secs(30),
        checkpoint: None,
    };
    let fenced = app.client.clone().heartbeat(with_key(stale, api)).await;
    assert_eq!(fenced.expect_err("fenced").code(), Code::Aborted, "{tag}");

    // Retry: scheduled, then claimable once due.
    let retry = RetryRequest {
        namespace: NS.into(),
        key: k2.clone(),
        claim_token: taken.claim_token.clone(),
        error: "downstream 503".into(),
        retry_after: secs(10),
        count_attempt: None,
    };
    app.client
        .clone()
        .retry(with_key(retry, api))
        .await
        .expect("Retry");
    let waiting = claim(app, api, &k2, FP, 30).await;
    assert_eq!(
        decided(&waiting),
        Decision::RetryScheduled,
        "{tag}: {waiting:?}"
    );
    app.advance(Duration::from_secs(11));
    let third = claim(app, api, &k2, FP, 30).await;
    assert_eq!(
        (decided(&third), attempt(&third)),
        (Decision::Claimed, 3),
        "{tag}: {third:?}"
    );

    // Quarantine by the holder: a dead letter, listed.
    let quarantine = QuarantineRequest {
        namespace: NS.into(),
        key: k2.clone(),
        claim_token: third.claim_token.clone(),
        error: "poison".into(),
    };
    app.client
        .clone()
        .quarantine(with_key(quarantine, api))
        .await
        .expect("Quarantine");
    let dead = claim(app, api, &k2, FP, 30).await;
    assert_eq!(decided(&dead), Decision::Quarantined, "{tag}: {dead:?}");

    // The attempt budget: the claim after the last attempt's lease quarantines.
    for n in 1..=MAX_ATTEMPTS {
        let answer = claim(app, api, &k3, FP, 5).await;
        assert_eq!(
            (decided(&answer), attempt(&answer)),
            (Decision::Claimed, n),
            "{tag}"
        );
        app.advance(Duration::from_secs(6));
    }
    let spent = claim(app, api, &k3, FP, 5).await;
    assert_eq!(decided(&spent), Decision::Quarantined, "{tag}: {spent:?}");
    let list = ListRequest {
        namespace: NS.into(),
        states: vec![State::Quarantined as i32],
        page_size: 10,
        page_token: String::new(),
    };
    let list = app
        .client
        .clone()
        .list(with_key(list, api))
        .await
        .expect("List")
        .into_inner();
    let dead: Vec<&str> = list.receipts.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(dead, [k2.as_str(), k3.as_str()], "{tag}: the dead letters");

    // Redrive gives a dead letter a new budget.
    let redrive = RedriveRequest {
        namespace: NS.into(),
        key: k3.clone(),
    };
    app.client
        .clone()
        .redrive(with_key(redrive, api))
        .await
        .expect("Redrive");
    let revived = claim(app, api, &k3, FP, 30).await;
    assert_eq!(decided(&revived), Decision::Claimed, "{tag}: {revived:?}");

    // Bad input writes nothing and names the field.
    let bad = app
        .client
        .clone()
        .claim(with_key(claim_of("", FP, 30), api))
        .await;
    assert_eq!(
        bad.expect_err("refused").code(),
        Code::InvalidArgument,
        "{tag}"
    );
}
