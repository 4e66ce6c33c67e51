//! Who may sign in to the console and what a session may see and do, over plain HTTP on
//! both stores: a refused key gets no cookie; the session cookie is HttpOnly and
//! SameSite=Strict; a POST without the session's CSRF token, or from another origin, changes
//! nothing; a revoked key's session ends; a key limited to a namespace sees only it;
//! payloads are shown only where `--console-show-payloads` allows; a receipt's key and
//! error are escaped.

use super::page::{self, addr, console_app, get, post, receipt_path, sign_in, text};
use crate::common::app::{Backend, TestApp, secs};
use claimd::pb::{ClaimRequest, GetRequest, QuarantineRequest, State};
use tonic::Request;

conformance!(
    a_refused_key_gets_no_session_and_a_good_one_an_http_only_strict_cookie,
    a_post_without_the_csrf_token_or_from_another_origin_changes_nothing,
    a_redrive_with_the_token_makes_the_dead_letter_due_again,
    a_revoked_key_ends_its_sessions,
    a_key_limited_to_a_namespace_sees_and_acts_on_only_it,
    payloads_are_shown_only_for_the_namespaces_the_flag_names,
    a_key_and_an_error_holding_markup_are_escaped,
);

fn with_key<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value = format!("Bearer {key}").parse().expect("a header value");
    request.metadata_mut().insert("authorization", value);
    request
}

/// `ns`/`k` claimed with key `api_key` and a recovery payload, then quarantined with `error`.
async fn dead_letter(app: &TestApp, api_key: &str, ns: &str, k: &str, error: &str) {
    let mut client = app.new_client().await;
    let claim = ClaimRequest {
        namespace: ns.into(),
        key: k.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        recovery_payload: format!("payload of {k}").into_bytes(),
        ..Default::default()
    };
    let token = client
        .claim(with_key(claim, api_key))
        .await
        .unwrap()
        .into_inner()
        .claim_token;
    let quarantine = QuarantineRequest {
        namespace: ns.into(),
        key: k.into(),
        claim_token: token,
        error: error.into(),
    };
    client
        .quarantine(with_key(quarantine, api_key))
        .await
        .unwrap();
}

async fn state(app: &TestApp, api_key: &str, ns: &str, k: &str) -> State {
    let get = GetRequest {
        namespace: ns.into(),
        key: k.into(),
    };
    let got = app
        .new_client()
        .await
        .get(with_key(get, api_key))
        .await
        .unwrap();
    got.into_inner().receipt.unwrap().state()
}

async fn a_refused_key_gets_no_session_and_a_good_one_an_http_only_strict_cookie(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    let console = addr(&app);
    let refused = post(console, "/login", &[("key", "ck_nope.wrong")], None, &[]).await;
    assert_eq!(refused.status, 401);
    assert!(page::header(&refused, "set-cookie").is_none_or(|c| c.contains("Max-Age=0")));
    assert!(text(&refused).contains("That API key was refused."));
    // Without a session every page sends the browser to sign in.
    assert_eq!(get(console, "/", None).await.status, 303);
    assert_eq!(get(console, "/receipts", Some("made-up")).await.status, 401);

    let answer = post(console, "/login", &[("key", &key)], None, &[]).await;
    assert_eq!(answer.status, 303);
    let cookie = page::header(&answer, "set-cookie").unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP: not Secure ({cookie})"
    );
    assert!(!cookie.contains(&key), "the cookie is not the key");
    let session = sign_in(console, &key).await;
    let overview = get(console, "/", Some(&session)).await;
    assert_eq!(overview.status, 200);
    assert!(text(&overview).contains("acme"));
    let csp = page::header(&overview, "content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
}

async fn a_post_without_the_csrf_token_or_from_another_origin_changes_nothing(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    dead_letter(&app, &key, "hooks", "ev-1", "poison").await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let token = page::csrf(console, &session).await;
    let target = [("namespace", "hooks"), ("key", "ev-1")];

    let no_token = post(console, "/receipt/redrive", &target, Some(&session), &[]).await;
    assert_eq!(no_token.status, 403);
    assert!(text(&no_token).contains("CSRF"));
    let wrong = [("namespace", "hooks"), ("key", "ev-1"), ("csrf", "forged")];
    let forged = post(console, "/receipt/redrive", &wrong, Some(&session), &[]).await;
    assert_eq!(forged.status, 403);
    let with_token = [
        ("namespace", "hooks"),
        ("key", "ev-1"),
        ("csrf", token.as_str()),
    ];
    for headers in [
        &[("Origin", "http://evil.example")][..],
        &[("Sec-Fetch-Site", "cross-site")][..],
    ] {
        let answer = post(
            console,
            "/receipt/redrive",
            &with_token,
            Some(&session),
            headers,
        )
        .await;
        assert_eq!(answer.status, 403, "{headers:?}");
    }
    let no_session = post(console, "/receipt/redrive", &with_token, None, &[]).await;
    assert_eq!(no_session.status, 403);
    assert_eq!(state(&app, &key, "hooks", "ev-1").await, State::Quarantined);
}

