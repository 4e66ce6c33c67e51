//! The gauges a small task refreshes: orphans by reason (one cheap count over the due-time
//! index, across tenants), the database pool's connections and, on PostgreSQL, the
//! notification queue as the listening connection last read it (and how many stale
//! listeners of other processes it terminated); it also runs the recorder's upkeep.
//!
//! The orphan count is one query over the partial `receipts_due_idx`, which holds only
//! unfinished rows: PostgreSQL answers it with an index scan however many finished receipts
//! there are; SQLite is told `INDEXED BY`, since the index leads with the tenant.

use super::exporter::{
    DB_POOL_CONNECTIONS, NOTIFY_LISTENERS_TERMINATED, NOTIFY_QUEUE_USAGE, ORPHANS,
};
use crate::store::Store;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::time::Duration;

/// Refreshes the gauges every `every`, for as long as the task runs.
pub async fn refresh(store: Arc<dyn Store>, handle: PrometheusHandle, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let counted =
            tokio::time::timeout(every.max(Duration::from_secs(1)), store.count_orphans());
        match counted.await {
            Ok(Ok(orphans)) => {
                metrics::gauge!(ORPHANS, "reason" => "LEASE_EXPIRED")
                    .set(orphans.lease_expired as f64);
                metrics::gauge!(ORPHANS, "reason" => "RETRY_DUE").set(orphans.retry_due as f64);
            }
            // Health reports a database that does not answer; the gauge keeps its value.
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot count orphans"),
            Err(_) => tracing::debug!("counting orphans timed out"),
        }
        let pool = store.pool_stats();
        metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set(f64::from(pool.in_use));
        metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(f64::from(pool.idle));
        if let Some(queue) = store.notify_queue() {
            if let Some(usage) = queue.usage {
                metrics::gauge!(NOTIFY_QUEUE_USAGE).set(usage);
            }
            metrics::counter!(NOTIFY_LISTENERS_TERMINATED).absolute(queue.listeners_terminated);
        }
        handle.run_upkeep();
    }
}
