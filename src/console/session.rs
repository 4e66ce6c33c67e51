//! Console sessions: signing in with an API key makes one, named by a random id in an
//! HttpOnly, SameSite=Strict cookie (Secure over TLS), with its own CSRF token. Kept in
//! this process's memory only (a restart or another replica means signing in again),
//! keyed by the SHA-256 of the id, each ending [`IDLE`] after its last request or
//! [`LIFETIME`] after sign-in. Every request checks the key again through the
//! authenticator's cache, so revoking a key ends its sessions within the key cache TTL.
//!
//! Sessions are a per-tenant resource (`held`): at most [`SESSIONS_PER_KEY`] per API key
//! and [`SESSIONS_PER_TENANT`] per tenant (beyond either, that key's or tenant's least
//! recently used ends), and [`MAX_SESSIONS`] in all, beyond which a sign-in ends its own
//! tenant's least recently used session or, if its tenant holds none, is refused: no
//! sign-in ends another tenant's session. A sign-in whose cookie names a session of the
//! same key replaces it (a new id; the old cookie ends).

mod held;

pub use held::Full;

use crate::auth::Principal;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use held::{Caps, Held};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "claimd_console";
/// Sessions one API key holds at once: a few browsers of the operator or team that uses
/// it; its next sign-in ends its least recently used session.
pub const SESSIONS_PER_KEY: usize = 8;
/// Sessions one tenant holds at once, over all its keys: eight keys at their cap; its next
/// sign-in ends the tenant's least recently used session.
pub const SESSIONS_PER_TENANT: usize = 64;
/// Sessions the process holds at once (under a KiB each): 64 tenants at their cap.
/// Full, a sign-in ends its tenant's least recently used session, or is refused.
pub const MAX_SESSIONS: usize = 4096;
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
    /// Whether the session has ended by `now`: idle too long, or signed in too long ago.
    fn ended(&self, now: Instant) -> bool {
        now.duration_since(self.seen) > IDLE || now.duration_since(self.started) > LIFETIME
    }

    /// Whether `token` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, token: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes()))
    }
}

/// The sessions of this process.
pub struct Sessions {
    held: Mutex<Held>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::with_caps(Caps {
            per_key: SESSIONS_PER_KEY,
            per_tenant: SESSIONS_PER_TENANT,
            total: MAX_SESSIONS,
        })
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
    /// No sessions yet, bounded by `caps`.
    fn with_caps(caps: Caps) -> Sessions {
        Sessions {
            held: Mutex::new(Held::new(caps)),
        }
    }

    /// A new session for `principal`'s key `key_id`; its id, for the cookie. `presented`
    /// is the session cookie the sign-in came with: a session of the same key it names is
    /// replaced. `Err` when the process is full of other tenants' sessions (none ended).
    pub fn start(
        &self,
        principal: Principal,
        key_id: String,
        key: String,
        presented: Option<&str>,
    ) -> Result<String, Full> {
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
        let replacing = presented.map(digest);
        self.lock()
            .insert(digest(&id), session, replacing.as_ref(), now)?;
        Ok(id)
    }

    /// The live session the cookie names, marked as seen now; an ended one is forgotten.
    pub fn find(&self, id: &str) -> Option<Session> {
        self.lock().find(&digest(id), Instant::now())
    }

    /// Ends the session the cookie names.
    pub fn end(&self, id: &str) {
        self.lock().remove(&digest(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // `Held` does not panic; if it did, at worst one session is kept or forgotten.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
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
mod tests;
