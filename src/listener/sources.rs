//! [`PerSource`]: how many of something (open connections, TLS handshakes in progress) each
//! [`Source`] holds right now, under a limit. A source is in the map only while it holds at
//! least one, so the map never has more entries than there are connections. [`Handshakes`]:
//! the TLS handshakes in progress on a listener, limited in all and per source.

use super::Refused;
use crate::source::Source;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Counts per source, each at most `limit`.
#[derive(Debug)]
pub struct PerSource {
    limit: usize,
    held: Mutex<HashMap<Source, usize>>,
}

/// One unit held by a source; given back when dropped.
#[derive(Debug)]
pub struct SourceSlot {
    owner: Arc<PerSource>,
    source: Source,
}

impl PerSource {
    /// At most `limit` per source.
    pub fn new(limit: usize) -> Arc<PerSource> {
        Arc::new(PerSource {
            limit,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// One more for `source`, or `None` when it already holds `limit`.
    pub fn try_take(self: &Arc<Self>, source: Source) -> Option<SourceSlot> {
        let mut held = self.lock();
        if held.get(&source).copied().unwrap_or(0) >= self.limit {
            return None;
        }
        *held.entry(source).or_insert(0) += 1;
        Some(SourceSlot {
            owner: self.clone(),
            source,
        })
    }

    /// How many `source` holds now.
    #[cfg(test)]
    fn held(&self, source: Source) -> usize {
        self.lock().get(&source).copied().unwrap_or(0)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Source, usize>> {
        // A panic while holding the map cannot leave a count half-changed: use it anyway.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut held = self.owner.lock();
        if let Some(count) = held.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.source);
            }
        }
    }
}

/// The TLS handshakes in progress on one listener: at most `all` at once, and at most
/// `per_source` of them from one source.
#[derive(Debug, Clone)]
pub struct Handshakes {
    all: Arc<Semaphore>,
    per_source: Arc<PerSource>,
}

/// A handshake in progress; the slot is given back when it is dropped (the handshake done,
/// failed or timed out).
#[derive(Debug)]
pub struct HandshakeSlot {
    _all: OwnedSemaphorePermit,
    _source: SourceSlot,
}

impl Handshakes {
    /// At most `all` handshakes at once, `per_source` of them from one source.
    pub fn new(all: usize, per_source: usize) -> Handshakes {
        Handshakes {
            all: Arc::new(Semaphore::new(all)),
            per_source: PerSource::new(per_source),
        }
    }

    /// A slot for a handshake from `source`, or which limit refuses it.
    pub fn try_start(&self, source: Source) -> Result<HandshakeSlot, Refused> {
        let from_source = self
            .per_source
            .try_take(source)
            .ok_or(Refused::TlsHandshakesPerSource)?;
        let all = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::TlsHandshakes)?;
        Ok(HandshakeSlot {
            _all: all,
            _source: from_source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_holds_at_most_the_limit_and_is_forgotten_once_it_holds_none() {
        let limits = PerSource::new(2);
        let a = Source::from(std::net::IpAddr::from([10, 0, 0, 1]));
        let b = Source::from(std::net::IpAddr::from([10, 0, 0, 2]));
        let first = limits.try_take(a).unwrap();
        let second = limits.try_take(a).unwrap();
        assert!(limits.try_take(a).is_none());
        assert!(limits.try_take(b).is_some());
        drop(first);
        let third = limits.try_take(a).unwrap();
        drop((second, third));
        assert_eq!(limits.held(a), 0);
        assert!(limits.lock().is_empty());
    }
}
