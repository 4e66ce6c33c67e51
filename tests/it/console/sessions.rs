//! The console's sessions as a per-tenant resource (issue 43, item 5), over real HTTP with
//! real keys: a flood of sign-ins by another tenant's key (1,024 on one reproduced the
//! eviction of every operator's session) ends no session of this tenant; a key beyond
//! `SESSIONS_PER_KEY` ends its own oldest session, a tenant beyond `SESSIONS_PER_TENANT`
//! its own oldest, never another tenant's; a sign-in carrying the cookie of its key's
//! session replaces it; a console full (`MAX_SESSIONS`) refuses a tenant that holds no
//! session with a 503 and ends nobody's; concurrent sign-ins keep a key within its cap.

use super::keep_alive::{Connection, session_cookie};
use super::page::{addr, console_app, get, sign_in, text};
use crate::common::app::{Backend, TestApp};
use claimd::console::{MAX_SESSIONS, SESSIONS_PER_KEY, SESSIONS_PER_TENANT};
use claimd::store::keys::NewApiKey;

conformance!(
    a_flood_of_sign_ins_by_another_tenants_key_ends_no_session_of_this_tenant,
    a_keys_sign_ins_beyond_its_cap_end_its_own_oldest_session_only,
    a_tenants_sign_ins_beyond_its_cap_end_its_own_oldest_session_and_no_other_tenants,
    a_sign_in_with_the_cookie_of_its_keys_session_replaces_that_session,
    concurrent_sign_ins_by_one_key_leave_it_exactly_its_cap_of_sessions,
);

/// `count` new keys of `tenant` (all its namespaces), made through one store connection.
async fn keys(app: &TestApp, tenant: &str, count: usize) -> Vec<String> {
    let store = app.store().await;
    let mut keys = Vec::with_capacity(count);
    for _ in 0..count {
        let generated = claimd::auth::generate_key();
        let new = NewApiKey {
            id: generated.id,
            tenant: tenant.to_owned(),
            secret_hash: generated.secret_hash,
            label: Some("test".into()),
            namespaces: None,
        };
        store.create_key(&new).await.expect("key created");
        keys.push(generated.key);
    }
    keys
}

/// Which of `cookies` name live sessions, asked on one connection.
async fn live(app: &TestApp, cookies: &[String]) -> Vec<bool> {
    let mut connection = Connection::open(addr(app)).await;
    let mut live = Vec::with_capacity(cookies.len());
    for cookie in cookies {
        live.push(connection.is_live(cookie).await);
    }
    live
}

async fn a_flood_of_sign_ins_by_another_tenants_key_ends_no_session_of_this_tenant(
    backend: Backend,
) {
    let app = console_app(backend, |_| {}).await;
    let (_, operator) = app.create_key("acme", None).await;
    let (_, intruder) = app.create_key("globex", Some(&["mine"])).await;
    let console = addr(&app);
    let session = sign_in(console, &operator).await;
    let mut flood = Connection::open(console).await;
    for _ in 0..MAX_SESSIONS + 1 {
        let answer = flood.sign_in(&intruder, None).await;
        assert_eq!(answer.status, 303, "{}", text(&answer));
    }
    let page = get(console, "/", Some(&session)).await;
    assert_eq!(page.status, 200, "{}", text(&page));
    assert!(text(&page).contains("acme"));
}

async fn a_keys_sign_ins_beyond_its_cap_end_its_own_oldest_session_only(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let keys = keys(&app, "acme", 2).await;
    let mut connection = Connection::open(addr(&app)).await;
    let neighbour = session_cookie(&connection.sign_in(&keys[1], None).await);
    let mut cookies = Vec::new();
    for _ in 0..SESSIONS_PER_KEY + 1 {
        cookies.push(session_cookie(&connection.sign_in(&keys[0], None).await));
    }
    let oldest = connection.get("/", &cookies[0]).await;
    assert_eq!(oldest.status, 401);
    assert!(text(&oldest).contains("Your session ended"));
    let newest = connection.get("/", cookies.last().unwrap()).await;
    assert_eq!(newest.status, 200, "{}", text(&newest));
    let mut expected = vec![true; cookies.len()];
    expected[0] = false;
    assert_eq!(live(&app, &cookies).await, expected);
    assert_eq!(
        live(&app, &[neighbour]).await,
        [true],
        "another key's session"
    );
}

