//! The session store's rules on small caps: each key and tenant makes room from its own
//! sessions, a full process refuses a tenant that holds none and ends nothing, a sign-in
//! with its key's cookie replaces that session, and ended sessions are forgotten first.

use super::held::{Caps, Held};
use super::*;

fn principal_of(tenant: &str) -> Principal {
    Principal {
        tenant: tenant.into(),
        namespaces: None,
    }
}

fn principal() -> Principal {
    principal_of("acme")
}

/// Two sessions a key, three a tenant, five in all.
fn small() -> Sessions {
    Sessions::with_caps(Caps {
        per_key: 2,
        per_tenant: 3,
        total: 5,
    })
}

/// Signs `key` of `tenant` in; its session's id.
fn sign_in(sessions: &Sessions, tenant: &str, key: &str) -> String {
    sessions
        .start(principal_of(tenant), key.into(), "secret".into(), None)
        .expect("room for the session")
}

fn live(sessions: &Sessions, ids: &[&String]) -> Vec<bool> {
    ids.iter().map(|id| sessions.find(id).is_some()).collect()
}

#[test]
fn a_session_is_found_by_its_id_only_and_ends_when_told() {
    let sessions = Sessions::default();
    let id = sessions
        .start(principal(), "kid".into(), "secret".into(), None)
        .expect("an empty store has room");
    let found = sessions.find(&id).expect("live session");
    assert_eq!(found.principal.tenant, "acme");
    assert!(found.csrf_matches(&found.csrf.clone()));
    assert!(!found.csrf_matches("forged"));
    assert!(sessions.find("another id").is_none());
    sessions.end(&id);
    assert!(sessions.find(&id).is_none());
}

#[test]
fn the_cookie_is_http_only_strict_and_secure_over_tls() {
    let c = cookie("abc", true);
    assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Secure"));
    assert!(!cookie("abc", false).contains("Secure"));
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::COOKIE,
        http::HeaderValue::from_static("a=b; claimd_console=xyz"),
    );
    assert_eq!(from_cookies(&headers).as_deref(), Some("xyz"));
}

#[test]
fn a_key_beyond_its_cap_ends_its_own_least_recently_used_session() {
    let sessions = small();
    let first = sign_in(&sessions, "acme", "a1");
    let second = sign_in(&sessions, "acme", "a1");
    let other = sign_in(&sessions, "acme", "a2");
    assert!(
        sessions.find(&first).is_some(),
        "first used again: second is the oldest"
    );
    let third = sign_in(&sessions, "acme", "a1");
    assert_eq!(
        live(&sessions, &[&first, &second, &third, &other]),
        [true, false, true, true]
    );
}

#[test]
fn a_tenant_beyond_its_cap_ends_its_own_least_recently_used_session_of_any_key() {
    let sessions = small();
    let theirs = sign_in(&sessions, "globex", "b1");
    let mine: Vec<String> = ["a1", "a2", "a3"]
        .iter()
        .map(|key| sign_in(&sessions, "acme", key))
        .collect();
    let next = sign_in(&sessions, "acme", "a4");
    assert_eq!(
        live(&sessions, &[&mine[0], &mine[1], &mine[2], &next, &theirs]),
        [false, true, true, true, true]
    );
}

#[test]
fn a_full_process_refuses_a_tenant_holding_no_session_and_ends_nothing() {
    let sessions = small();
    let acme: Vec<String> = ["a1", "a2", "a3"]
        .iter()
        .map(|key| sign_in(&sessions, "acme", key))
        .collect();
    let globex = [
        sign_in(&sessions, "globex", "b1"),
        sign_in(&sessions, "globex", "b2"),
    ];
    let refused = sessions.start(principal_of("initech"), "c1".into(), "s".into(), None);
    assert!(matches!(refused, Err(Full(5))), "{refused:?}");
    let all: Vec<&String> = acme.iter().chain(&globex).collect();
    assert_eq!(live(&sessions, &all), [true; 5]);
    // A tenant holding sessions makes room from its own least recently used.
    let more = sign_in(&sessions, "globex", "b3");
    assert_eq!(
        live(
            &sessions,
            &[&acme[0], &acme[1], &acme[2], &globex[0], &globex[1], &more]
        ),
        [true, true, true, false, true, true]
    );
}

#[test]
fn a_sign_in_with_its_keys_cookie_replaces_that_session_and_no_other() {
    let sessions = small();
    let old = sign_in(&sessions, "acme", "a1");
    let another_key = sign_in(&sessions, "acme", "a2");
    let another_tenant = sign_in(&sessions, "globex", "a1");
    for presented in [&old, &another_key, &another_tenant] {
        let new = sessions
            .start(principal(), "a1".into(), "secret".into(), Some(presented))
            .expect("room");
        assert_ne!(&new, presented, "a new id each sign-in");
        let ended = live(&sessions, &[&old, &another_key, &another_tenant]);
        assert_eq!(ended, [false, true, true], "after presenting {presented}");
        sessions.end(&new);
    }
}

#[test]
fn a_full_process_forgets_ended_sessions_before_refusing() {
    let caps = Caps {
        per_key: 2,
        per_tenant: 3,
        total: 2,
    };
    let mut held = Held::new(caps);
    let session = |tenant: &str, at: Instant| Session {
        principal: principal_of(tenant),
        key_id: "k".into(),
        key: "secret".into(),
        csrf: "t".into(),
        started: at,
        seen: at,
    };
    let then = Instant::now();
    for n in 0..2u8 {
        let put = held.insert([n; 32], session("acme", then), None, then);
        put.expect("room");
    }
    let later = then + IDLE + Duration::from_secs(1);
    let put = held.insert([9; 32], session("globex", later), None, later);
    put.expect("the ended sessions make room");
    assert_eq!(held.len(), 1);
    assert!(held.find(&[9; 32], later).is_some());
}
