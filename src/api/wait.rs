//! Claim with `wait` (docs/DESIGN.md §2.9): a Claim that would be answered IN_FLIGHT is
//! held until its receipt settles, its holder's lease runs out, or the wait ends, and is
//! then answered with what a fresh Claim decides at that moment. The call watches its
//! receipt in the store's [`Settles`](crate::store::settles::Settles) (woken after a
//! settling write commits, in this process or, on PostgreSQL, in any replica); it holds no
//! connection and spawns no task, so a cancelled call leaves nothing behind. At most
//! `--max-waiting-claims` wait at once; a drain answers them all at once. A call about to
//! park is counted against its tenant's `max_waiting` quota (`super::quota`), and refused
//! when the tenant has that many parked already.

use super::quota::{Parked, QuotaRefusal};
use crate::domain::{Action, ClaimInput, ClaimOutcome, Decision, Policy, Receipt, ReceiptKey};
use crate::drain::Drain;
use crate::store::{LeaseCall, Store, StoreError};
use crate::telemetry::waits::{Ended, Waiting, woke};
use chrono::TimeDelta;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use uuid::Uuid;

/// `--max-waiting-claims` unless set: a waiting Claim holds a stream and about a kilobyte,
/// no connection and no task.
pub const DEFAULT_MAX_WAITING_CLAIMS: u32 = 10_000;

/// The longest `wait` a Claim may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Kept back from the call's deadline for the read that answers it when the wait ends.
const FINAL_READ: Duration = Duration::from_millis(250);

/// The first pause when a lease's end came but the receipt still reads IN_FLIGHT with the
/// same lease (this process's estimate of the store's clock ran a little ahead).
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest such pause.
const LAST_PAUSE: Duration = Duration::from_secs(1);

/// How many times a Claim or Heartbeat whose write took most of its lease renews it.
const FRESH_LEASES: usize = 3;

/// Whether a lease of `ttl` set by a write that began at `began` still has more than a
/// quarter left: on this process's monotonic clock, which no commit wait skews (the
/// database's clock is read inside the statement, before its commit waited).
pub(super) fn fresh(began: Instant, ttl: Duration) -> bool {
    began.elapsed() < ttl * 3 / 4
}

/// A lease just granted or extended, as [`renewed`] renews it.
pub(super) struct Held<'a> {
    pub tenant: &'a str,
    pub id: &'a ReceiptKey,
    /// The holder's token.
    pub token: Uuid,
    /// The lease it asked for.
    pub lease_ttl: TimeDelta,
    /// The call that is answered.
    pub call: LeaseCall,
}

/// Renews the lease `token` was granted by a write that began at `began`, as long as that
/// write (or the last renewal) took more than three quarters of `lease_ttl`: a Heartbeat of
/// the same token, which writes a fresh lease for the same attempt, up to [`FRESH_LEASES`]
/// times, each measured from when its own write began. The receipt of the last renewal,
/// or `None` when the first write was quick enough. A renewal that fails (the deadline
/// came, the database went away, the receipt was taken over) or a last one as slow is
/// [`StoreError::LateLease`]: what the first write granted stands, with a lease that may
/// end before the answer arrives (docs/DESIGN.md §4.1).
pub(super) async fn renewed(
    store: &dyn Store,
    held: Held<'_>,
    policy: &Policy,
    began: Instant,
) -> Result<Option<Receipt>, StoreError> {
    let Held {
        tenant,
        id,
        token,
        lease_ttl,
        call,
    } = held;
    let ttl = lease_ttl.to_std().unwrap_or_default();
    let (mut began, mut last) = (began, None);
    for _ in 0..FRESH_LEASES {
        if fresh(began, ttl) {
            return Ok(last);
        }
        let renew = Action::Heartbeat {
            lease_ttl,
            checkpoint: None,
        };
        let again = Instant::now();
        match store.act(tenant, id, token, &renew, policy).await {
            Ok(receipt) => last = Some(receipt),
            Err(_) => return Err(StoreError::LateLease(call)),
        }
        began = again;
    }
    match fresh(began, ttl) {
        true => Ok(last),
        false => Err(StoreError::LateLease(call)),
    }
}

/// `store.claim`, making sure a CLAIMED answer carries at least a quarter of its lease when
/// it leaves claimd (docs/DESIGN.md §4.1): when the write took more than three quarters of
/// the lease (a commit that waited for a synchronous standby a new leader did not have yet,
/// issues 34 and 46; a batch behind another transaction's row lock), the same call renews
/// the lease it was granted before it answers ([`renewed`]); reading the row again would
/// only find the same short lease. A Claim whose lease may still end too soon is answered
/// UNAVAILABLE saying its attempt may have been granted: the caller retries and finds the
/// receipt IN_FLIGHT until that lease ends, then claims it. Never CLAIMED with a lease that
/// may be over.
async fn claim_live(
    store: &dyn Store,
    tenant: &str,
    input: &ClaimInput,
    policy: &Policy,
) -> Result<ClaimOutcome, StoreError> {
    let began = Instant::now();
    let mut outcome = store.claim(tenant, input, policy).await?;
    if let (Decision::Claimed, Some(token)) = (outcome.decision, outcome.token()) {
        let held = Held {
            tenant,
            id: &input.id,
            token,
            lease_ttl: input.lease_ttl,
            call: LeaseCall::Claim,
        };
        if let Some(receipt) = renewed(store, held, policy, began).await? {
            outcome.receipt = receipt;
        }
    }
    Ok(outcome)
}

