//! Model-based test: random sequences of Claim, Complete, Heartbeat, Retry, Quarantine, Get,
//! ListOrphaned, List, Redrive, time advances and a Claim with `wait` that the holder's
//! Complete, Retry or Quarantine ends (docs/DESIGN.md §2.9: the waiter's answer is the
//! decision on the receipt after the settle) over a few keys and two tenants, run against
//! each store and against the pure domain functions (`decide_claim`, `apply`, `redrive`) as
//! the oracle. Every
//! answer and every visible receipt must match exactly (the store's clock is frozen, so
//! timestamps are exact too).
//!
//! A failure prints the seed; `CLAIMD_MODEL_SEED=<seed> cargo test --test it model::` replays the
//! same cases and shrinks to the same minimal sequence. `CLAIMD_MODEL_CASES` sets the count.

use crate::common::app::Backend;
use chrono::{DateTime, TimeDelta};
use claimd::domain::{
    Action, ActionError, ClaimInput, ClaimOutcome, Decision, Policy, Receipt, ReceiptKey, State,
    Timestamp, Write, apply, decide_claim, redrive,
};
use claimd::store::{self, Clock, ListQuery, OrphanQuery, Store, StoreError, StoreOptions};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use uuid::Uuid;

const TENANTS: usize = 2;
const KEYS: [(&str, &str); 3] = [("ns-a", "k0"), ("ns-a", "k1"), ("ns-b", "k0")];

/// Which token an action presents.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Latest,
    Oldest,
    Stranger,
}

#[derive(Debug, Clone)]
enum Op {
    Claim {
        who: usize,
        key: usize,
        fp: u8,
        ttl: i64,
        payload: Option<u8>,
    },
    Complete {
        who: usize,
        key: usize,
        pick: Pick,
        response: Option<u8>,
    },
    Heartbeat {
        who: usize,
        key: usize,
        pick: Pick,
        ttl: i64,
        checkpoint: Option<u8>,
    },
    Retry {
        who: usize,
        key: usize,
        pick: Pick,
        after: Option<i64>,
        count: bool,
        jitter: u8,
    },
    Quarantine {
        who: usize,
        key: usize,
        pick: Pick,
    },
    Advance {
        secs: i64,
    },
    Get {
        who: usize,
        key: usize,
    },
    Orphans {
        who: usize,
        page: u32,
    },
    Redrive {
        who: usize,
        key: usize,
    },
    List {
        who: usize,
        namespace: Option<usize>,
        states: Vec<usize>,
        page: u32,
    },
    /// A Claim with `wait`; when it waits, the current holder settles the receipt by
    /// `settle` (0 Complete, 1 Retry, 2 Quarantine) meanwhile. (A wait that ends at a lease's
    /// end is not expressed: the model's clock is frozen, and a waiter sleeps in real time.)
    WaitThenSettle {
        who: usize,
        key: usize,
        fp: u8,
        settle: u8,
    },
}

/// The states a List op may filter by, by index.
const STATES: [State; 4] = [
    State::Processing,
    State::RetryWait,
    State::Completed,
    State::Quarantined,
];

fn op() -> impl Strategy<Value = Op> {
    let who = 0..TENANTS;
    let key = 0..KEYS.len();
    let pick =
        prop_oneof![6 => Just(Pick::Latest), 2 => Just(Pick::Oldest), 1 => Just(Pick::Stranger)];
    prop_oneof![
        6 => (who.clone(), key.clone(), fingerprint(), 1..60i64, proptest::option::of(any::<u8>()))
            .prop_map(|(who, key, fp, ttl, payload)| Op::Claim { who, key, fp, ttl, payload }),
        3 => (who.clone(), key.clone(), pick.clone(), proptest::option::of(any::<u8>()))
            .prop_map(|(who, key, pick, response)| Op::Complete { who, key, pick, response }),
        2 => (who.clone(), key.clone(), pick.clone(), 1..60i64, proptest::option::of(any::<u8>()))
            .prop_map(|(who, key, pick, ttl, checkpoint)| Op::Heartbeat { who, key, pick, ttl, checkpoint }),
        3 => (who.clone(), key.clone(), pick.clone(), proptest::option::of(1..30i64), any::<bool>(), any::<u8>())
            .prop_map(|(who, key, pick, after, count, jitter)| Op::Retry { who, key, pick, after, count, jitter }),
        1 => (who.clone(), key.clone(), pick)
            .prop_map(|(who, key, pick)| Op::Quarantine { who, key, pick }),
        4 => (0..90i64).prop_map(|secs| Op::Advance { secs }),
        1 => (who.clone(), key.clone()).prop_map(|(who, key)| Op::Get { who, key }),
        1 => (who.clone(), 1..4u32).prop_map(|(who, page)| Op::Orphans { who, page }),
        1 => (who.clone(), key.clone()).prop_map(|(who, key)| Op::Redrive { who, key }),
        1 => (who.clone(), proptest::option::of(0..2usize), proptest::collection::vec(0..4usize, 0..3), 1..4u32)
            .prop_map(|(who, namespace, states, page)| Op::List { who, namespace, states, page }),
        2 => (who, key, fingerprint(), 0..3u8)
            .prop_map(|(who, key, fp, settle)| Op::WaitThenSettle { who, key, fp, settle }),
    ]
}

