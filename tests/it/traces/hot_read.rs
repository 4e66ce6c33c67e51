//! The duplicates of a hot key that share a batch share its read (issue 42): the batch's
//! `db.read` span reads one row however many of its jobs are on that row.

use super::receiver::{Receiver, attribute};
use super::{claim, traced};
use crate::common::blocker::Blocker;
use claimd::pb::{CompleteRequest, Decision, HeartbeatRequest};
use opentelemetry_proto::tonic::trace::v1::Span;

/// Duplicate Claims of the hot key queued behind the held lane.
const DUPLICATES: usize = 8;

/// The size attribute of `span`.
fn size(span: &Span) -> usize {
    let size = attribute(span, "db.operation.batch.size").expect("a batch size");
    size.parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duplicates_of_a_hot_key_in_one_batch_read_its_row_once() {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let mut client = claimd.client().await;
    let hot = client.claim(claim("hot")).await.unwrap().into_inner();
    let done = CompleteRequest {
        namespace: "traced".into(),
        key: "hot".into(),
        claim_token: hot.claim_token,
        response: b"stored".to_vec(),
    };
    client.complete(done).await.unwrap();
    // The one lane held: a Heartbeat of `busy` waits behind the test's lock on its row,
    // and the duplicates queue behind it, to go in one batch.
    let busy = client.claim(claim("busy")).await.unwrap().into_inner();
    let mut blocker = Blocker::hold(&claimd.database_url, "busy").await;
    let heartbeat = HeartbeatRequest {
        namespace: "traced".into(),
        key: "busy".into(),
        claim_token: busy.claim_token,
        ..Default::default()
    };
    let first = {
        let mut client = client.clone();
        tokio::spawn(async move { client.heartbeat(heartbeat).await })
    };
    blocker.wait_for_waiter().await;
    let duplicates: Vec<_> = (0..DUPLICATES)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { client.claim(claim("hot")).await })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    blocker.release().await;
    first.await.unwrap().expect("the Heartbeat that waited");
    for duplicate in duplicates {
        let answer = duplicate.await.unwrap().expect("a duplicate's answer");
        assert_eq!(answer.into_inner().decision(), Decision::Completed);
    }
    // The batch that took every duplicate, and its read.
    let shared = |spans: &[Span]| -> Option<(Span, Span)> {
        let batch = spans
            .iter()
            .find(|b| b.name == "group_commit.batch" && size(b) >= DUPLICATES)?;
        let read = spans
            .iter()
            .find(|r| r.name == "db.read" && r.parent_span_id == batch.span_id)?;
        Some((batch.clone(), read.clone()))
    };
    let spans = collector
        .wait_for("the duplicates' batch and its read", |spans| {
            shared(spans).is_some()
        })
        .await;
    let (batch, read) = shared(&spans).expect("found above");
    assert_eq!(
        size(&read),
        1,
        "a batch of {} jobs on one row reads it once",
        size(&batch)
    );
}
