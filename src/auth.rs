//! Authentication: API keys → the caller's [`Principal`] (tenant and allowed namespaces),
//! as a tower layer in front of every gRPC service on the main listener.
//!
//! A key looks like `claimd_<id>_<secret>`: the id (16 hex digits) is public and indexes the
//! stored row; only SHA-256 of the secret is stored. Lookups are cached for `cache_ttl`
//! (positive and negative answers alike), so a revoked key stops working within that time.
//! With no keys at all and `allow_without_keys` (loopback, or `--allow-unauthenticated`),
//! a call without credentials acts as tenant `default`; once any key has been created, every
//! call needs a valid one (revoking every key does not reopen anonymous access).
//!
//! grpc.health.v1.Health `Check` and `Watch` are served without credentials (they reveal
//! only the serving status), so probes and meshes that send none can reach the main
//! listener; reflection and ClaimService need a key. Refusals are [`Refusal`]s, mapped to
//! status codes in `api/error.rs`.

use crate::store::{Store, StoreError};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

mod layer;
pub use layer::{AuthLayer, AuthService};

/// Every key starts with this, so leaked keys are easy to find in code and logs scanners.
pub const KEY_PREFIX: &str = "claimd_";
/// The tenant of callers without credentials while no keys exist.
pub const DEFAULT_TENANT: &str = "default";
/// Cached lookups beyond this many are dropped all at once (bounded memory).
const MAX_CACHED: usize = 10_000;

/// Why a call's credentials, or its key's use of a namespace, were refused. Messages never
/// carry the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `authorization` metadata.
    #[error("missing credentials: send the metadata `authorization: Bearer <API key>`")]
    MissingCredentials,
    /// `authorization` is not `Bearer <API key>`.
    #[error("authorization must be `Bearer <API key>`")]
    NotBearer,
    /// The key is not `claimd_<id>_<secret>`.
    #[error("the API key is malformed")]
    MalformedKey,
    /// No key with that id and secret.
    #[error("unknown API key")]
    UnknownKey,
    /// The key was revoked.
    #[error("this API key was revoked")]
    RevokedKey,
    /// The key is limited to other namespaces.
    #[error("this API key may not use namespace {0}")]
    NamespaceDenied(String),
    /// The key is limited to some namespaces and the call named none.
    #[error("this API key is limited to some namespaces: name one")]
    NamespaceRequired,
    /// The call did not pass through the authentication layer.
    #[error("no credentials")]
    NoPrincipal,
}

/// Why authentication failed: a refusal, or the key store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The credentials were refused.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The keys could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant every query is scoped by.
    pub tenant: String,
    /// The namespaces the key may use; `None`: all of the tenant's.
    pub namespaces: Option<Vec<String>>,
}

impl Principal {
    /// The caller without credentials in protected mode.
    pub fn default_tenant() -> Principal {
        Principal {
            tenant: DEFAULT_TENANT.to_owned(),
            namespaces: None,
        }
    }

    /// Refused unless the key may use `namespace` (`None`: every namespace).
    pub fn check(&self, namespace: Option<&str>) -> Result<(), Refusal> {
        match (&self.namespaces, namespace) {
            (None, _) => Ok(()),
            (Some(allowed), Some(ns)) if allowed.iter().any(|a| a == ns) => Ok(()),
            (Some(_), Some(ns)) => Err(Refusal::NamespaceDenied(ns.to_owned())),
            (Some(_), None) => Err(Refusal::NamespaceRequired),
        }
    }
}

/// A freshly generated key: the whole key is shown once, only the hash is stored.
#[derive(Debug, Clone)]
pub struct GeneratedKey {
    /// The public id.
    pub id: String,
    /// The key to hand to the caller: `claimd_<id>_<secret>`.
    pub key: String,
    /// SHA-256 of the secret.
    pub secret_hash: Vec<u8>,
}

/// Generates a key with 256 bits of secret from the operating system's CSPRNG.
pub fn generate_key() -> GeneratedKey {
    let id: [u8; 8] = rand::random();
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let secret: [u8; 32] = rand::random();
    let secret = URL_SAFE_NO_PAD.encode(secret);
    GeneratedKey {
        key: format!("{KEY_PREFIX}{id}_{secret}"),
        secret_hash: hash_secret(&secret),
        id,
    }
}

