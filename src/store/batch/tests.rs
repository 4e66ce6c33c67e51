//! The group commit's queue and lanes: when lanes start, what a batch takes, and a lane
//! that panics (on the real embedded store, through a fault hook compiled for tests only).

use super::*;

fn job(tenant: &str, key: &str) -> Job {
    let id = ReceiptKey {
        namespace: "ns".into(),
        key: key.into(),
    };
    let (reply, _) = oneshot::channel();
    Job::new(tenant, &id, Op::Redrive, None, reply, &Recent::default())
}

fn names(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .map(|j| format!("{}/{}", j.tenant, j.id.key))
        .collect()
}

#[test]
fn a_second_lane_starts_only_when_the_running_ones_cannot_take_the_queue_or_are_stuck() {
    let batcher = Batcher::new(
        BatchOptions {
            lanes: Some(2),
            size: 3,
        },
        4,
    );
    let mut queue = Queue::default();
    queue.waiting.push_back(job("a", "1"));
    assert!(batcher.needs_lane(&queue), "the first lane starts at once");
    queue.open_lane();
    for key in ["2", "3"] {
        queue.waiting.push_back(job("a", key));
    }
    assert!(!batcher.needs_lane(&queue), "one lane takes three next");
    queue.waiting.push_back(job("a", "4"));
    assert!(batcher.needs_lane(&queue), "four wait: more than a batch");
    queue.waiting.truncate(1);
    queue.lanes[0] = Some(Instant::now() - STALLED);
    assert!(batcher.needs_lane(&queue), "the running lane is stuck");
    queue.open_lane();
    assert!(!batcher.needs_lane(&queue), "never more than `lanes`");
    queue.lanes[0] = None;
    assert_eq!(queue.open_lane(), 0, "a free slot is taken again");
}

/// A Claim of `key` through `driver`'s group commit.
async fn claim<D: Driver>(driver: D, key: &str) -> Result<Answer, StoreError> {
    let input = crate::domain::ClaimInput {
        id: ReceiptKey {
            namespace: "ns".into(),
            key: key.into(),
        },
        fingerprint: vec![1],
        lease_ttl: chrono::TimeDelta::seconds(60),
        recovery_payload: None,
        new_token: uuid::Uuid::new_v4(),
    };
    let op = Op::Claim {
        policy: crate::domain::Policy::default(),
        input: input.clone(),
    };
    driver.batcher().submit(&driver, "t", &input.id, op).await
}

