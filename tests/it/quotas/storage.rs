//! The storage quotas `max_receipts` and `max_stored_bytes` (docs/DESIGN.md §5.15) through
//! the real server, on both stores: the write that would pass a limit is refused
//! RESOURCE_EXHAUSTED with QuotaFailure and RetryInfo and writes nothing; concurrent
//! Claims of fresh keys never pass `max_receipts`; a Complete whose response would pass
//! `max_stored_bytes` is refused and the holder keeps its lease; the janitor frees room; a
//! lowered limit applies to the next call; on PostgreSQL two replicas share one figure;
//! the figures kept in `tenant_usage` always equal a count of the tenant's receipts.

use super::{assert_refused_by, get, keyed, quota_for, spawn};
use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{FP, NS, claim_request, secs};
use claimd::domain::{Policies, Policy, Quota, Storage};
use claimd::pb::{self, Decision, State};
use std::time::Duration;
use tonic::Code;

fn storage(max_receipts: Option<u64>, max_stored_bytes: Option<u64>) -> Quota {
    Quota {
        storage: Storage {
            max_receipts,
            max_stored_bytes,
        },
        ..Quota::default()
    }
}

/// Claims `Ev0`…`Ev{count - 1}` with `api_key`, one after the other, each of them CLAIMED
/// (`why` says why none may be refused).
async fn claim_fresh_keys(client: &mut super::Client, api_key: &str, count: usize, why: &str) {
    for n in 0..count {
        let reply = client
            .claim(keyed(claim_request(&format!("Ev{n}"), FP), api_key))
            .await;
        assert_eq!(decision(reply.expect(why).get_ref()), Decision::Claimed);
    }
}

/// What `tenant_usage` says of `tenant`, and what counting its receipts says.
async fn figures(app: &TestApp, tenant: &str) -> ((i64, i64), (i64, i64)) {
    use sqlx::Connection;
    let kept = "SELECT COALESCE(sum(receipts), 0)::int8, COALESCE(sum(stored_bytes), 0)::int8
                FROM tenant_usage WHERE tenant_id = $1";
    let counted = "SELECT count(*)::int8, COALESCE(sum(
        COALESCE(octet_length(last_error), 0) + COALESCE(octet_length(checkpoint), 0)
        + COALESCE(octet_length(response), 0) + COALESCE(octet_length(recovery_payload), 0)),
        0)::int8 FROM receipts WHERE tenant_id = $1";
    if app.database_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
            .await
            .expect("connect to the test's database");
        let sqlite = |q: &str| {
            q.replace("::int8", "")
                .replace("octet_length", "length")
                .replace("$1", "?")
        };
        let kept: (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sqlite(kept)))
            .bind(tenant)
            .fetch_one(&mut conn)
            .await
            .expect("tenant_usage");
        let counted: (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(sqlite(counted)))
            .bind(tenant)
            .fetch_one(&mut conn)
            .await
            .expect("receipts");
        (kept, counted)
    } else {
        let mut conn = sqlx::PgConnection::connect(&app.database_url)
            .await
            .expect("connect to the test's database");
        let kept: (i64, i64) = sqlx::query_as(kept)
            .bind(tenant)
            .fetch_one(&mut conn)
            .await
            .expect("tenant_usage");
        let counted: (i64, i64) = sqlx::query_as(counted)
            .bind(tenant)
            .fetch_one(&mut conn)
            .await
            .expect("receipts");
        (kept, counted)
    }
}

/// Asserts that `tenant_usage` holds exactly what counting `tenant`'s receipts gives, and
/// returns it.
async fn assert_figures_exact(app: &TestApp, tenant: &str) -> (i64, i64) {
    let (kept, counted) = figures(app, tenant).await;
    assert_eq!(
        kept, counted,
        "tenant_usage against a count of {tenant}'s receipts"
    );
    kept
}

async fn max_receipts_refuses_the_claim_that_would_pass_it_and_writes_nothing(backend: Backend) {
    let (app, keys) = spawn(
        backend,
        quota_for("acme", storage(Some(3), None)),
        &["acme", "globex"],
    )
    .await;
    let mut client = app.new_client().await;
    claim_fresh_keys(&mut client, &keys[0], 3, "under the limit").await;
    let refused = client
        .claim(keyed(claim_request("Ev3", FP), &keys[0]))
        .await
        .unwrap_err();
    assert_refused_by(&refused, "max_receipts");
    assert!(
        refused.message().contains("nothing was written"),
        "{refused:?}"
    );
    assert_eq!(
        get(&mut client, "Ev3", &keys[0]).await.unwrap_err().code(),
        Code::NotFound
    );
    // A duplicate adds no receipt: it is answered as before.
    let again = client
        .claim(keyed(claim_request("Ev0", FP), &keys[0]))
        .await;
    assert_eq!(
        decision(again.expect("a duplicate").get_ref()),
        Decision::InFlight
    );
    // Another tenant is not limited by acme's receipts.
    claim_fresh_keys(&mut client, &keys[1], 5, "globex has no limit").await;
    assert_eq!(app.receipt_rows().await, 8);
    assert_eq!(assert_figures_exact(&app, "acme").await.0, 3);
    app.shutdown().await;
}

