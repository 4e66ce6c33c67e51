//! Floods of wrong API keys through the real server (issue 17 §5): a lookup is a read, so
//! wrong secrets for a known key id write nothing; `last_used_at` is written by the
//! background flush, not once per call; a flood of random keys evicts no valid key from the
//! cache; and an address that keeps failing gets RESOURCE_EXHAUSTED while a key that works
//! keeps working from the same address. Writes to `api_keys` are counted by a trigger the
//! test adds to its own database.

use crate::common::app::{Backend, TestApp, decision};
use claimd::auth::generate_key;
use claimd::config::Config;
use claimd::pb::{ClaimRequest, Decision};
use claimd::store::keys::NewApiKey;
use futures::StreamExt;
use std::time::{Duration, Instant};
use tonic::{Code, Request};

conformance!(
    wrong_secrets_for_a_known_id_write_nothing_and_the_valid_key_keeps_working,
    last_used_at_is_written_by_the_flush_not_once_per_call,
    a_flood_of_random_keys_does_not_evict_a_valid_key,
    a_failing_address_is_throttled_but_its_valid_key_still_works,
);

/// Concurrent senders of the flood (HTTP/2 streams on one loopback connection each).
const SENDERS: usize = 16;

async fn app(backend: Backend, configure: impl FnOnce(&mut Config)) -> TestApp {
    TestApp::builder()
        .backend(backend)
        .configure(configure)
        .spawn()
        .await
}

/// Creates a key for tenant `acme`; returns its id and the whole key.
async fn create_key(app: &TestApp) -> (String, String) {
    let generated = generate_key();
    let new = NewApiKey {
        id: generated.id.clone(),
        tenant: "acme".into(),
        secret_hash: generated.secret_hash,
        label: Some("flood test".into()),
        namespaces: None,
    };
    app.store().await.create_key(&new).await.unwrap();
    (generated.id, generated.key)
}

fn claim(key: &str, event: &str) -> Request<ClaimRequest> {
    let mut request = Request::new(ClaimRequest {
        namespace: "hooks".into(),
        key: event.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: crate::common::app::secs(30, 0),
        ..Default::default()
    });
    let value = format!("Bearer {key}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

/// Claims `event` with `key`; the status code, `Ok` on success.
async fn attempt(app: &TestApp, key: &str, event: &str) -> Code {
    let mut client = app.client.clone();
    match client.claim(claim(key, event)).await {
        Ok(reply) => {
            assert_eq!(decision(reply.get_ref()), Decision::Claimed);
            Code::Ok
        }
        Err(status) => {
            assert!(!status.message().contains(key), "the key was echoed");
            status.code()
        }
    }
}

/// A well-formed key with a random secret, for `id` or a random id.
fn wrong_key(id: Option<&str>) -> String {
    let random = generate_key().key;
    match id {
        Some(id) => random.replacen(&random[7..23], id, 1),
        None => random,
    }
}

/// Sends `keys` with [`SENDERS`] in flight; every answer must be `expected`.
async fn flood(app: &TestApp, keys: Vec<String>, expected: Code) {
    let answers = futures::stream::iter(keys)
        .map(|key| async move { attempt(app, &key, "flood").await })
        .buffer_unordered(SENDERS)
        .collect::<Vec<Code>>()
        .await;
    assert!(answers.iter().all(|c| *c == expected), "{answers:?}");
}

/// Runs `sql` (several statements) on the test's own database.
async fn execute(app: &TestApp, sql: &'static str) {
    use sqlx::{Connection, Executor};
    if app.database_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
            .await
            .unwrap();
        conn.execute(sql).await.unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(&app.database_url)
            .await
            .unwrap();
        conn.execute(sql).await.unwrap();
    }
}

/// Counts every row update of `api_keys` from now on, whoever makes it.
async fn count_key_updates(app: &TestApp) {
    let sql = if app.database_url.starts_with("sqlite:") {
        "CREATE TABLE key_updates (n INTEGER NOT NULL);
         INSERT INTO key_updates VALUES (0);
         CREATE TRIGGER count_key_updates AFTER UPDATE ON api_keys
         BEGIN UPDATE key_updates SET n = n + 1; END;"
    } else {
        "CREATE TABLE key_updates (n BIGINT NOT NULL);
         INSERT INTO key_updates VALUES (0);
         CREATE FUNCTION count_key_update() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN UPDATE key_updates SET n = n + 1; RETURN NULL; END $$;
         CREATE TRIGGER count_key_updates AFTER UPDATE ON api_keys
         FOR EACH ROW EXECUTE FUNCTION count_key_update();"
    };
    execute(app, sql).await;
}

/// Row updates of `api_keys` since [`count_key_updates`].
async fn key_updates(app: &TestApp) -> i64 {
    use sqlx::Connection;
    let sql = "SELECT n FROM key_updates";
    if app.database_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&app.database_url)
            .await
            .unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    } else {
        let mut conn = sqlx::PgConnection::connect(&app.database_url)
            .await
            .unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
    }
}

