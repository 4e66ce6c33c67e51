//! Console sessions: signing in with an API key makes one, named by a random id in an
//! HttpOnly, SameSite=Strict cookie (Secure over TLS), with its own CSRF token. Kept in
//! this process's memory only (a restart or another replica means signing in again),
//! keyed by the SHA-256 of the id, at most [`MAX_SESSIONS`] (the least recently used goes
//! first), each ending [`IDLE`] after its last request or [`LIFETIME`] after sign-in. Every
//! request checks the key again through the authenticator's cache, so revoking a key ends
//! its sessions within the key cache TTL.

use crate::auth::Principal;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use lru::LruCache;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "claimd_console";
/// Sessions kept at once.
pub const MAX_SESSIONS: usize = 1024;
/// A session ends this long after its last request.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A session ends this long after sign-in, however busy.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// A signed-in operator.
#[derive(Clone)]
pub struct Session {
    /// Who the key acts for.
    pub principal: Principal,
    /// The key's id (not secret): who did what, in the logs.
    pub key_id: String,
    /// The API key, to check it again on each request (never logged or rendered).
    pub key: String,
    /// The token every form of this session carries.
    pub csrf: String,
    started: Instant,
    seen: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Whether `token` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, token: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes()))
    }
}

/// The sessions of this process.
pub struct Sessions {
    by_digest: Mutex<LruCache<[u8; 32], Session>>,
}

impl Default for Sessions {
    fn default() -> Self {
        // MAX_SESSIONS is a non-zero constant.
        let cap = NonZeroUsize::new(MAX_SESSIONS).expect("non-zero");
        Sessions {
            by_digest: Mutex::new(LruCache::new(cap)),
        }
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// A new session for `principal`; its id, for the cookie.
    pub fn start(&self, principal: Principal, key_id: String, key: String) -> String {
        let id = random_token();
        let now = Instant::now();
        let session = Session {
            principal,
            key_id,
            key,
            csrf: random_token(),
            started: now,
            seen: now,
        };
        self.lock().put(digest(&id), session);
        id
    }

    /// The live session the cookie names, marked as seen now; an ended one is forgotten.
    pub fn find(&self, id: &str) -> Option<Session> {
        let key = digest(id);
        let mut sessions = self.lock();
        let now = Instant::now();
        let session = sessions.get_mut(&key)?;
        if now.duration_since(session.seen) > IDLE || now.duration_since(session.started) > LIFETIME
        {
            sessions.pop(&key);
            return None;
        }
        session.seen = now;
        Some(session.clone())
    }

    /// Ends the session the cookie names.
    pub fn end(&self, id: &str) {
        self.lock().pop(&digest(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<[u8; 32], Session>> {
        // A panic while holding the map leaves no session half-written: use it anyway.
        self.by_digest.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `Set-Cookie` value that names session `id`.
pub fn cookie(id: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    let max_age = LIFETIME.as_secs();
    format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn expired_cookie(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
}

/// The session id in a request's `Cookie` headers, if any.
pub fn from_cookies(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal() -> Principal {
        Principal {
            tenant: "acme".into(),
            namespaces: None,
        }
    }

    #[test]
    fn a_session_is_found_by_its_id_only_and_ends_when_told() {
        let sessions = Sessions::default();
        let id = sessions.start(principal(), "kid".into(), "secret".into());
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
}
