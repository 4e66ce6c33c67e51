//! `max_waiting`: a tenant's Claims parked in `wait` at once. Of two Claims with `wait`
//! on a receipt in flight, with room for one, exactly one parks and the other is refused
//! RESOURCE_EXHAUSTED naming `max_waiting` (its IN_FLIGHT read wrote nothing); the parked
//! one is answered when the holder completes, and its room is free again after it.

use super::{assert_refused_by, keyed, quota_for, spawn};
use crate::common::app::{Backend, decision};
use crate::common::receipt_ops::{FP, NS, claim_request, secs};
use claimd::domain::Quota;
use claimd::pb::{self, Decision};
use std::time::Duration;

/// Far longer than any answer here should take.
const PATIENCE: Duration = Duration::from_secs(30);

async fn a_tenant_at_max_waiting_is_refused_a_second_parked_claim_and_the_first_is_answered(
    backend: Backend,
) {
    let one = Quota {
        max_waiting: Some(1),
        ..Quota::default()
    };
    let (app, keys) = spawn(backend, quota_for("acme", one), &["acme"]).await;
    let key = keys[0].clone();
    let mut client = app.new_client().await;
    let holder = client.claim(keyed(claim_request("Ev1", FP), &key)).await;
    let holder = holder.expect("the holder's Claim").into_inner();
    assert_eq!(decision(&holder), Decision::Claimed);

    let waiter = |key: String| {
        let mut client = client.clone();
        let request = pb::ClaimRequest {
            wait: secs(20),
            ..claim_request("Ev1", FP)
        };
        tokio::spawn(async move { client.claim(keyed(request, &key)).await })
    };
    let (a, b) = (waiter(key.clone()), waiter(key.clone()));
    // The one refused answers at once; the one parked waits for the holder.
    let (first, parked) = match tokio::time::timeout(PATIENCE, futures::future::select(a, b)).await
    {
        Ok(futures::future::Either::Left((first, parked))) => (first, parked),
        Ok(futures::future::Either::Right((first, parked))) => (first, parked),
        Err(_) => panic!("neither waiting Claim was refused"),
    };
    let refused = first.expect("the task ends").expect_err("one is refused");
    assert_refused_by(&refused, "max_waiting");
    assert!(!parked.is_finished(), "the other is parked");
    let receipt = client
        .get(keyed(
            pb::GetRequest {
                namespace: NS.into(),
                key: "Ev1".into(),
            },
            &key,
        ))
        .await
        .expect("Get")
        .into_inner()
        .receipt;
    assert_eq!(receipt, holder.receipt, "the refused Claim wrote nothing");

    let complete = pb::CompleteRequest {
        namespace: NS.into(),
        key: "Ev1".into(),
        claim_token: holder.claim_token.clone(),
        response: b"done".to_vec(),
    };
    client
        .complete(keyed(complete, &key))
        .await
        .expect("Complete");
    let answered = tokio::time::timeout(PATIENCE, parked)
        .await
        .expect("answered");
    let answered = answered.expect("the task ends").expect("the parked Claim");
    assert_eq!(decision(answered.get_ref()), Decision::Completed);

    // Its room is free again: a Claim in flight on another receipt parks.
    let other = client.claim(keyed(claim_request("Ev2", FP), &key)).await;
    let other = other.expect("Claim").into_inner();
    let request = pb::ClaimRequest {
        wait: secs(20),
        ..claim_request("Ev2", FP)
    };
    let mut parker = client.clone();
    let parks = parker.claim(keyed(request, &key));
    let complete = pb::CompleteRequest {
        namespace: NS.into(),
        key: "Ev2".into(),
        claim_token: other.claim_token.clone(),
        response: b"done".to_vec(),
    };
    let mut completer = client.clone();
    let key2 = key.clone();
    let settle = async move {
        // Completes Ev2 once its waiter has had time to park; either order gives COMPLETED.
        tokio::time::sleep(Duration::from_millis(200)).await;
        completer.complete(keyed(complete, &key2)).await
    };
    let (parked, settled) = tokio::join!(parks, settle);
    settled.expect("Complete");
    assert_eq!(
        decision(parked.expect("parked, not refused").get_ref()),
        Decision::Completed
    );
    app.shutdown().await;
}

conformance!(a_tenant_at_max_waiting_is_refused_a_second_parked_claim_and_the_first_is_answered);