/// Mostly the same fingerprint, so sequences go deep into one receipt's life; sometimes
/// another, for conflicts.
fn fingerprint() -> impl Strategy<Value = u8> {
    prop_oneof![4 => Just(0u8), 1 => Just(1u8)]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..60)
}

fn policy() -> Policy {
    Policy {
        lease_ttl: TimeDelta::seconds(30),
        max_attempts: 2,
        backoff_base: TimeDelta::seconds(1),
        backoff_max: TimeDelta::seconds(8),
        retention: TimeDelta::days(1),
        response_retention: TimeDelta::days(1),
        ..Policy::default()
    }
}

/// What an action can be refused with, comparable across model and store.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    NotFound,
    Domain(ActionError),
}

/// An operation turned into the exact request both the store and the model receive.
enum Request {
    Claim(usize, usize, ClaimInput),
    Act(usize, usize, Uuid, Action),
    Get(usize, usize),
    Orphans(usize, u32),
    Redrive(usize, usize),
    List(usize, ListQuery),
    Advance(i64),
    WaitThen(usize, usize, ClaimInput, Action),
}

/// The oracle: the receipts as the pure rules say they are, and every token ever issued.
#[derive(Default)]
struct Model {
    receipts: HashMap<(usize, usize), Receipt>,
    tokens: HashMap<(usize, usize), Vec<Uuid>>,
    minted: u128,
}

impl Model {
    fn mint(&mut self) -> Uuid {
        self.minted += 1;
        Uuid::from_u128(self.minted)
    }

    fn pick(&mut self, who: usize, key: usize, pick: Pick) -> Uuid {
        let issued = self.tokens.get(&(who, key)).cloned().unwrap_or_default();
        match (pick, issued.first(), issued.last()) {
            (Pick::Latest, _, Some(t)) | (Pick::Oldest, Some(t), _) => *t,
            _ => Uuid::from_u128((1 << 127) | self.mint().as_u128()),
        }
    }

    fn request(&mut self, step: usize, op: &Op) -> Request {
        let bytes = |b: Option<u8>| b.map(|b| vec![b; 3]);
        let (who, key, pick, action) = match *op {
            Op::Advance { secs } => return Request::Advance(secs),
            Op::Get { who, key } => return Request::Get(who, key),
            Op::Orphans { who, page } => return Request::Orphans(who, page),
            Op::Redrive { who, key } => return Request::Redrive(who, key),
            Op::List {
                who,
                namespace,
                ref states,
                page,
            } => {
                let query = ListQuery {
                    namespace: namespace.map(|n| ["ns-a", "ns-b"][n].to_owned()),
                    states: states.iter().map(|&s| STATES[s]).collect(),
                    limit: page,
                    max_bytes: claimd::store::DEFAULT_PAGE_BYTES,
                    after: None,
                    key_prefix: None,
                    updated_since: None,
                };
                return Request::List(who, query);
            }
            Op::WaitThenSettle {
                who,
                key,
                fp,
                settle,
            } => {
                let input = ClaimInput {
                    id: id(key),
                    fingerprint: vec![fp],
                    lease_ttl: TimeDelta::seconds(30),
                    recovery_payload: None,
                    new_token: self.mint(),
                };
                let action = match settle {
                    0 => Action::Complete {
                        response: Some(format!("step {step}").into_bytes()),
                    },
                    1 => Action::Retry {
                        error: format!("step {step}"),
                        retry_after: None,
                        count_attempt: true,
                        jitter: 0.5,
                    },
                    _ => Action::Quarantine {
                        error: format!("poison {step}"),
                    },
                };
                return Request::WaitThen(who, key, input, action);
            }
            Op::Claim {
                who,
                key,
                fp,
                ttl,
                payload,
            } => {
                let input = ClaimInput {
                    id: id(key),
                    fingerprint: vec![fp],
                    lease_ttl: TimeDelta::seconds(ttl),
                    recovery_payload: bytes(payload),
                    new_token: self.mint(),
                };
                return Request::Claim(who, key, input);
            }
            Op::Complete {
                who,
                key,
                pick,
                response,
            } => (
                who,
                key,
                pick,
                Action::Complete {
                    response: bytes(response),
                },
            ),
            Op::Heartbeat {
                who,
                key,
                pick,
                ttl,
                checkpoint,
            } => {
                let lease_ttl = TimeDelta::seconds(ttl);
                (
                    who,
                    key,
                    pick,
                    Action::Heartbeat {
                        lease_ttl,
                        checkpoint: bytes(checkpoint),
                    },
                )
            }
            Op::Retry {
                who,
                key,
                pick,
                after,
                count,
                jitter,
            } => {
                let action = Action::Retry {
                    error: format!("step {step}"),
                    retry_after: after.map(TimeDelta::seconds),
                    count_attempt: count,
                    jitter: f64::from(jitter) / 256.0,
                };
                (who, key, pick, action)
            }
            Op::Quarantine { who, key, pick } => (
                who,
                key,
                pick,
                Action::Quarantine {
                    error: format!("poison {step}"),
                },
            ),
        };
        Request::Act(who, key, self.pick(who, key, pick), action)
    }

