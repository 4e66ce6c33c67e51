//! Authentication: API keys → the caller's [`Principal`] (tenant and allowed namespaces),
//! as a tower layer in front of every gRPC service on the main listener.
//!
//! A key looks like `claimd_<id>_<secret>`: the id (16 hex digits) is public and indexes the
//! stored row; only SHA-256 of the secret is stored. A lookup is a read: the stored hash is
//! compared here in constant time, and `last_used_at` is written later, off the request
//! path, at most once per `touch_interval` per key ([`touch`]). Answers are cached for
//! `cache_ttl` in two bounded LRU caches, successes apart from failures ([`cache`]), so a
//! revoked key stops working within that time and a flood of wrong keys evicts no valid one.
//! Failed authentications are limited per source — an IPv4 address, an IPv6 /64
//! ([`limit`]): over the limit, a source's failures are refused with
//! [`Refusal::TooManyFailures`], and a key that is not in the success cache is looked up
//! only if its id and secret match a stored key ([`known`], checked in memory against the
//! list of keys, read at most once a second), so a correct key is never refused because
//! others behind the same address failed, and wrong ones cost no store read each.
//! With no keys at all and `allow_without_keys` (loopback, or `--allow-unauthenticated`),
//! a call without credentials acts as tenant `default`; once any key has been created, every
//! call needs a valid one (revoking every key does not reopen anonymous access).
//!
//! grpc.health.v1.Health `Check` and `Watch` are served without credentials (they reveal
//! only the serving status), so probes and meshes that send none can reach the main
//! listener; reflection and ClaimService need a key. Refusals are [`Refusal`]s, mapped to
//! status codes in `api/error.rs`.

use crate::source::Source;
use crate::store::{Store, StoreError};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

mod cache;
mod key;
mod known;
mod layer;
mod limit;
mod local;
pub mod mesh;
mod touch;
use cache::{Answers, Cached, Known};
use key::hash_secret;
pub use key::{GeneratedKey, generate_key, parse_key};
pub(crate) use layer::peer_ip;
pub use layer::{AuthLayer, AuthService};
pub use local::WebProtocol;

/// Every key starts with this, so leaked keys are easy to find in code and logs scanners.
pub const KEY_PREFIX: &str = "claimd_";
/// The tenant of callers without credentials while no keys exist.
pub const DEFAULT_TENANT: &str = "default";

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
    /// This peer's address (its IPv6 /64) failed to authenticate too often
    /// (`--auth-failure-limit`), and the key is not a correct one.
    #[error("too many failed authentications from this address; retry later")]
    TooManyFailures,
    /// `x-forwarded-client-cert` or `l5d-client-id` from a peer not in `[mesh]`
    /// `trusted_proxies`.
    #[error(
        "mesh identity headers (x-forwarded-client-cert, l5d-client-id) are believed only \
         from [mesh] trusted_proxies"
    )]
    UntrustedIdentity,
    /// The mesh identity has no SPIFFE ID, or one not in `[mesh.spiffe]`.
    #[error("unknown mesh identity: map its SPIFFE ID in [mesh.spiffe] of --config")]
    UnknownIdentity,
    /// A call with an API key and a mesh identity of another tenant.
    #[error("the API key and the mesh identity act for different tenants")]
    IdentityMismatch,
    /// Protected mode: a call without credentials addressed to another host than this
    /// machine (a `Host` other than `localhost` or a loopback address: DNS rebinding).
    #[error(
        "no API key exists yet: a call without one is served only when addressed to \
         localhost or a loopback address (Host or :authority); create a key with `claimd \
         keys create`"
    )]
    NotLocalHost,
    /// Protected mode: a call without credentials from a browser page of an origin not
    /// in `--cors-allow-origin`.
    #[error(
        "no API key exists yet: a call without one from a browser page is served only for \
         the origins of --cors-allow-origin; create a key with `claimd keys create`"
    )]
    ForeignOrigin,
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