async fn concurrent_claims_of_fresh_keys_never_pass_max_receipts(backend: Backend) {
    let (app, keys) = spawn(
        backend,
        quota_for("acme", storage(Some(10), None)),
        &["acme"],
    )
    .await;
    let mut tasks = Vec::new();
    for n in 0..48 {
        let (mut client, key) = (app.new_client().await, keys[0].clone());
        tasks.push(tokio::spawn(async move {
            client
                .claim(keyed(claim_request(&format!("Ev{n}"), FP), &key))
                .await
        }));
    }
    let (mut claimed, mut refused) = (0, 0);
    for task in tasks {
        match task.await.expect("the task ends") {
            Ok(reply) => {
                assert_eq!(decision(reply.get_ref()), Decision::Claimed);
                claimed += 1;
            }
            Err(status) => {
                assert_refused_by(&status, "max_receipts");
                refused += 1;
            }
        }
    }
    assert_eq!((claimed, refused), (10, 38));
    assert_eq!(app.receipt_rows().await, 10);
    assert_eq!(assert_figures_exact(&app, "acme").await.0, 10);
    app.shutdown().await;
}

async fn a_complete_whose_response_would_pass_max_stored_bytes_is_refused_and_the_lease_is_kept(
    backend: Backend,
) {
    let (app, keys) = spawn(
        backend,
        quota_for("acme", storage(None, Some(400))),
        &["acme"],
    )
    .await;
    let mut client = app.new_client().await;
    let held = client
        .claim(keyed(claim_request("Ev1", FP), &keys[0]))
        .await
        .unwrap()
        .into_inner();
    let complete = |response: Vec<u8>| pb::CompleteRequest {
        namespace: NS.into(),
        key: "Ev1".into(),
        claim_token: held.claim_token.clone(),
        response,
    };
    let refused = client
        .complete(keyed(complete(vec![7; 1000]), &keys[0]))
        .await
        .unwrap_err();
    let delay = assert_refused_by(&refused, "max_stored_bytes");
    assert!(delay >= Duration::from_secs(1), "{delay:?}");
    let receipt = get(&mut client, "Ev1", &keys[0]).await.unwrap();
    assert_eq!(
        receipt,
        held.receipt.clone().unwrap(),
        "unchanged: still the holder's"
    );
    assert_eq!(State::try_from(receipt.state), Ok(State::Processing));
    let done = client
        .complete(keyed(complete(vec![7; 100]), &keys[0]))
        .await;
    let done = done
        .expect("within the limit, by the same holder")
        .into_inner();
    assert_eq!(done.receipt.unwrap().response, vec![7; 100]);
    let (_, bytes) = assert_figures_exact(&app, "acme").await;
    assert!(bytes > 100 && bytes <= 400, "{bytes}");
    app.shutdown().await;
}

async fn the_janitor_frees_room_for_new_receipts(backend: Backend) {
    let mut policies = quota_for("acme", storage(Some(2), None));
    policies.default = Policy {
        retention: chrono::TimeDelta::seconds(10),
        response_retention: chrono::TimeDelta::seconds(5),
        ..Policy::default()
    };
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.policies = policies;
            c.janitor.interval = Duration::ZERO;
        })
        .spawn()
        .await;
    let key = app.create_key("acme", None).await.1;
    let mut client = app.new_client().await;
    for n in 0..2 {
        let reply = client
            .claim(keyed(claim_request(&format!("Ev{n}"), FP), &key))
            .await;
        let reply = reply.unwrap().into_inner();
        let request = pb::CompleteRequest {
            namespace: NS.into(),
            key: format!("Ev{n}"),
            claim_token: reply.claim_token,
            response: vec![1; 64],
        };
        client
            .complete(keyed(request, &key))
            .await
            .expect("complete");
    }
    let refused = client
        .claim(keyed(claim_request("Ev2", FP), &key))
        .await
        .unwrap_err();
    assert_refused_by(&refused, "max_receipts");
    // Past response retention: the responses go, the receipts stay (still two).
    app.advance(Duration::from_secs(6));
    app.janitor.run_once().await.expect("janitor pass");
    assert_eq!(assert_figures_exact(&app, "acme").await, (2, 0));
    let refused = client
        .claim(keyed(claim_request("Ev2", FP), &key))
        .await
        .unwrap_err();
    assert_refused_by(&refused, "max_receipts");
    // Past retention: the receipts go, and there is room again.
    app.advance(Duration::from_secs(6));
    app.janitor.run_once().await.expect("janitor pass");
    assert_eq!(assert_figures_exact(&app, "acme").await, (0, 0));
    let reply = client.claim(keyed(claim_request("Ev2", FP), &key)).await;
    assert_eq!(
        decision(reply.expect("room again").get_ref()),
        Decision::Claimed
    );
    app.shutdown().await;
}