    fn claim(
        &mut self,
        who: usize,
        key: usize,
        input: &ClaimInput,
        now: Timestamp,
    ) -> ClaimOutcome {
        let out = decide_claim(self.receipts.get(&(who, key)), input, now, &policy());
        if out.write != Write::None {
            self.receipts.insert((who, key), out.receipt.clone());
        }
        if out.decision == Decision::Claimed {
            self.tokens
                .entry((who, key))
                .or_default()
                .push(input.new_token);
        }
        out
    }

    fn act(
        &mut self,
        who: usize,
        key: usize,
        token: Uuid,
        action: &Action,
        now: Timestamp,
    ) -> Result<Receipt, Refusal> {
        let current = self.receipts.get(&(who, key)).ok_or(Refusal::NotFound)?;
        let next = apply(current, token, action, now, &policy()).map_err(Refusal::Domain)?;
        self.receipts.insert((who, key), next.clone());
        Ok(next)
    }

    fn redrive(&mut self, who: usize, key: usize, now: Timestamp) -> Result<Receipt, Refusal> {
        let current = self.receipts.get(&(who, key)).ok_or(Refusal::NotFound)?;
        let next = redrive(current, now).map_err(Refusal::Domain)?;
        self.receipts.insert((who, key), next.clone());
        Ok(next)
    }

    /// The tenant's receipts in the query's namespace and states, in (namespace, key) order.
    fn list(&self, who: usize, query: &ListQuery) -> Vec<Receipt> {
        let mut listed: Vec<Receipt> = (0..KEYS.len())
            .filter_map(|k| self.receipts.get(&(who, k)))
            .filter(|r| {
                query
                    .namespace
                    .as_ref()
                    .is_none_or(|n| &r.id.namespace == n)
            })
            .filter(|r| query.states.is_empty() || query.states.contains(&r.state))
            .cloned()
            .collect();
        listed.sort_by(|a, b| a.id.cmp(&b.id));
        listed
    }

    fn orphans(&self, who: usize, now: Timestamp) -> Vec<Receipt> {
        let mut due: Vec<Receipt> = (0..KEYS.len())
            .filter_map(|k| self.receipts.get(&(who, k)))
            .filter(|r| r.due_at().is_some_and(|due| due <= now))
            .cloned()
            .collect();
        due.sort_by(|a, b| (a.due_at(), &a.id).cmp(&(b.due_at(), &b.id)));
        due
    }
}

fn id(key: usize) -> ReceiptKey {
    ReceiptKey {
        namespace: KEYS[key].0.to_owned(),
        key: KEYS[key].1.to_owned(),
    }
}

fn fail(e: StoreError) -> TestCaseError {
    TestCaseError::fail(format!("store error: {e:?}"))
}