/// How the [`Authenticator`] caches, limits and records.
#[derive(Debug, Clone, Copy)]
pub struct AuthOptions {
    /// How long an answer is trusted (`--key-cache-ttl`).
    pub cache_ttl: Duration,
    /// Failed authentications per source (an IPv4 address, an IPv6 /64) per
    /// `failure_window`; 0: no limit (`--auth-failure-limit`).
    pub failure_limit: u32,
    /// Over how long `failure_limit` refills (`--auth-failure-window`).
    pub failure_window: Duration,
    /// How often `last_used_at` is written (`--key-touch-interval`).
    pub touch_interval: Duration,
}

/// Resolves credentials to principals, with caches, a failure limit per source and a
/// background record of use.
pub struct Authenticator {
    store: Arc<dyn Store>,
    allow_without_keys: bool,
    options: AuthOptions,
    answers: Answers,
    failures: limit::FailureLimit,
    known: known::KnownSecrets,
    uses: Arc<touch::Uses>,
    keys_exist: Mutex<Option<(Instant, bool)>>,
    identities: HashMap<String, crate::mesh::MeshIdentity>,
}

impl Authenticator {
    /// An authenticator over `store`'s keys.
    pub fn new(store: Arc<dyn Store>, allow_without_keys: bool, options: AuthOptions) -> Self {
        Authenticator {
            store,
            allow_without_keys,
            answers: Answers::new(options.cache_ttl),
            failures: limit::FailureLimit::new(options.failure_limit, options.failure_window),
            known: known::KnownSecrets::default(),
            uses: Arc::default(),
            options,
            keys_exist: Mutex::new(None),
            identities: HashMap::new(),
        }
    }

    /// Starts the task that writes `last_used_at` every `touch_interval`; abort it, then
    /// call [`Authenticator::flush_uses`] once, at shutdown.
    pub fn spawn_touch(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(touch::flush_every(
            self.uses.clone(),
            self.store.clone(),
            self.options.touch_interval,
        ))
    }

    /// Writes the uses recorded since the last flush now.
    pub async fn flush_uses(&self) {
        self.uses.flush(self.store.as_ref()).await;
    }

    /// Maps the mesh identities of `[mesh.spiffe]` (SPIFFE ID → tenant and namespaces).
    pub fn with_identities(
        mut self,
        identities: HashMap<String, crate::mesh::MeshIdentity>,
    ) -> Self {
        self.identities = identities;
        self
    }

    /// As [`Authenticator::authenticate`], with the mesh identity the call claims
    /// (`mesh::claimed_id`): without a key it acts for the identity's tenant; with one, the
    /// key's, refused if the identity is unknown or of another tenant. Every refusal counts
    /// against the failure limit of `peer`'s source.
    pub async fn authenticate_call(
        &self,
        header: Option<&[u8]>,
        identity: Option<Result<String, Refusal>>,
        peer: Option<IpAddr>,
    ) -> Result<Principal, AuthError> {
        let Some(identity) = identity else {
            return self.authenticate(header, peer).await;
        };
        let source = peer.map(Source::from);
        let answer = match identity.and_then(|id| self.identity(&id)) {
            Err(refusal) => Err(refusal.into()),
            Ok(mesh) => match header {
                None => Ok(mesh),
                Some(_) => self.check(header, source).await.and_then(|key| {
                    (key.tenant == mesh.tenant)
                        .then_some(key)
                        .ok_or(Refusal::IdentityMismatch.into())
                }),
            },
        };
        self.count(answer, source)
    }

    /// Whether `[mesh.spiffe]` maps `id`.
    pub fn knows_identity(&self, id: &str) -> bool {
        self.identities.contains_key(id)
    }

    /// The principal `[mesh.spiffe]` maps `id` to.
    fn identity(&self, id: &str) -> Result<Principal, Refusal> {
        let mapped = self.identities.get(id).ok_or(Refusal::UnknownIdentity)?;
        Ok(Principal {
            tenant: mapped.tenant.clone(),
            namespaces: (!mapped.namespaces.is_empty()).then(|| mapped.namespaces.clone()),
        })
    }

