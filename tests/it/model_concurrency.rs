//! Concurrency under the model: many tasks race Claim, Complete, Heartbeat and Retry on a
//! few keys while time jumps forward, against each store. Afterwards the invariants of
//! docs/DESIGN.md §3 must hold for every key:
//! - the CLAIMED answers carry the attempts 1, 2, …, n exactly once each (one winner per
//!   attempt, attempts strictly increase with no gaps);
//! - every accepted action presented a token some CLAIMED answer handed out, and a token is
//!   accepted only while it is the current one;
//! - at most one Complete succeeds, and nothing is claimed after it;
//! - the stored receipt agrees with what the callers were told.

use crate::common::app::Backend;
use chrono::TimeDelta;
use claimd::domain::{Action, ClaimInput, Decision, Policy, ReceiptKey, State};
use claimd::store::{self, Clock, Store, StoreError, StoreOptions};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

const KEYS: usize = 3;
const TASKS: usize = 16;
const ROUNDS: usize = 30;

#[derive(Default)]
struct Log {
    /// (key, attempt) → token, for every CLAIMED answer.
    claimed: Vec<(usize, u32, Uuid)>,
    /// (key, token) of every Complete that succeeded.
    completed: Vec<(usize, Uuid)>,
    /// (key, token) of every Heartbeat or Retry that succeeded.
    accepted: Vec<(usize, Uuid)>,
}

fn id(key: usize) -> ReceiptKey {
    ReceiptKey {
        namespace: "race".into(),
        key: format!("k{key}"),
    }
}

async fn worker(store: Arc<dyn Store>, clock: Clock, log: Arc<Mutex<Log>>, seed: usize) {
    let policy = Policy {
        max_attempts: 1000,
        ..Policy::default()
    };
    for round in 0..ROUNDS {
        let key = (seed + round) % KEYS;
        let input = ClaimInput {
            id: id(key),
            fingerprint: b"fp".to_vec(),
            lease_ttl: TimeDelta::seconds(2),
            recovery_payload: None,
            new_token: Uuid::new_v4(),
        };
        // Every error here would be a bug: a race must end in an answer.
        let out = store
            .claim("tenant", &input, &policy)
            .await
            .expect("claim answers");
        if out.decision != Decision::Claimed {
            if (seed + round).is_multiple_of(5) {
                clock.advance(TimeDelta::seconds(3));
            }
            continue;
        }
        let token = input.new_token;
        log.lock()
            .unwrap()
            .claimed
            .push((key, out.receipt.attempt, token));
        let action = match (seed * 7 + round) % 4 {
            0 => Action::Complete {
                response: Some(token.as_bytes().to_vec()),
            },
            1 => Action::Retry {
                error: "try later".into(),
                retry_after: Some(TimeDelta::seconds(1)),
                count_attempt: round.is_multiple_of(2),
                jitter: 0.5,
            },
            2 => Action::Heartbeat {
                lease_ttl: TimeDelta::seconds(2),
                checkpoint: Some(vec![round as u8]),
            },
            // Abandon the work: the lease runs out and somebody takes it over.
            _ => {
                clock.advance(TimeDelta::seconds(3));
                continue;
            }
        };
        tokio::task::yield_now().await;
        match store.act("tenant", &id(key), token, &action, &policy).await {
            Ok(_) if matches!(action, Action::Complete { .. }) => {
                log.lock().unwrap().completed.push((key, token))
            }
            Ok(_) => log.lock().unwrap().accepted.push((key, token)),
            Err(StoreError::Refused(_)) => {}
            Err(e) => panic!("act failed with {e:?}"),
        }
        clock.advance(TimeDelta::seconds(1));
    }
}

async fn race(backend: Backend) {
    let (url, _dir) = backend.fresh_database().await;
    let clock = Clock::default();
    let options = StoreOptions {
        clock: clock.clone(),
        ..crate::common::app::store_options()
    };
    let store = store::open(&url, &options).await.expect("store opens");
    store.migrate().await.expect("migrations apply");
    let log = Arc::new(Mutex::new(Log::default()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|seed| tokio::spawn(worker(store.clone(), clock.clone(), log.clone(), seed)))
        .collect();
    for task in tasks {
        task.await.expect("worker finishes");
    }
    let log = Arc::try_unwrap(log)
        .ok()
        .expect("workers done")
        .into_inner()
        .unwrap();
    assert!(log.claimed.len() > KEYS, "too few claims to mean anything");

    for key in 0..KEYS {
        let mut attempts: BTreeMap<u32, Vec<Uuid>> = BTreeMap::new();
        for &(k, attempt, token) in &log.claimed {
            if k == key {
                attempts.entry(attempt).or_default().push(token);
            }
        }
        let winners: Vec<_> = attempts.iter().filter(|(_, t)| t.len() > 1).collect();
        assert!(
            winners.is_empty(),
            "key {key}: more than one winner for {winners:?}"
        );
        let n = attempts.len() as u32;
        assert_eq!(
            attempts.keys().copied().collect::<Vec<_>>(),
            (1..=n).collect::<Vec<_>>()
        );
        let attempt_of: HashMap<Uuid, u32> = attempts.iter().map(|(a, t)| (t[0], *a)).collect();

        for &(k, token) in log.accepted.iter().chain(&log.completed) {
            if k == key {
                assert!(
                    attempt_of.contains_key(&token),
                    "key {key}: a token never handed out was accepted"
                );
            }
        }
        let completions: Vec<u32> = log
            .completed
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, t)| attempt_of[t])
            .collect();
        assert!(
            completions.len() <= 1,
            "key {key}: completed more than once: {completions:?}"
        );

        let receipt = store
            .get("tenant", &id(key))
            .await
            .unwrap()
            .expect("receipt exists");
        assert_eq!(
            receipt.attempt, n,
            "key {key}: stored attempt differs from the last CLAIMED"
        );
        if let Some(&done) = completions.first() {
            assert_eq!(done, n, "key {key}: claimed again after completion");
            assert_eq!(receipt.state, State::Completed);
            let token = attempts[&done][0];
            assert_eq!(receipt.response.as_deref(), Some(&token.as_bytes()[..]));
        } else {
            assert_ne!(receipt.state, State::Completed);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_keeps_every_invariant_under_racing_callers() {
    race(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_keeps_every_invariant_under_racing_callers() {
    race(Backend::Sqlite).await;
}