async fn check(
    store: &dyn Store,
    clock: &Clock,
    case: u32,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let policy = policy();
    let mut model = Model::default();
    let tenant = |who: usize| format!("case{case}-tenant{who}");
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now();
        match model.request(step, op) {
            Request::Advance(secs) => clock.advance(TimeDelta::seconds(secs)),
            Request::Claim(who, key, input) => {
                let got = store
                    .claim(&tenant(who), &input, &policy)
                    .await
                    .map_err(fail)?;
                let want = model.claim(who, key, &input, now);
                prop_assert_eq!(got, want, "step {}: {:?}", step, op);
            }
            Request::Act(who, key, token, action) => {
                let got = match store
                    .act(&tenant(who), &id(key), token, &action, &policy)
                    .await
                {
                    Ok(r) => Ok(r),
                    Err(StoreError::NotFound) => Err(Refusal::NotFound),
                    Err(StoreError::Refused(e)) => Err(Refusal::Domain(e)),
                    Err(e) => return Err(fail(e)),
                };
                let want = model.act(who, key, token, &action, now);
                prop_assert_eq!(got, want, "step {}: {:?}", step, op);
            }
            Request::Get(who, key) => {
                let got = store.get(&tenant(who), &id(key)).await.map_err(fail)?;
                prop_assert_eq!(
                    got.as_ref(),
                    model.receipts.get(&(who, key)),
                    "step {}: {:?}",
                    step,
                    op
                );
            }
            Request::Orphans(who, page) => {
                let got = list_all(store, &tenant(who), page).await.map_err(fail)?;
                prop_assert_eq!(got, model.orphans(who, now), "step {}: {:?}", step, op);
            }
            Request::Redrive(who, key) => {
                let got = match store.redrive(&tenant(who), &id(key)).await {
                    Ok(r) => Ok(r),
                    Err(StoreError::NotFound) => Err(Refusal::NotFound),
                    Err(StoreError::Refused(e)) => Err(Refusal::Domain(e)),
                    Err(e) => return Err(fail(e)),
                };
                let want = model.redrive(who, key, now);
                prop_assert_eq!(got, want, "step {}: {:?}", step, op);
            }
            Request::WaitThen(who, key, input, action) => {
                let first = store
                    .claim(&tenant(who), &input, &policy)
                    .await
                    .map_err(fail)?;
                let want = model.claim(who, key, &input, now);
                let waits = first.decision == Decision::InFlight;
                prop_assert_eq!(&first, &want, "step {}: {:?}", step, op);
                if waits {
                    // The waiter and the holder's settle run at once, in either order.
                    let token = model.pick(who, key, Pick::Latest);
                    let waiter = claimd::api::Waits::new(1, claimd::drain::Drain::default());
                    let (t, row) = (tenant(who), id(key));
                    let wait = std::time::Duration::from_secs(20);
                    // No quota: the park always has room.
                    let quotas = claimd::api::quota::Limiter::default();
                    let park = || quotas.park(&t, &Default::default());
                    let (waited, settled) = tokio::join!(
                        waiter.claim(store, &t, &input, &policy, Some(wait), park),
                        store.act(&t, &row, token, &action, &policy),
                    );
                    let settled = settled.map_err(fail)?;
                    let want = model.act(who, key, token, &action, now);
                    prop_assert_eq!(Ok(settled), want, "step {}: {:?}", step, op);
                    let want = model.claim(who, key, &input, now);
                    let waited = waited.map_err(|e| TestCaseError::fail(format!("{e:?}")));
                    prop_assert_eq!(waited?, want, "step {} (waiter): {:?}", step, op);
                }
            }
            Request::List(who, query) => {
                let got = list_pages(store, &tenant(who), query.clone())
                    .await
                    .map_err(fail)?;
                prop_assert_eq!(got, model.list(who, &query), "step {}: {:?}", step, op);
            }
        }
    }
    Ok(())
}

/// Every receipt `query` selects, following the pages to the end.
async fn list_pages(
    store: &dyn Store,
    tenant: &str,
    mut query: ListQuery,
) -> Result<Vec<Receipt>, StoreError> {
    let mut all = Vec::new();
    loop {
        let page = store.list(tenant, &query).await?;
        all.extend(page.receipts);
        match page.next {
            Some(next) => query.after = Some(next),
            None => return Ok(all),
        }
    }
}

/// Every orphan of `tenant`, fetched `page` at a time.
async fn list_all(store: &dyn Store, tenant: &str, page: u32) -> Result<Vec<Receipt>, StoreError> {
    let mut query = OrphanQuery {
        namespace: None,
        limit: page,
        max_bytes: claimd::store::DEFAULT_PAGE_BYTES,
        after: None,
        overdue_by: TimeDelta::zero(),
    };
    let mut all = Vec::new();
    loop {
        let result = store.list_orphaned(tenant, &query).await?;
        all.extend(result.orphans);
        match result.next {
            Some(next) => query.after = Some(next),
            None => return Ok(all),
        }
    }
}

