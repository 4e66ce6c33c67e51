//! A checked batch given up on at `--db-timeout` while it waits for its tenant's turn
//! (PostgreSQL; docs/DESIGN.md §5.15, `store/postgres/turn.rs`): the Claim is answered
//! UNAVAILABLE with nothing written, and the transaction claimd began for it is not left
//! open behind it — one would hold the tenant's turn, so that every checked write of the
//! tenant after it waits out the timeout too, and would carry the writes of whatever call
//! next used its connection, uncommitted.

use super::{get, keyed, quota_for};
use crate::common::app::{Backend, TestApp, decision};
use crate::common::receipt_ops::{FP, claim_request};
use claimd::domain::{Quota, Storage};
use claimd::pb::Decision;
use sqlx::Connection;
use std::time::{Duration, Instant};
use tonic::Code;

/// Sessions of the test's database other than `conn`'s, in `state`.
async fn sessions_in(conn: &mut sqlx::PgConnection, state: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*)::int8 FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND (state LIKE $1 OR wait_event_type = $1)",
    )
    .bind(state)
    .fetch_one(conn)
    .await
    .expect("read pg_stat_activity")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_claim_given_up_on_while_it_waits_for_the_turn_leaves_no_transaction_open() {
    let quota = Quota {
        storage: Storage {
            max_receipts: Some(10),
            max_stored_bytes: None,
        },
        ..Quota::default()
    };
    let policies = quota_for("acme", quota);
    let app = TestApp::builder()
        .backend(Backend::Postgres)
        .configure(move |c| {
            c.policies = policies;
            c.store.acquire_timeout = Duration::from_secs(1);
        })
        .spawn()
        .await;
    let key = app.create_key("acme", None).await.1;
    // The test takes acme's turn (the lock class and key of `turn.rs`) and keeps it.
    let mut holder = sqlx::PgConnection::connect(&app.database_url)
        .await
        .expect("connect to the test's database");
    sqlx::query("BEGIN")
        .execute(&mut holder)
        .await
        .expect("BEGIN");
    sqlx::query("SELECT pg_advisory_xact_lock(1903521652, hashtext('acme'))")
        .execute(&mut holder)
        .await
        .expect("take acme's turn");
    let mut client = app.new_client().await;
    let given_up = client
        .claim(keyed(claim_request("Ev0", FP), &key))
        .await
        .unwrap_err();
    assert_eq!(given_up.code(), Code::Unavailable, "{given_up:?}");
    sqlx::query("COMMIT")
        .execute(&mut holder)
        .await
        .expect("let go of the turn");
    // Whether claimd's session still waits for the turn (its statement_timeout is the same
    // second) or not, it must keep neither the turn nor a transaction.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sessions_in(&mut holder, "Lock").await > 0 {
        assert!(
            Instant::now() < deadline,
            "claimd's session never got the turn"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sessions_in(&mut holder, "idle in transaction%").await,
        0,
        "a transaction of claimd's was left open"
    );
    assert_eq!(
        get(&mut client, "Ev0", &key).await.unwrap_err().code(),
        Code::NotFound
    );
    for n in 1..4 {
        let reply = client
            .claim(keyed(claim_request(&format!("Ev{n}"), FP), &key))
            .await;
        assert_eq!(
            decision(reply.expect("the turn is free").get_ref()),
            Decision::Claimed
        );
    }
    assert_eq!(app.receipt_rows().await, 3);
    app.shutdown().await;
}