/// Waits (10 s at most) until `batcher`'s queue is as `wanted` says.
async fn until(batcher: &Batcher, wanted: impl Fn(&Queue) -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !wanted(&batcher.queue()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    waited.await.expect("the queue gets there");
}

/// The real embedded store, in a temporary directory that lives as long as the store.
async fn embedded(batch: BatchOptions) -> (tempfile::TempDir, crate::store::sqlite::SqliteDriver) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("claimd.db").display());
    let options = crate::store::StoreOptions {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        clock: crate::store::Clock::default(),
        exclusive: false,
        seal: Arc::new(crate::seal::Sealer::ephemeral()),
        batch,
        notify: crate::store::NotifyOptions {
            max_usage: 0.5,
            stale_after: Duration::from_secs(30),
        },
    };
    let driver = crate::store::sqlite::SqliteDriver::open(&url, &options)
        .await
        .expect("the store opens");
    crate::store::Lifecycle::migrate(&driver)
        .await
        .expect("migrations apply");
    (dir, driver)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_that_panics_answers_its_jobs_unavailable_and_frees_its_slot_for_the_queued_ones() {
    // The real embedded store, with its one lane.
    let batch = BatchOptions {
        lanes: None,
        size: 128,
    };
    let (_dir, driver) = embedded(batch).await;
    let batcher = driver.batcher().clone();
    assert_eq!(batcher.lanes, 1);
    let (fire, armed) = oneshot::channel();
    *batcher.fault.lock().unwrap() = Some((armed, true));
    // The first Claim's batch is taken by the lane, which then waits for the fault;
    // the second queues behind it.
    let first = tokio::spawn(claim(driver.clone(), "first"));
    let busy = |q: &Queue| q.lanes.first().is_some_and(Option::is_some);
    until(&batcher, |q| q.waiting.is_empty() && busy(q)).await;
    let second = tokio::spawn(claim(driver.clone(), "second"));
    until(&batcher, |q| q.waiting.len() == 1).await;
    fire.send(()).expect("the lane waits for the fault");
    let answered = |task| async {
        let answer = tokio::time::timeout(Duration::from_secs(10), task).await;
        let answer: Result<Result<Answer, StoreError>, _> =
            answer.expect("answered within 10 s, not left waiting");
        answer.expect("the caller's task ends")
    };
    let first = answered(first).await;
    assert!(
        matches!(first, Err(ref e) if e.kind() == "unavailable"),
        "the panicked batch's job is answered UNAVAILABLE: {first:?}"
    );
    let second = answered(second).await;
    assert!(
        matches!(second, Ok(Answer::Claim(ref o)) if o.decision == crate::domain::Decision::Claimed),
        "the job queued behind the panic is served: {second:?}"
    );
    let third = answered(tokio::spawn(claim(driver.clone(), "third"))).await;
    assert!(third.is_ok(), "a later call is served: {third:?}");
    // The lane frees its slot once it finds the queue empty, just after answering.
    until(&batcher, |q| q.lanes.iter().all(Option::is_none)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_goes_away_while_its_task_runs_a_lane_leaves_the_batch_of_others_to_finish() {
    // Two lanes of one job each, so a caller that opens the second lane runs, on its own
    // task, a batch that holds another caller's job.
    let batch = BatchOptions {
        lanes: Some(2),
        size: 1,
    };
    let (_dir, driver) = embedded(batch).await;
    let batcher = driver.batcher().clone();
    let arm = || {
        let (release, paused) = oneshot::channel();
        *batcher.fault.lock().unwrap() = Some((paused, false));
        release
    };
    let running = |q: &Queue| q.lanes.iter().flatten().count();
    // `a` opens the first lane, which waits in the middle of its batch.
    let first = arm();
    let a = tokio::spawn(claim(driver.clone(), "a"));
    until(&batcher, |q| q.waiting.is_empty() && running(q) == 1).await;
    // `b` queues; `c` finds more waiting than the running lane takes, opens the second
    // lane on its own task, and that lane's batch is `b`, the job that waited longest.
    let b = tokio::spawn(claim(driver.clone(), "b"));
    until(&batcher, |q| q.waiting.len() == 1).await;
    let second = arm();
    let c = tokio::spawn(claim(driver.clone(), "c"));
    until(&batcher, |q| running(q) == 2 && q.waiting.len() == 1).await;
    // `c`'s caller goes away in the middle of `b`'s batch.
    c.abort();
    assert!(c.await.is_err_and(|e| e.is_cancelled()));
    second
        .send(())
        .expect("the second lane waits for the fault");
    first.send(()).expect("the first lane waits for the fault");
    let answered = |task: tokio::task::JoinHandle<_>| async {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("answered within 10 s, not left waiting")
            .expect("the caller's task ends")
    };
    for (name, task) in [("a", a), ("b", b)] {
        let answer: Result<Answer, StoreError> = answered(task).await;
        assert!(
            matches!(answer, Ok(Answer::Claim(ref o)) if o.decision == crate::domain::Decision::Claimed),
            "{name}'s batch was finished, not cancelled with the caller who ran it: {answer:?}"
        );
    }
    // The cancelled Claim was dropped before its statement: nothing of it landed.
    let again = claim(driver.clone(), "c").await;
    assert!(
        matches!(again, Ok(Answer::Claim(ref o)) if o.decision == crate::domain::Decision::Claimed),
        "the cancelled Claim wrote nothing: {again:?}"
    );
    until(&batcher, |q| q.lanes.iter().all(Option::is_none)).await;
}

#[test]
fn a_batch_takes_jobs_in_arrival_order_duplicates_of_a_row_too_and_leaves_the_rest_queued() {
    let mut waiting: VecDeque<Job> =
        [job("a", "1"), job("a", "1"), job("b", "1"), job("a", "2")].into();
    let batch = take(&mut waiting, 3, false);
    assert_eq!(names(&batch), ["a/1", "a/1", "b/1"]);
    assert_eq!(names(&waiting.drain(..).collect::<Vec<_>>()), ["a/2"]);
}

#[test]
fn a_batch_of_one_tenant_takes_the_first_jobs_tenant_only_and_leaves_the_others_in_order() {
    let mut waiting: VecDeque<Job> = [
        job("a", "1"),
        job("b", "1"),
        job("a", "2"),
        job("c", "1"),
        job("a", "3"),
        job("a", "4"),
    ]
    .into();
    let batch = take(&mut waiting, 3, true);
    assert_eq!(names(&batch), ["a/1", "a/2", "a/3"]);
    let rest = waiting.drain(..).collect::<Vec<_>>();
    assert_eq!(names(&rest), ["b/1", "c/1", "a/4"]);
}
