//! Who waits for which receipt to settle, and the wake-ups (docs/DESIGN.md §2.9). A Claim
//! with `wait` that would be answered IN_FLIGHT watches its receipt here; the store wakes
//! the watchers of a receipt once a write that takes it out of PROCESSING has committed
//! (`rounds`), and on PostgreSQL the other replicas' settling writes arrive through one
//! `LISTEN` connection per process (`postgres::listen`). A wake-up carries no decision: the
//! woken call claims again and answers what that fresh Claim decides.
//!
//! Receipts are known here by their [`Mark`], a digest that names no tenant, namespace or
//! key, so a notification on the database's channel gives nothing away; two receipts with
//! the same mark only wake each other's watchers to read again.

use crate::domain::ReceiptKey;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;

/// A receipt's identity in wake-ups: the first 8 bytes of the SHA-256 of its tenant,
/// namespace and key (each length-prefixed), the same in every claimd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mark(u64);

impl Mark {
    /// The mark of `tenant`'s receipt `id`.
    pub fn of(tenant: &str, id: &ReceiptKey) -> Mark {
        let mut h = Sha256::new();
        for part in [tenant, &id.namespace, &id.key] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        let digest = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        Mark(u64::from_be_bytes(first))
    }

    /// Sixteen lower-case hex digits, as notifications carry it.
    pub fn to_hex(self) -> String {
        format!("{:016x}", self.0)
    }

    /// A mark written by [`Mark::to_hex`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Mark> {
        let ok = text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| u64::from_str_radix(text, 16).ok().map(Mark))
            .flatten()
    }
}

/// One watched receipt: its wake-up and how many calls watch it.
#[derive(Debug)]
struct Slot {
    notify: Arc<Notify>,
    watchers: usize,
}

/// The watched receipts of one process, shared by its store and its service.
#[derive(Debug, Default)]
pub struct Settles {
    slots: Mutex<HashMap<Mark, Slot>>,
}

impl Settles {
    /// An empty registry.
    pub fn new() -> Arc<Settles> {
        Arc::new(Settles::default())
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<Mark, Slot>> {
        // A panic while the lock was held left the map consistent (no step of ours can
        // stop half-way), so a poisoned lock is used as it is.
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts watching `tenant`'s receipt `id` until the returned [`Watch`] is dropped.
    pub fn watch(self: &Arc<Self>, tenant: &str, id: &ReceiptKey) -> Watch {
        let mark = Mark::of(tenant, id);
        let mut slots = self.slots();
        let slot = slots.entry(mark).or_insert_with(|| Slot {
            notify: Arc::new(Notify::new()),
            watchers: 0,
        });
        slot.watchers += 1;
        Watch {
            settles: Arc::clone(self),
            mark,
            notify: Arc::clone(&slot.notify),
        }
    }

    /// Wakes the watchers of the receipt `mark` names (a write settled it).
    pub fn settled(&self, mark: Mark) {
        if let Some(slot) = self.slots().get(&mark) {
            slot.notify.notify_waiters();
        }
    }

    /// Wakes every watcher: notifications may have been lost (the listening connection
    /// was down), so each reads its receipt again.
    pub fn wake_all(&self) {
        for slot in self.slots().values() {
            slot.notify.notify_waiters();
        }
    }

    /// How many receipts are watched right now.
    pub fn watched(&self) -> usize {
        self.slots().len()
    }
}

/// One call's watch on one receipt; dropping it (however the call ends, cancelled too)
/// forgets the receipt once nobody else watches it.
#[derive(Debug)]
pub struct Watch {
    settles: Arc<Settles>,
    mark: Mark,
    notify: Arc<Notify>,
}

impl Watch {
    /// A wake-up to wait for. Call `enable()` on it (pinned) before reading the receipt,
    /// so a settle that commits between the read and the wait still wakes it.
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut slots = self.settles.slots();
        if let Some(slot) = slots.get_mut(&self.mark) {
            slot.watchers -= 1;
            if slot.watchers == 0 {
                slots.remove(&self.mark);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::time::Duration;

    fn id(key: &str) -> ReceiptKey {
        ReceiptKey {
            namespace: "ns".into(),
            key: key.into(),
        }
    }

    #[test]
    fn a_mark_round_trips_through_hex_and_differs_by_tenant_namespace_and_key() {
        let m = Mark::of("t", &id("k"));
        assert_eq!(Mark::parse(&m.to_hex()), Some(m));
        assert_ne!(m, Mark::of("u", &id("k")));
        assert_ne!(m, Mark::of("t", &id("l")));
        // Length prefixes: moving a byte from one part to the next gives another mark.
        assert_ne!(Mark::of("ab", &id("c")), Mark::of("a", &id("bc")));
        assert_eq!(Mark::parse("not a mark"), None);
        assert_eq!(Mark::parse("+123456789abcdef"), None);
    }

    #[tokio::test]
    async fn a_settle_wakes_only_the_watchers_of_its_receipt_and_dropped_watches_are_forgotten() {
        let settles = Settles::new();
        let a = settles.watch("t", &id("a"));
        let a2 = settles.watch("t", &id("a"));
        let b = settles.watch("t", &id("b"));
        assert_eq!(settles.watched(), 2);
        {
            let mut wake_a = pin!(a.notified());
            wake_a.as_mut().enable();
            let mut wake_b = pin!(b.notified());
            wake_b.as_mut().enable();
            settles.settled(Mark::of("t", &id("a")));
            tokio::time::timeout(Duration::from_secs(5), wake_a)
                .await
                .expect("a's watcher is woken");
            let b_woken = tokio::time::timeout(Duration::from_millis(50), wake_b.as_mut()).await;
            assert!(b_woken.is_err(), "b's watcher sleeps on");
            settles.wake_all();
            tokio::time::timeout(Duration::from_secs(5), wake_b)
                .await
                .expect("wake_all wakes b");
        }
        drop(a);
        assert_eq!(settles.watched(), 2, "a is still watched by a2");
        drop(a2);
        drop(b);
        assert_eq!(settles.watched(), 0);
    }
}