fn run_model(backend: Backend) {
    let seed: u64 = match std::env::var("CLAIMD_MODEL_SEED") {
        Ok(s) => s.parse().expect("CLAIMD_MODEL_SEED is a number"),
        Err(_) => rand_seed(),
    };
    let cases = std::env::var("CLAIMD_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(96);
    eprintln!("model seed {seed} ({backend:?}); CLAIMD_MODEL_SEED={seed} replays it");
    // The runtime outlives every case, so the store's pool stays usable.
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let start = DateTime::from_timestamp(1_900_000_000, 0).expect("valid time");
    let clock = Clock::frozen_at(start);
    let (store, _dir) = rt.block_on(async {
        let (url, dir) = backend.fresh_database().await;
        let options = StoreOptions {
            clock: clock.clone(),
            ..crate::common::app::store_options()
        };
        let store = store::open(&url, &options).await.expect("store opens");
        store.migrate().await.expect("migrations apply");
        (store, dir)
    });
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let case = AtomicU32::new(0);
    let result = runner.run(&ops(), |ops| {
        let n = case.fetch_add(1, Ordering::SeqCst);
        rt.block_on(check(store.as_ref(), &clock, n, &ops))
    });
    if let Err(e) = result {
        panic!("{backend:?} store differs from the model: {e}\nreplay: CLAIMD_MODEL_SEED={seed}");
    }
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[test]
fn postgres_store_answers_exactly_as_the_model() {
    run_model(Backend::Postgres);
}

#[test]
fn sqlite_store_answers_exactly_as_the_model() {
    run_model(Backend::Sqlite);
}

/// The comparison above proves little unless the generated sequences reach every part of
/// the rules: every decision, the budget quarantine at a Claim and at a Retry, a takeover,
/// refused actions of both kinds.
#[test]
fn generated_sequences_reach_every_rule() {
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        // Generating a value from a strategy cannot fail for these plain strategies.
        let ops = ops().new_tree(&mut runner).expect("ops").current();
        let clock = Clock::frozen_at(DateTime::from_timestamp(1_900_000_000, 0).expect("time"));
        let mut model = Model::default();
        for (step, op) in ops.iter().enumerate() {
            match model.request(step, op) {
                Request::Advance(secs) => clock.advance(TimeDelta::seconds(secs)),
                Request::Claim(who, key, input) => {
                    let out = model.claim(who, key, &input, clock.now());
                    seen.insert(format!("{:?}", out.decision));
                    if out.write == Write::Update {
                        seen.insert(format!("{:?} by a write", out.decision));
                    }
                }
                Request::Act(who, key, token, action) => {
                    match model.act(who, key, token, &action, clock.now()) {
                        Ok(r) => seen.insert(format!("{} -> {:?}", action.name(), r.state)),
                        Err(e) => seen.insert(format!("{e:?}")),
                    };
                }
                Request::Redrive(who, key) => {
                    match model.redrive(who, key, clock.now()) {
                        Ok(r) => seen.insert(format!("redrive -> {:?}", r.state)),
                        Err(e) => seen.insert(format!("redrive: {e:?}")),
                    };
                }
                Request::WaitThen(who, key, input, action) => {
                    let first = model.claim(who, key, &input, clock.now());
                    if first.decision == Decision::InFlight {
                        let token = model.pick(who, key, Pick::Latest);
                        let settled = model.act(who, key, token, &action, clock.now());
                        let waited = model.claim(who, key, &input, clock.now());
                        if settled.is_ok() {
                            seen.insert(format!(
                                "waited for {}: {:?}",
                                action.name(),
                                waited.decision
                            ));
                        }
                    }
                }
                Request::Get(..) | Request::Orphans(..) | Request::List(..) => {}
            }
        }
    }
    for rule in [
        "Claimed",
        "InFlight",
        "Completed",
        "RetryScheduled",
        "Quarantined",
        "Conflict",
        "Claimed by a write",
        "Quarantined by a write",
        "retry -> Quarantined",
        "retry -> RetryWait",
        "complete -> Completed",
        "heartbeat -> Processing",
        "quarantine -> Quarantined",
        "NotFound",
        "Domain(LeaseLost)",
        "Domain(WrongState(Completed))",
        "redrive -> RetryWait",
        "redrive: Domain(WrongState(Completed))",
        "waited for complete: Completed",
        "waited for retry: RetryScheduled",
        "waited for quarantine: Quarantined",
    ] {
        assert!(
            seen.contains(rule),
            "never reached: {rule}; reached: {seen:?}"
        );
    }
}