/// Why a Claim (with or without `wait`) was not answered with a decision.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The store failed (or the call's deadline came).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The tenant already has its `max_waiting` Claims parked.
    #[error(transparent)]
    Quota(#[from] QuotaRefusal),
}

/// The waiting Claims of one service.
#[derive(Debug, Clone)]
pub struct Waits {
    room: Arc<Semaphore>,
    drain: Drain,
}

impl Waits {
    /// At most `max` waiting at once; all answered at once when `drain` starts.
    pub fn new(max: usize, drain: Drain) -> Waits {
        Waits {
            room: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
            drain,
        }
    }

    /// Claims for `input` and, when the answer is IN_FLIGHT, waits up to `wait` (already
    /// validated) for another. The receipt is watched before the first read, so a settle
    /// that commits right after it still wakes the call, and the first answer is not read
    /// twice. Before it first parks the call asks `park` for its tenant's room: a refusal
    /// is the answer (the IN_FLIGHT read wrote nothing).
    pub async fn claim(
        &self,
        store: &dyn Store,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
        wait: Option<Duration>,
        park: impl FnOnce() -> Result<Parked, QuotaRefusal>,
    ) -> Result<ClaimOutcome, ClaimError> {
        let Some(end) = wait.and_then(wait_end) else {
            return Ok(claim_live(store, tenant, input, policy).await?);
        };
        let mut park = Some(park);
        let mut _parked: Option<Parked> = None;
        let room = self.room.try_acquire().ok();
        if room.is_none() || self.drain.draining() {
            let first = claim_live(store, tenant, input, policy).await?;
            if first.decision == Decision::InFlight {
                let how = if room.is_none() {
                    Ended::Full
                } else {
                    Ended::Drained
                };
                how.count();
            }
            return Ok(first);
        }
        let watch = store.settles().watch(tenant, &input.id);
        let mut waiting: Option<Waiting> = None;
        let mut lease = None;
        let mut pause = FIRST_PAUSE;
        let mut unsure: Option<u32> = None;
        loop {
            let mut woken = pin!(watch.notified());
            // Enabled before the read, so a settle that commits after it still wakes us.
            woken.as_mut().enable();
            let before = lease;
            let last = match claim_live(store, tenant, input, policy).await {
                // A takeover of this call's that may have landed unseen (`unsure`): a later
                // attempt means it may have been taken over in turn, and the call can be
                // told neither that it was granted nor that it was not.
                Ok(outcome) if unsure.is_some_and(|n| outcome.receipt.attempt > n) => {
                    return Err(StoreError::Unsure(unsure).into());
                }
                Ok(outcome) => {
                    // Attempt `n` held by another token, or not reached: it was not this call's.
                    unsure = None;
                    outcome
                }
                // The database is briefly away (a connection just cut, say): once waiting,
                // read again while the wait lasts, and fail only if it is still away then.
                // A takeover that may have landed unseen (`Unsure`) is remembered, so a later
                // read past its attempt answers `Unsure`, not that later attempt with this
                // call's own granted to nobody (the lock-wait fault row with answers lost).
                Err(
                    e @ (StoreError::Unavailable(_)
                    | StoreError::Storage(_)
                    | StoreError::ReadOnly(_)
                    | StoreError::Unsure(_)),
                ) if waiting.is_some() && Instant::now() + pause < end => {
                    if let StoreError::Unsure(granted) = e {
                        unsure = granted.max(unsure);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LAST_PAUSE);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if last.decision != Decision::InFlight {
                if let Some(waiting) = &mut waiting {
                    waiting.end(match last.decision {
                        Decision::Claimed => Ended::Claimed,
                        _ => Ended::Settled,
                    });
                }
                return Ok(last);
            }
            if let Some(park) = park.take() {
                _parked = Some(park()?);
            }
            let waiting = waiting.get_or_insert_with(Waiting::start);
            let now = Instant::now();
            if now >= end {
                waiting.end(Ended::TimedOut);
                return Ok(last);
            }
            // Until the holder's lease ends, on the store's clock as far as this process
            // can tell; a little longer each time the end came and the lease did not.
            lease = last.receipt.lease_expires_at;
            let left = lease
                .map(|l| l - store.clock_estimate())
                .and_then(|d| d.to_std().ok())
                .unwrap_or_default();
            pause = if before.is_some() && lease == before && left.is_zero() {
                (pause * 2).min(LAST_PAUSE)
            } else {
                FIRST_PAUSE
            };
            let wake_at = (now + left.max(pause)).min(end);
            tokio::select! {
                _ = woken => woke("settled"),
                _ = tokio::time::sleep_until(wake_at) => {
                    if wake_at < end {
                        woke("lease_end");
                    }
                }
                _ = self.drain.started() => {
                    waiting.end(Ended::Drained);
                    return Ok(last);
                }
            }
        }
    }
}

/// When a wait of `wait` ends: the call's deadline, less the final read's time, if that
/// comes first; `None` when there is no time to wait.
fn wait_end(wait: Duration) -> Option<Instant> {
    let now = Instant::now();
    let mut end = now + wait;
    if let Some(due) = crate::deadline::due() {
        let left = due.saturating_duration_since(now);
        end = end.min(now + left.saturating_sub(FINAL_READ.min(left / 2)));
    }
    (end > now).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_wait_has_no_end_and_a_wait_without_a_deadline_ends_after_it() {
        assert_eq!(wait_end(Duration::ZERO), None);
        let end = wait_end(Duration::from_secs(2)).expect("a wait");
        let after = end.saturating_duration_since(Instant::now());
        assert!(after <= Duration::from_secs(2) && after > Duration::from_secs(1));
    }
}
