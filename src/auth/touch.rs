//! `last_used_at` off the request path: a successful authentication only adds its key's id
//! to a set in memory; a background task writes the set's keys in one `touch_keys` call every
//! `--key-touch-interval`, so a key is written at most once per interval per replica,
//! failures are never written, and no call waits on the write. Uses of the last interval
//! before a stop are written by one last flush at shutdown (`Application::run_until`).

use crate::store::Store;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The ids of the keys used since the last flush.
#[derive(Default)]
pub(super) struct Uses {
    ids: Mutex<HashSet<String>>,
}

impl Uses {
    /// Records a successful use of key `id`.
    pub fn record(&self, id: &str) {
        let mut ids = self.lock();
        if !ids.contains(id) {
            ids.insert(id.to_owned());
        }
    }

    /// Writes the recorded uses; on a store failure they are kept for the next flush.
    pub async fn flush(&self, store: &dyn Store) {
        let ids: Vec<String> = self.lock().drain().collect();
        if ids.is_empty() {
            return;
        }
        if let Err(error) = store.touch_keys(&ids).await {
            tracing::warn!(%error, keys = ids.len(), "cannot record API key use; will retry");
            self.lock().extend(ids);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // A panic while holding the set cannot leave it inconsistent: use it anyway.
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Flushes `uses` into `store` every `every`, until aborted.
pub(super) async fn flush_every(uses: Arc<Uses>, store: Arc<dyn Store>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        uses.flush(store.as_ref()).await;
    }
}