async fn a_lowered_max_receipts_applies_to_the_next_claim(backend: Backend) {
    let (app, keys) = spawn(
        backend,
        quota_for("acme", storage(Some(10), None)),
        &["acme"],
    )
    .await;
    let mut client = app.new_client().await;
    let claim = |key: String| {
        let request = keyed(claim_request(&key, FP), &keys[0]);
        let mut client = client.clone();
        async move { client.claim(request).await }
    };
    for n in 0..3 {
        claim(format!("Ev{n}")).await.expect("under 10");
    }
    app.policies
        .replace(quota_for("acme", storage(Some(3), None)));
    assert_refused_by(&claim("Ev3".into()).await.unwrap_err(), "max_receipts");
    app.policies.replace(Policies::default());
    claim("Ev3".into()).await.expect("no limit");
    assert_eq!(get(&mut client, "Ev3", &keys[0]).await.unwrap().attempt, 1);
    app.shutdown().await;
}

/// The store does not lean on the tenant alphabet (`domain::check_name`) to build its
/// statements: a tenant whose name holds a quote and a backslash (a key made straight in
/// the store, which the CLI would refuse) is counted and refused like any other, and a
/// tenant whose name is its prefix is not limited by it.
async fn a_tenant_named_with_quotes_and_backslashes_is_checked_like_any_other(backend: Backend) {
    let odd = r"o'brien\ltd";
    let (app, keys) = spawn(backend, quota_for(odd, storage(Some(2), None)), &[odd, "o"]).await;
    let mut client = app.new_client().await;
    claim_fresh_keys(&mut client, &keys[0], 2, "under the limit").await;
    let refused = client
        .claim(keyed(claim_request("Ev2", FP), &keys[0]))
        .await
        .unwrap_err();
    assert_refused_by(&refused, "max_receipts");
    claim_fresh_keys(&mut client, &keys[1], 3, "o has no limit").await;
    assert_eq!(assert_figures_exact(&app, odd).await.0, 2);
    assert_eq!(app.receipt_rows().await, 5);
    app.shutdown().await;
}

conformance!(
    max_receipts_refuses_the_claim_that_would_pass_it_and_writes_nothing,
    concurrent_claims_of_fresh_keys_never_pass_max_receipts,
    a_complete_whose_response_would_pass_max_stored_bytes_is_refused_and_the_lease_is_kept,
    the_janitor_frees_room_for_new_receipts,
    a_lowered_max_receipts_applies_to_the_next_claim,
    a_tenant_named_with_quotes_and_backslashes_is_checked_like_any_other,
);

/// Two claimds on one PostgreSQL database: 40 Claims of fresh keys spread over both, at
/// once, never pass a `max_receipts` of 12 that each enforces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_figure_and_never_pass_max_receipts_together() {
    let policies = quota_for("acme", storage(Some(12), None));
    let (first, keys) = spawn(Backend::Postgres, policies.clone(), &["acme"]).await;
    let second = TestApp::builder()
        .backend(Backend::Postgres)
        .database_url(first.database_url.clone())
        .configure(|c| c.policies = policies)
        .spawn()
        .await;
    let mut tasks = Vec::new();
    for n in 0..40 {
        let app = if n % 2 == 0 { &first } else { &second };
        let (mut client, key) = (app.new_client().await, keys[0].clone());
        let request = pb::ClaimRequest {
            lease_ttl: secs(30),
            ..claim_request(&format!("Ev{n}"), FP)
        };
        tasks.push(tokio::spawn(async move {
            client.claim(keyed(request, &key)).await
        }));
    }
    let mut claimed = 0;
    for task in tasks {
        match task.await.expect("the task ends") {
            Ok(_) => claimed += 1,
            Err(status) => {
                assert_refused_by(&status, "max_receipts");
            }
        }
    }
    assert_eq!(claimed, 12);
    assert_eq!(first.receipt_rows().await, 12);
    assert_eq!(assert_figures_exact(&first, "acme").await.0, 12);
    second.shutdown().await;
    first.shutdown().await;
}