async fn a_tenants_sign_ins_beyond_its_cap_end_its_own_oldest_session_and_no_other_tenants(
    backend: Backend,
) {
    let app = console_app(backend, |_| {}).await;
    let (_, other) = app.create_key("globex", None).await;
    let mut connection = Connection::open(addr(&app)).await;
    // The other tenant's session is the process's least recently used throughout.
    let theirs = session_cookie(&connection.sign_in(&other, None).await);
    let keys = keys(&app, "acme", SESSIONS_PER_TENANT / SESSIONS_PER_KEY + 1).await;
    let mut ours = Vec::new();
    for key in &keys[..keys.len() - 1] {
        for _ in 0..SESSIONS_PER_KEY {
            ours.push(session_cookie(&connection.sign_in(key, None).await));
        }
    }
    assert_eq!(ours.len(), SESSIONS_PER_TENANT);
    assert!(
        live(&app, &ours).await.iter().all(|l| *l),
        "all within the cap"
    );
    let last_key = keys.last().unwrap();
    ours.push(session_cookie(&connection.sign_in(last_key, None).await));
    let mut expected = vec![true; ours.len()];
    expected[0] = false;
    assert_eq!(
        live(&app, &ours).await,
        expected,
        "the tenant's oldest ended"
    );
    let page = connection.get("/", &theirs).await;
    assert_eq!(
        page.status,
        200,
        "the other tenant's session: {}",
        text(&page)
    );
}

async fn a_sign_in_with_the_cookie_of_its_keys_session_replaces_that_session(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    let mut connection = Connection::open(addr(&app)).await;
    // Another browser of the same key, signed in first: the oldest, were there growth.
    let elsewhere = session_cookie(&connection.sign_in(&key, None).await);
    let mut current = session_cookie(&connection.sign_in(&key, None).await);
    for _ in 0..SESSIONS_PER_KEY * 2 {
        let answer = connection.sign_in(&key, Some(&current)).await;
        let replaced = std::mem::replace(&mut current, session_cookie(&answer));
        assert_ne!(replaced, current, "a new session id at each sign-in");
        let old = connection.get("/", &replaced).await;
        assert_eq!(old.status, 401, "the replaced cookie ends");
    }
    assert_eq!(connection.get("/", &current).await.status, 200);
    assert_eq!(
        connection.get("/", &elsewhere).await.status,
        200,
        "no growth"
    );
}

async fn concurrent_sign_ins_by_one_key_leave_it_exactly_its_cap_of_sessions(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    let (_, other) = app.create_key("globex", None).await;
    let console = addr(&app);
    let theirs = sign_in(console, &other).await;
    // Four connections (of the eight one source may hold), each signing in at once.
    let floods = (0..4).map(|_| {
        let key = key.clone();
        tokio::spawn(async move {
            let mut connection = Connection::open(console).await;
            let mut cookies = Vec::new();
            for _ in 0..SESSIONS_PER_KEY * 8 {
                cookies.push(session_cookie(&connection.sign_in(&key, None).await));
            }
            cookies
        })
    });
    let mut cookies = Vec::new();
    for flood in futures::future::join_all(floods).await {
        cookies.extend(flood.expect("a flood task"));
    }
    let live_now = live(&app, &cookies).await;
    assert_eq!(live_now.iter().filter(|l| **l).count(), SESSIONS_PER_KEY);
    assert_eq!(live(&app, &[theirs]).await, [true]);
}

/// 64 tenants of 8 keys, each key at its cap: `MAX_SESSIONS` sessions, every tenant at
/// its cap. On SQLite: sign-ins are checked through the key cache, the same on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_console_refuses_a_tenant_holding_no_session_and_ends_no_session() {
    let app = console_app(Backend::Sqlite, |_| {}).await;
    let console = addr(&app);
    let tenants = MAX_SESSIONS / SESSIONS_PER_TENANT;
    let mut fills = Vec::new();
    for connection in 0..4 {
        let mut names = Vec::new();
        for tenant in (connection..tenants).step_by(4) {
            let name = format!("tenant-{tenant}");
            names.push(keys(&app, &name, SESSIONS_PER_TENANT / SESSIONS_PER_KEY).await);
        }
        fills.push(tokio::spawn(async move {
            let mut connection = Connection::open(console).await;
            let mut cookies = Vec::new();
            for key in names.iter().flatten() {
                for _ in 0..SESSIONS_PER_KEY {
                    cookies.push(session_cookie(&connection.sign_in(key, None).await));
                }
            }
            cookies
        }));
    }
    let mut cookies = Vec::new();
    for fill in futures::future::join_all(fills).await {
        cookies.extend(fill.expect("a fill task"));
    }
    assert_eq!(cookies.len(), MAX_SESSIONS);

    let latecomer = keys(&app, "latecomer", 1).await;
    let mut connection = Connection::open(console).await;
    let refused = connection.sign_in(&latecomer[0], None).await;
    assert_eq!(refused.status, 503, "{}", text(&refused));
    assert!(text(&refused).contains("as many sessions as it may"));
    assert!(super::page::header(&refused, "set-cookie").is_none());
    assert!(live(&app, &cookies).await.iter().all(|l| *l), "none ended");
}