async fn a_redrive_with_the_token_makes_the_dead_letter_due_again(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    dead_letter(&app, &key, "hooks", "ev-1", "poison").await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let token = page::csrf(console, &session).await;
    let origin = format!("http://{console}");
    let form = [
        ("namespace", "hooks"),
        ("key", "ev-1"),
        ("csrf", token.as_str()),
    ];
    let headers = [
        ("Origin", origin.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let answer = post(console, "/receipt/redrive", &form, Some(&session), &headers).await;
    assert_eq!(answer.status, 303, "{}", text(&answer));
    assert_eq!(state(&app, &key, "hooks", "ev-1").await, State::RetryWait);
    let shown = text(&get(console, &receipt_path("hooks", "ev-1"), Some(&session)).await);
    assert!(shown.contains("retry_wait"), "{shown}");
}

async fn a_revoked_key_ends_its_sessions(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (id, key) = app.create_key("acme", None).await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    assert_eq!(get(console, "/", Some(&session)).await.status, 200);
    assert!(app.store().await.revoke_key(&id).await.unwrap());
    // The key cache holds an answer for 200 ms.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let ended = get(console, "/", Some(&session)).await;
    assert_eq!(ended.status, 401);
    assert!(text(&ended).contains("no longer signs in"));
    // And it stays ended: the session is forgotten.
    assert_eq!(get(console, "/", Some(&session)).await.status, 401);
}

async fn a_key_limited_to_a_namespace_sees_and_acts_on_only_it(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, all) = app.create_key("acme", None).await;
    let (_, limited) = app.create_key("acme", Some(&["mine"])).await;
    dead_letter(&app, &all, "mine", "ev-1", "poison").await;
    dead_letter(&app, &all, "theirs", "ev-2", "poison").await;
    let console = addr(&app);
    let session = sign_in(console, &limited).await;
    let overview = text(&get(console, "/", Some(&session)).await);
    assert!(overview.contains("data-namespace=\"mine\""));
    assert!(!overview.contains("theirs"), "{overview}");
    let list = text(&get(console, "/receipts", Some(&session)).await);
    assert!(list.contains("ev-1") && !list.contains("ev-2"), "{list}");
    let other = get(console, &receipt_path("theirs", "ev-2"), Some(&session)).await;
    assert_eq!(other.status, 403);
    let token = page::csrf(console, &session).await;
    let form = [
        ("namespace", "theirs"),
        ("key", "ev-2"),
        ("csrf", token.as_str()),
    ];
    let refused = post(console, "/receipt/redrive", &form, Some(&session), &[]).await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        state(&app, &all, "theirs", "ev-2").await,
        State::Quarantined
    );
}

async fn payloads_are_shown_only_for_the_namespaces_the_flag_names(backend: Backend) {
    let app = console_app(backend, |c| c.console_show_payloads = vec!["shown".into()]).await;
    let (_, key) = app.create_key("acme", None).await;
    dead_letter(&app, &key, "shown", "ev-1", "poison").await;
    dead_letter(&app, &key, "hidden", "ev-2", "poison").await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let shown = text(&get(console, &receipt_path("shown", "ev-1"), Some(&session)).await);
    assert!(shown.contains("payload of ev-1"), "{shown}");
    let hidden = text(&get(console, &receipt_path("hidden", "ev-2"), Some(&session)).await);
    assert!(!hidden.contains("payload of ev-2"), "{hidden}");
    assert!(hidden.contains("15 bytes"), "the size is shown: {hidden}");
}

async fn a_key_and_an_error_holding_markup_are_escaped(backend: Backend) {
    let app = console_app(backend, |_| {}).await;
    let (_, key) = app.create_key("acme", None).await;
    let evil_key = "<script>window.__pwned=1</script>";
    let evil_error = "<img src=x onerror=\"window.__pwned=2\">";
    dead_letter(&app, &key, "hooks", evil_key, evil_error).await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    for path in [
        "/receipts?namespace=hooks".to_owned(),
        receipt_path("hooks", evil_key),
    ] {
        let body = text(&get(console, &path, Some(&session)).await);
        assert!(!body.contains("<script>window"), "{path}: {body}");
        assert!(!body.contains("<img src=x"), "{path}: {body}");
        assert!(
            body.contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;"),
            "{body}"
        );
    }
}