async fn wrong_secrets_for_a_known_id_write_nothing_and_the_valid_key_keeps_working(
    backend: Backend,
) {
    // No failure limit: every wrong secret reaches the store, and no flush during the test.
    let app = app(backend, |c| {
        c.auth_failure_limit = 0;
        c.key_touch_interval = Duration::from_secs(3600);
    })
    .await;
    let (id, key) = create_key(&app).await;
    count_key_updates(&app).await;

    let wrong: Vec<String> = (0..400).map(|_| wrong_key(Some(&id))).collect();
    let flooding = flood(&app, wrong, Code::Unauthenticated);
    let legitimate = async {
        for n in 0..20 {
            assert_eq!(attempt(&app, &key, &format!("Ev{n}")).await, Code::Ok);
        }
    };
    tokio::join!(flooding, legitimate);
    assert_eq!(key_updates(&app).await, 0, "lookups wrote to api_keys");
}

async fn last_used_at_is_written_by_the_flush_not_once_per_call(backend: Backend) {
    // Nothing cached: every call looks the key up, and still it is written once per flush.
    let app = app(backend, |c| {
        c.key_cache_ttl = Duration::ZERO;
        c.key_touch_interval = Duration::from_millis(500);
    })
    .await;
    let (id, key) = create_key(&app).await;
    count_key_updates(&app).await;
    let store = app.store().await;
    let last_used = || async {
        let keys = store.list_keys().await.unwrap();
        keys.into_iter().find(|k| k.id == id).unwrap().last_used_at
    };
    assert_eq!(last_used().await, None);

    let calls = 40;
    for n in 0..calls {
        assert_eq!(attempt(&app, &key, &format!("Ev{n}")).await, Code::Ok);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while last_used().await.is_none() {
        assert!(Instant::now() < deadline, "last_used_at was never written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let updates = key_updates(&app).await;
    assert!(
        (1..calls).contains(&updates),
        "{updates} writes for {calls} calls"
    );
}

async fn a_flood_of_random_keys_does_not_evict_a_valid_key(backend: Backend) {
    // Answers trusted for an hour: a revoked key that is still cached still works, which is
    // how the test sees whether the flood evicted it.
    let app = app(backend, |c| {
        c.auth_failure_limit = 0;
        c.key_cache_ttl = Duration::from_secs(3600);
    })
    .await;
    let (id, key) = create_key(&app).await;
    assert_eq!(attempt(&app, &key, "before").await, Code::Ok);
    assert!(app.store().await.revoke_key(&id).await.unwrap());

    // More random keys than either cache holds (and than the old single cache did).
    let random: Vec<String> = (0..10_050).map(|_| wrong_key(None)).collect();
    flood(&app, random, Code::Unauthenticated).await;
    assert_eq!(
        attempt(&app, &key, "after").await,
        Code::Ok,
        "the flood evicted the valid key's cached answer"
    );
}

async fn a_failing_address_is_throttled_but_its_valid_key_still_works(backend: Backend) {
    // Five failures per hour; answers trusted for 100 ms, so the valid key is looked up again
    // (as a known key) while its address is throttled.
    let app = app(backend, |c| {
        c.auth_failure_limit = 5;
        c.auth_failure_window = Duration::from_secs(3600);
        c.key_cache_ttl = Duration::from_millis(100);
    })
    .await;
    let (id, key) = create_key(&app).await;
    assert_eq!(attempt(&app, &key, "before").await, Code::Ok);

    for _ in 0..5 {
        let code = attempt(&app, &wrong_key(Some(&id)), "wrong").await;
        assert_eq!(code, Code::Unauthenticated);
    }
    let wrong = wrong_key(Some(&id));
    let status = app
        .client
        .clone()
        .claim(claim(&wrong, "wrong"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("too many failed authentications"),
        "{status:?}"
    );
    assert!(!status.message().contains(&wrong) && !status.message().contains(&id));
    let random = wrong_key(None);
    assert_eq!(
        attempt(&app, &random, "random").await,
        Code::ResourceExhausted
    );

    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(attempt(&app, &key, "after").await, Code::Ok);
    assert_eq!(attempt(&app, &key, "again").await, Code::Ok);
}
