//! The `mixed` workload: events as a webhook platform delivers them. Each caller draws its
//! events from a seeded generator (the same sequence on both sides): every event is
//! delivered 1–4 times; with probability 1/2 the second delivery arrives while the first
//! is still being worked on; 10 % of first deliveries fail into Retry (retry_after 1 s, the
//! shortest claimd accepts) and are delivered again once the retry is due, by the same
//! caller, between its new events. A cycle is one delivery: its Claim plus the Complete or
//! Retry it leads to. Every answer must be the one the contract gives at that point:
//!
//! - first delivery: CLAIMED, attempt 1;
//! - a duplicate while the holder works: IN_FLIGHT;
//! - a duplicate after Complete: COMPLETED with the stored response;
//! - a duplicate after Retry: RETRY_SCHEDULED while the retry is surely not due (the answer
//!   came back within 1 s of sending the Retry), CLAIMED with attempt 2 once it surely is
//!   (sent more than 1 s + margin after the Retry returned), either in between;
//! - the delivery after the retry is due: CLAIMED, attempt 2, then Complete.
//!
//! Retries still owed when the round ends are delivered after it ([`drain`]), checked but
//! not timed. In a soak, every delivery first waits for its slot of the plan's [`Pacer`]
//! (outside the latency it records) and every record is copied into the plan's tap.

use crate::runner::{Pacer, Pending, Recorder, pace};
use crate::side::{ClaimMode, Decision, Side};
use crate::workload::{MARGIN, Plan, SHORT_LEASE, WORK_LEASE, check, fingerprint, response_for};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Share of first deliveries that fail into Retry.
const FAIL_RATE: f64 = 0.1;
/// Share of multiply delivered events whose second delivery comes while the first works.
const EARLY_DUPLICATE_RATE: f64 = 0.5;

/// One caller's events until `deadline`.
pub async fn caller(side: Side, plan: Plan, caller: usize, deadline: Instant) -> Recorder {
    let stream = (caller as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = StdRng::seed_from_u64(plan.seed ^ stream);
    let mut rec = Recorder::tapped(plan.tap.clone());
    let pacer = plan.pace.as_deref();
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut n = 0u64;
    while Instant::now() < deadline {
        if pending.front().is_some_and(|p| p.due <= Instant::now()) {
            if let Some(p) = pending.pop_front() {
                pace(pacer).await;
                redeliver(&side, caller, &p, &mut rec).await;
            }
            continue;
        }
        let key = format!("{}-{caller}-{n}", plan.prefix);
        n += 1;
        let deliveries: u32 = rng.random_range(1..=4);
        let fails = rng.random_bool(FAIL_RATE);
        let early = deliveries >= 2 && rng.random_bool(EARLY_DUPLICATE_RATE);
        let event = Event {
            side: &side,
            caller,
            key: &key,
            pacer,
        };
        if let Err(e) = event
            .run(deliveries, fails, early, &mut rec, &mut pending)
            .await
        {
            rec.error(e);
        }
    }
    rec.pending = pending.into();
    rec
}

/// Delivers every retry the callers still owe once it is due; checked, not timed. The
/// returned record's cycles are not part of the round.
pub async fn drain(side: &Side, recorders: &mut [Recorder]) -> Recorder {
    let tasks: Vec<_> = recorders
        .iter_mut()
        .enumerate()
        .map(|(caller, r)| {
            let (side, pending) = (side.clone(), std::mem::take(&mut r.pending));
            tokio::spawn(async move {
                let mut tail = Recorder::default();
                for p in pending {
                    tokio::time::sleep_until(p.due.into()).await;
                    redeliver(&side, caller, &p, &mut tail).await;
                }
                tail
            })
        })
        .collect();
    let mut tail = Recorder::default();
    for task in tasks {
        match task.await {
            Ok(r) => {
                tail.errors += r.errors;
                tail.first_errors.extend(r.first_errors);
            }
            Err(e) => tail.error(format!("a drain task failed: {e}")),
        }
    }
    tail
}

/// The delivery of `p` once it is due: CLAIMED with attempt 2, then Complete.
async fn redeliver(side: &Side, caller: usize, p: &Pending, rec: &mut Recorder) {
    let started = Instant::now();
    let fp = fingerprint(&p.key);
    let result = async {
        let answer = side
            .claim(caller, &p.key, &fp, WORK_LEASE, ClaimMode::Takeover)
            .await?;
        check(&answer, &p.key, Decision::Claimed, 2)?;
        side.complete(caller, &p.key, &answer.token, &response_for(&p.key))
            .await
    };
    match result.await {
        Ok(()) => rec.ok(started.elapsed()),
        Err(e) => rec.error(format!("{e} (retry delivered when due)")),
    }
}

/// One event being delivered by one caller.
struct Event<'a> {
    side: &'a Side,
    caller: usize,
    key: &'a str,
    pacer: Option<&'a Pacer>,
}

