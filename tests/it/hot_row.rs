//! A hot row through two real claimd replicas on one PostgreSQL database (docs/DESIGN.md
//! §4.2): the holder's Heartbeats arrive on both replicas at once, with duplicate Claims of
//! the same key between them, so lanes of both replicas race their compare-and-set writes
//! on one row. A write that loses to a commit made while it waited for the row reads the
//! row as committed before it decides again, so every call is answered, and none is
//! UNAVAILABLE while the database is up.

use crate::common::app::{TestApp, decision};
use crate::common::receipt_ops::{FP, claim, claim_request, claimed, complete, heartbeat};
use claimd::pb::Decision;
use std::sync::Arc;

/// Rounds of calls sent together.
const ROUNDS: usize = 10;
/// Heartbeats per replica in a round.
const BEATS: usize = 12;
/// Duplicate Claims per replica in a round.
const DUPLICATES: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_hot_row_on_two_replicas_is_never_answered_unavailable() {
    let first = TestApp::builder().spawn().await;
    let second = TestApp::builder()
        .database_url(first.database_url.clone())
        .spawn()
        .await;
    let (token, _) = claimed(&first, "hot", b"").await;
    let replicas = Arc::new([first, second]);
    for _ in 0..ROUNDS {
        let mut calls = Vec::new();
        for r in 0..2 {
            for _ in 0..BEATS {
                let (replicas, token) = (replicas.clone(), token.clone());
                calls.push(tokio::spawn(async move {
                    heartbeat(&replicas[r], "hot", &token, Some(60), None)
                        .await
                        .map(drop)
                        .map_err(|s| format!("Heartbeat: {s:?}"))
                }));
            }
            for _ in 0..DUPLICATES {
                let replicas = replicas.clone();
                calls.push(tokio::spawn(async move {
                    let answer = claim(&replicas[r], claim_request("hot", FP)).await;
                    match decision(&answer) {
                        Decision::InFlight => Ok(()),
                        d => Err(format!("a duplicate Claim was answered {d:?}")),
                    }
                }));
            }
        }
        for call in calls {
            call.await.expect("the call's task").expect("answered");
        }
    }
    complete(&replicas[1], "hot", &token, b"done")
        .await
        .expect("the holder completes");
}