    /// `answer`, counted against `source`'s failure limit if it is a refusal.
    fn count(
        &self,
        answer: Result<Principal, AuthError>,
        source: Option<Source>,
    ) -> Result<Principal, AuthError> {
        if let (Err(AuthError::Refused(refusal)), Some(source)) = (&answer, source)
            && (!self.failures.fail(source) || *refusal == Refusal::TooManyFailures)
        {
            return Err(Refusal::TooManyFailures.into());
        }
        answer
    }

    /// The principal for an `authorization` header value (or its absence) from `peer`.
    /// Every refusal counts against the failure limit of `peer`'s source; over it, the
    /// refusal is [`Refusal::TooManyFailures`].
    pub async fn authenticate(
        &self,
        header: Option<&[u8]>,
        peer: Option<IpAddr>,
    ) -> Result<Principal, AuthError> {
        let source = peer.map(Source::from);
        let answer = self.check(header, source).await;
        // Recorded for a refusal made before any lookup too: that counts it as throttled.
        self.count(answer, source)
    }

    async fn check(
        &self,
        header: Option<&[u8]>,
        source: Option<Source>,
    ) -> Result<Principal, AuthError> {
        let arrived = tokio::time::Instant::now();
        let Some(header) = header else {
            if self.allow_without_keys && !self.any_keys().await? {
                return Ok(Principal::default_tenant());
            }
            return Err(Refusal::MissingCredentials.into());
        };
        let key = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or(Refusal::NotBearer)?
            .trim();
        let (id, secret) = parse_key(key).ok_or(Refusal::MalformedKey)?;
        let hash = hash_secret(secret);
        let digest: cache::KeyDigest = Sha256::digest(key.as_bytes()).into();
        match self.answers.get(&digest) {
            Cached::Good(known) => {
                self.uses.record(&known.id);
                return Ok(known.principal);
            }
            Cached::Bad(refusal) => return Err(refusal.into()),
            // Worked before: looked up again even from a throttled source.
            Cached::Stale => {}
            // From a throttled source, looked up only if it is a stored key's id and secret.
            Cached::Miss => {
                if source.is_some_and(|s| self.failures.exhausted(s))
                    && !self
                        .known
                        .matches(self.store.as_ref(), id, &hash, arrived)
                        .await?
                {
                    return Err(Refusal::TooManyFailures.into());
                }
            }
        }
        let answer = self.look_up(id, &hash).await?;
        self.answers.put(digest, &answer);
        let known = answer?;
        self.uses.record(&known.id);
        Ok(known.principal)
    }

    /// The answer for a well-formed key; the outer error is a store failure (not cached).
    async fn look_up(&self, id: &str, hash: &[u8]) -> Result<Result<Known, Refusal>, StoreError> {
        let Some(stored) = self.store.find_key(id).await? else {
            return Ok(Err(Refusal::UnknownKey));
        };
        if !bool::from(stored.secret_hash.ct_eq(hash)) {
            return Ok(Err(Refusal::UnknownKey));
        }
        if stored.revoked_at.is_some() {
            return Ok(Err(Refusal::RevokedKey));
        }
        Ok(Ok(Known {
            id: stored.id,
            principal: Principal {
                tenant: stored.tenant,
                namespaces: stored.namespaces,
            },
        }))
    }

    /// Whether a call without credentials would be served as tenant `default` now
    /// (protected mode: no key exists, and calls without one are allowed).
    pub(crate) async fn serves_anonymous(&self) -> Result<bool, StoreError> {
        Ok(self.allow_without_keys && !self.any_keys().await?)
    }

    async fn any_keys(&self) -> Result<bool, StoreError> {
        let cached = *self.keys_exist.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, exist)) = cached
            && at.elapsed() < self.options.cache_ttl
        {
            return Ok(exist);
        }
        let exist = self.store.keys_exist().await?;
        *self.keys_exist.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), exist));
        Ok(exist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