impl Event<'_> {
    /// Claim of this event (once its slot has come, in a soak), timed from its sending.
    async fn claim(&self) -> Result<(crate::side::Answer, Duration), String> {
        pace(self.pacer).await;
        let started = Instant::now();
        let fp = fingerprint(self.key);
        let answer = self
            .side
            .claim(self.caller, self.key, &fp, WORK_LEASE, ClaimMode::Takeover)
            .await?;
        Ok((answer, started.elapsed()))
    }

    /// All deliveries of the event but the one after a retry (queued in `pending`).
    async fn run(
        &self,
        deliveries: u32,
        fails: bool,
        early: bool,
        rec: &mut Recorder,
        pending: &mut VecDeque<Pending>,
    ) -> Result<(), String> {
        let (first, mut took) = self.claim().await?;
        check(&first, self.key, Decision::Claimed, 1)?;
        let mut left = deliveries - 1;
        if early {
            let (dup, dup_took) = self.claim().await?;
            check(&dup, self.key, Decision::InFlight, 1)?;
            rec.ok(dup_took);
            left -= 1;
        }
        let started = Instant::now();
        if !fails {
            let response = response_for(self.key);
            let done = self
                .side
                .complete(self.caller, self.key, &first.token, &response);
            done.await?;
            took += started.elapsed();
            rec.ok(took);
            for _ in 0..left {
                let (dup, dup_took) = self.claim().await?;
                check(&dup, self.key, Decision::Completed, 1)?;
                rec.ok(dup_took);
            }
            return Ok(());
        }
        self.side
            .retry(self.caller, self.key, &first.token, SHORT_LEASE)
            .await?;
        let returned = Instant::now();
        rec.ok(took + (returned - started));
        let p = Pending {
            key: self.key.to_owned(),
            not_before: started + SHORT_LEASE,
            due: returned + SHORT_LEASE + MARGIN,
        };
        for _ in 0..left {
            let (dup, dup_took) = self.claim().await?;
            let received = Instant::now();
            let sent = received - dup_took;
            match dup.decision {
                Decision::RetryScheduled if sent < p.due => rec.ok(dup_took),
                Decision::Claimed if received >= p.not_before => {
                    // The retry fell due on the way: this delivery took the event over.
                    check(&dup, self.key, Decision::Claimed, 2)?;
                    let response = response_for(self.key);
                    let done = self
                        .side
                        .complete(self.caller, self.key, &dup.token, &response);
                    done.await?;
                    rec.ok(sent.elapsed());
                    return Ok(());
                }
                _ => {
                    let after = sent.duration_since(started).as_millis();
                    return Err(format!(
                        "Claim {}: {:?} (attempt {}) {after} ms after its Retry (1 s)",
                        self.key, dup.decision, dup.attempt
                    ));
                }
            }
        }
        pending.push_back(p);
        Ok(())
    }
}
