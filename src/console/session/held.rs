//! The sessions a console holds, counted by tenant and by key, and the caps that keep one
//! key or tenant from ending another's: a key at [`Caps::per_key`] makes room by ending its
//! own least recently used session, a tenant at [`Caps::per_tenant`] its own least recently
//! used (of any of its keys), and a process at [`Caps::total`] first forgets the sessions
//! that have already ended, then ends the signing-in tenant's least recently used session,
//! and if that tenant holds none, refuses the sign-in ([`Full`]) without ending anything.
//! No sign-in ever ends a session of another tenant.

use super::Session;
use lru::LruCache;
use std::collections::HashMap;
use std::time::Instant;

/// A session's name in the store: the SHA-256 of its id.
pub(super) type Digest = [u8; 32];

/// How many sessions may be held at once.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    /// By one API key.
    pub per_key: usize,
    /// By one tenant, over all its keys.
    pub per_tenant: usize,
    /// By the process, over all tenants.
    pub total: usize,
}

/// A sign-in refused: the process holds as many sessions as it may, all of other tenants'
/// (live ones: those already ended were forgotten first), and a sign-in never ends those.
#[derive(Debug, thiserror::Error)]
#[error("the console holds {0} sessions, all of other tenants")]
pub struct Full(pub usize);

/// One tenant's sessions: least recently used first out, and how many each key holds.
struct Tenant {
    order: LruCache<Digest, ()>,
    per_key: HashMap<String, usize>,
}

/// Every session of the process, by digest and by tenant.
pub(super) struct Held {
    caps: Caps,
    sessions: HashMap<Digest, Session>,
    tenants: HashMap<String, Tenant>,
}

impl Held {
    /// An empty store bounded by `caps`.
    pub(super) fn new(caps: Caps) -> Held {
        Held {
            caps,
            sessions: HashMap::new(),
            tenants: HashMap::new(),
        }
    }

    /// The live session named `digest`, marked as seen at `now`; an ended one is forgotten.
    pub(super) fn find(&mut self, digest: &Digest, now: Instant) -> Option<Session> {
        let session = self.sessions.get_mut(digest)?;
        if session.ended(now) {
            self.remove(digest);
            return None;
        }
        session.seen = now;
        if let Some(tenant) = self.tenants.get_mut(&session.principal.tenant) {
            tenant.order.promote(digest);
        }
        Some(session.clone())
    }

    /// Forgets the session named `digest`, if it is held.
    pub(super) fn remove(&mut self, digest: &Digest) -> Option<Session> {
        let session = self.sessions.remove(digest)?;
        let name = &session.principal.tenant;
        if let Some(tenant) = self.tenants.get_mut(name) {
            tenant.order.pop(digest);
            if let Some(count) = tenant.per_key.get_mut(&session.key_id) {
                *count -= 1;
                if *count == 0 {
                    tenant.per_key.remove(&session.key_id);
                }
            }
            if tenant.order.is_empty() {
                self.tenants.remove(name);
            }
        }
        Some(session)
    }

    /// Holds `session` as `digest`, replacing the session named `replacing` if that is one
    /// of the same key's, and making room within the caps (see the module's doc). `Err`
    /// only when no session was ended.
    pub(super) fn insert(
        &mut self,
        digest: Digest,
        session: Session,
        replacing: Option<&Digest>,
        now: Instant,
    ) -> Result<(), Full> {
        let (tenant, key) = (session.principal.tenant.clone(), session.key_id.clone());
        if let Some(old) = replacing {
            let same_key = self
                .sessions
                .get(old)
                .is_some_and(|s| s.principal.tenant == tenant && s.key_id == key);
            if same_key {
                self.remove(old);
            }
        }
        while self.count(&tenant, Some(&key)) >= self.caps.per_key
            && self.end_least_recent(&tenant, Some(&key))
        {}
        while self.count(&tenant, None) >= self.caps.per_tenant
            && self.end_least_recent(&tenant, None)
        {}
        if self.sessions.len() >= self.caps.total {
            self.forget_ended(now);
        }
        if self.sessions.len() >= self.caps.total {
            // Nothing was ended above: the tenant holds no session, so its key held none
            // and it replaced none.
            if self.count(&tenant, None) == 0 {
                return Err(Full(self.caps.total));
            }
            self.end_least_recent(&tenant, None);
        }
        let entry = self.tenants.entry(tenant).or_insert_with(|| Tenant {
            order: LruCache::unbounded(),
            per_key: HashMap::new(),
        });
        entry.order.put(digest, ());
        *entry.per_key.entry(key).or_default() += 1;
        self.sessions.insert(digest, session);
        Ok(())
    }

    /// How many sessions `tenant` holds (of `key` only, if given).
    fn count(&self, tenant: &str, key: Option<&str>) -> usize {
        let Some(held) = self.tenants.get(tenant) else {
            return 0;
        };
        match key {
            Some(key) => held.per_key.get(key).copied().unwrap_or(0),
            None => held.order.len(),
        }
    }

    /// Ends `tenant`'s least recently used session (of `key`, if given); whether it had one.
    fn end_least_recent(&mut self, tenant: &str, key: Option<&str>) -> bool {
        let Some(held) = self.tenants.get(tenant) else {
            return false;
        };
        let oldest = held
            .order
            .iter()
            .rev()
            .map(|(digest, ())| digest)
            .find(|digest| {
                key.is_none_or(|k| self.sessions.get(*digest).is_some_and(|s| s.key_id == k))
            })
            .copied();
        oldest.is_some_and(|digest| self.remove(&digest).is_some())
    }

    /// Forgets every session that has ended by `now`.
    fn forget_ended(&mut self, now: Instant) {
        let ended: Vec<Digest> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.ended(now))
            .map(|(digest, _)| *digest)
            .collect();
        for digest in ended {
            self.remove(&digest);
        }
    }

    /// How many sessions are held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.sessions.len()
    }
}
