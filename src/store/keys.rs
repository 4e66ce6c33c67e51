//! The API-key half of the storage boundary: keys are stored as hashes and looked up by
//! their public id.

use crate::domain::Timestamp;
use crate::store::StoreError;
use async_trait::async_trait;

/// A key to store; the secret itself is never stored, only its hash.
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// The public id (the part of the key before the secret).
    pub id: String,
    /// The tenant every call with this key acts for.
    pub tenant: String,
    /// SHA-256 of the secret.
    pub secret_hash: Vec<u8>,
    /// A human note, e.g. which service holds it.
    pub label: Option<String>,
    /// The namespaces the key may use; `None`: all of the tenant's.
    pub namespaces: Option<Vec<String>>,
}

/// A stored key as `keys list` and authentication see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The public id.
    pub id: String,
    /// The tenant.
    pub tenant: String,
    /// SHA-256 of the secret.
    pub secret_hash: Vec<u8>,
    /// A human note.
    pub label: Option<String>,
    /// The namespaces the key may use; `None`: all.
    pub namespaces: Option<Vec<String>>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last successful authentication, as recorded by the background flush (at most once per
    /// `--key-touch-interval` per replica, so up to that much behind).
    pub last_used_at: Option<Timestamp>,
    /// When it was revoked.
    pub revoked_at: Option<Timestamp>,
}

/// Storage of API keys.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Stores a new key.
    async fn create_key(&self, key: &NewApiKey) -> Result<(), StoreError>;
    /// Every key, newest first.
    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError>;
    /// Revokes a key; `false` when no key has that id.
    async fn revoke_key(&self, id: &str) -> Result<bool, StoreError>;
    /// The key with this id, if any: a read only (authentication compares the secret's hash
    /// itself, and an unknown or wrong key must cost no write).
    async fn find_key(&self, id: &str) -> Result<Option<ApiKey>, StoreError>;
    /// Sets `last_used_at` to now on these keys (those not revoked): called by the
    /// authenticator's background flush, at most once per interval per key.
    async fn touch_keys(&self, ids: &[String]) -> Result<(), StoreError>;
    /// Whether any key was ever created, revoked or not: protected mode ends once one is,
    /// and revoking every key must not reopen anonymous access.
    async fn keys_exist(&self) -> Result<bool, StoreError>;
}

/// The stored form of a namespace list (namespaces cannot contain commas).
pub fn join_namespaces(namespaces: &Option<Vec<String>>) -> Option<String> {
    namespaces.as_ref().map(|n| n.join(","))
}

/// The namespace list from its stored form.
pub fn split_namespaces(stored: Option<String>) -> Option<Vec<String>> {
    stored.map(|s| {
        s.split(',')
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    })
}