/// Splits a presented key into its id and secret.
pub fn parse_key(key: &str) -> Option<(&str, &str)> {
    let (id, secret) = key.strip_prefix(KEY_PREFIX)?.split_once('_')?;
    let id_ok = id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (id_ok && !secret.is_empty()).then_some((id, secret))
}

fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

type Cached = (Instant, Result<Principal, Refusal>);

/// Resolves credentials to principals, with a short-lived cache.
pub struct Authenticator {
    store: Arc<dyn Store>,
    allow_without_keys: bool,
    ttl: Duration,
    keys: Mutex<HashMap<Vec<u8>, Cached>>,
    keys_exist: Mutex<Option<(Instant, bool)>>,
}

impl Authenticator {
    /// An authenticator over `store`'s keys.
    pub fn new(store: Arc<dyn Store>, allow_without_keys: bool, ttl: Duration) -> Self {
        Authenticator {
            store,
            allow_without_keys,
            ttl,
            keys: Mutex::new(HashMap::new()),
            keys_exist: Mutex::new(None),
        }
    }

    /// The principal for an `authorization` header value (or its absence).
    pub async fn authenticate(&self, header: Option<&[u8]>) -> Result<Principal, AuthError> {
        let Some(header) = header else {
            if self.allow_without_keys && !self.any_keys().await? {
                return Ok(Principal::default_tenant());
            }
            return Err(Refusal::MissingCredentials.into());
        };
        let key = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or(Refusal::NotBearer)?;
        let (id, secret) = parse_key(key.trim()).ok_or(Refusal::MalformedKey)?;
        let hash = hash_secret(secret);
        let cache_key: Vec<u8> = Sha256::digest(key.trim().as_bytes()).to_vec();
        if let Some((at, answer)) = self.lock_keys().get(&cache_key)
            && at.elapsed() < self.ttl
        {
            return Ok(answer.clone()?);
        }
        let answer = self.look_up(id, &hash).await?;
        let mut cache = self.lock_keys();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(cache_key, (Instant::now(), answer.clone()));
        Ok(answer?)
    }

    /// The answer for a well-formed key; the outer error is a store failure (not cached).
    async fn look_up(
        &self,
        id: &str,
        hash: &[u8],
    ) -> Result<Result<Principal, Refusal>, StoreError> {
        let Some(stored) = self.store.use_key(id, hash).await? else {
            return Ok(Err(Refusal::UnknownKey));
        };
        if !bool::from(stored.secret_hash.ct_eq(hash)) {
            return Ok(Err(Refusal::UnknownKey));
        }
        if stored.revoked_at.is_some() {
            return Ok(Err(Refusal::RevokedKey));
        }
        Ok(Ok(Principal {
            tenant: stored.tenant,
            namespaces: stored.namespaces,
        }))
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        let cached = *self.keys_exist.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, exist)) = cached
            && at.elapsed() < self.ttl
        {
            return Ok(exist);
        }
        let exist = self.store.keys_exist().await?;
        *self.keys_exist.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), exist));
        Ok(exist)
    }

    fn lock_keys(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Cached>> {
        // A panic while holding the cache cannot leave it inconsistent: use it anyway.
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_back_to_their_id_and_hash() {
        let generated = generate_key();
        assert!(generated.key.starts_with(KEY_PREFIX));
        let (id, secret) = parse_key(&generated.key).unwrap();
        assert_eq!(id, generated.id);
        assert_eq!(hash_secret(secret), generated.secret_hash);
        assert_ne!(generate_key().key, generated.key);
    }

    #[test]
    fn malformed_keys_do_not_parse() {
        for bad in [
            "",
            "claimd_",
            "claimd_abc_def",
            "other_0123456789abcdef_x",
            "claimd_0123456789abcdef_",
        ] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_restricted_principal_is_denied_other_namespaces() {
        let p = Principal {
            tenant: "acme".into(),
            namespaces: Some(vec!["a".into()]),
        };
        assert!(p.check(Some("a")).is_ok());
        assert_eq!(
            p.check(Some("b")),
            Err(Refusal::NamespaceDenied("b".into()))
        );
        assert_eq!(p.check(None), Err(Refusal::NamespaceRequired));
        assert!(Principal::default_tenant().check(None).is_ok());
    }
}
