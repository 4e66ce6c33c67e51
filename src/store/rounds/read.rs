//! A round's read: the rows of the jobs that need one, in one statement, each row once
//! however many jobs of the batch are on it (the duplicates of a hot key share one read).

use super::{Job, Known, known};
use crate::domain::ReceiptKey;
use crate::store::StoreError;
use crate::store::driver::Driver;
use crate::store::recent::Recent;
use std::collections::HashMap;
use tracing::Instrument;

/// Reads the rows of the jobs that need a read, each row once however many jobs are on it
/// (the duplicates of a hot key share one), and opens them; `Err` when the statement
/// failed, with the jobs as they were.
pub(super) async fn read<D: Driver>(
    driver: &D,
    recent: &Recent,
    mut jobs: Vec<Job>,
) -> Result<Vec<Job>, (Vec<Job>, StoreError)> {
    let mut rows_of: HashMap<(&str, &ReceiptKey), usize> = HashMap::new();
    let mut keys: Vec<(&str, &ReceiptKey)> = Vec::new();
    let mut slot = Vec::with_capacity(jobs.len());
    for job in jobs.iter().filter(|j| matches!(j.known, Known::Unread)) {
        let key = (job.tenant.as_str(), &job.id);
        slot.push(*rows_of.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        }));
    }
    let read = crate::spans::statement("db.read");
    crate::spans::database(&read, driver.system(), "read", keys.len());
    let rows = match driver.read_many(&keys).instrument(read).await {
        Ok(rows) if rows.len() == keys.len() => rows,
        Ok(_) => {
            let e = StoreError::Corrupt("a read answered for other rows".into());
            return Err((jobs, e));
        }
        Err(e) => return Err((jobs, e)),
    };
    let sealer = driver.sealer();
    let mut slot = slot.into_iter();
    let mut kept = Vec::with_capacity(jobs.len());
    for mut job in jobs.drain(..) {
        if !matches!(job.known, Known::Unread) {
            kept.push(job);
            continue;
        }
        let Some((now, row)) = slot.next().map(|i| rows[i].clone()) else {
            break;
        };
        recent.saw(&job.tenant, &job.id, row.is_some());
        match known(sealer, &job, now, row) {
            Ok(k) => {
                job.known = k;
                kept.push(job);
            }
            Err(e) => job.answer(Err(e)),
        }
    }
    Ok(kept)
}
