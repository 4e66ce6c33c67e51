//! The driver's batch statements on a real SQLite file: which writes of one batch are made,
//! what the others report, and a batch's read, each over several runs of the ladder.

use super::SqliteDriver;
use crate::domain::{Receipt, ReceiptKey, State, Timestamp};
use crate::seal::{Sealer, new_life};
use crate::store::driver::{Driver, Row};
use crate::store::write::{Expect, RowWrite, Sealed, Version, WriteOutcome};
use crate::store::{BatchOptions, Clock, Lifecycle, NotifyOptions, StoreOptions, StoredBlobs};
use chrono::{TimeDelta, Utc};
use std::sync::Arc;
use std::time::Duration;

/// A migrated store in `dir`.
async fn store(dir: &tempfile::TempDir) -> SqliteDriver {
    let url = format!("sqlite://{}", dir.path().join("claimd.db").display());
    let options = StoreOptions {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        clock: Clock::default(),
        exclusive: false,
        seal: Arc::new(Sealer::ephemeral()),
        batch: BatchOptions {
            lanes: None,
            size: 128,
        },
        notify: NotifyOptions {
            max_usage: 0.5,
            stale_after: Duration::from_secs(30),
        },
    };
    let driver = SqliteDriver::open(&url, &options)
        .await
        .expect("the store opens");
    driver.migrate().await.expect("migrations apply");
    driver
}

fn id(key: &str) -> ReceiptKey {
    ReceiptKey {
        namespace: "ns".into(),
        key: key.into(),
    }
}

/// A first Claim of `key`: its insert.
fn insert(sealer: &Sealer, key: &str, now: Timestamp) -> RowWrite {
    let next = Receipt {
        id: id(key),
        state: State::Processing,
        attempt: 1,
        free_attempts: 0,
        fingerprint: vec![1],
        claim_token: Some(uuid::Uuid::new_v4()),
        lease_expires_at: Some(now + TimeDelta::seconds(60)),
        next_attempt_at: None,
        created_at: now,
        updated_at: now,
        completed_at: None,
        last_error: None,
        checkpoint: None,
        response: None,
        recovery_payload: None,
        response_pruned_at: None,
    };
    let life = new_life();
    let blobs = StoredBlobs::insert(sealer, "t", &next, life);
    let sealed = (Sealed::all(blobs.clone()), blobs);
    RowWrite::new("t", Expect::Absent(life), None, next, now, sealed, None)
}

/// A Complete of the row `(current, blobs)`, expecting it at `version`.
fn complete(sealer: &Sealer, (current, blobs): &Row, version: Version) -> RowWrite {
    let now = Utc::now();
    let next = Receipt {
        state: State::Completed,
        lease_expires_at: None,
        completed_at: Some(now),
        response: Some(current.id.key.as_bytes().to_vec()),
        ..current.clone()
    };
    let changes = blobs.changes(sealer, "t", current, &next);
    let stored = changes.over(blobs);
    let expect = Expect::Row(version);
    RowWrite::new(
        "t",
        expect,
        Some(current),
        next,
        now,
        (changes, stored),
        None,
    )
}

/// The rows `keys` name, as the store has them now.
async fn rows(driver: &SqliteDriver, keys: &[&str]) -> Vec<Option<Row>> {
    let ids: Vec<ReceiptKey> = keys.iter().map(|k| id(k)).collect();
    let wanted: Vec<(&str, &ReceiptKey)> = ids.iter().map(|id| ("t", id)).collect();
    let read = driver.read_many(&wanted).await.expect("the rows are read");
    read.into_iter().map(|(_, row)| row).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_makes_every_write_that_still_applies_and_reports_each_other_row_as_it_is() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let driver = store(&dir).await;
    let sealer = driver.seal.clone();
    // 70 new rows: runs of 64, 4 and 2 rows.
    let keys: Vec<String> = (0..70).map(|n| format!("k{n:02}")).collect();
    let first: Vec<RowWrite> = keys
        .iter()
        .map(|k| insert(&sealer, k, Utc::now()))
        .collect();
    let made = driver.write_many(&first).await.expect("the batch commits");
    assert!(made.iter().all(|o| matches!(o, WriteOutcome::Written(_))));

    let read = rows(&driver, &["k00", "absent", "k69", "k00"]).await;
    let names: Vec<Option<&str>> = read
        .iter()
        .map(|r| r.as_ref().map(|(r, _)| r.id.key.as_str()))
        .collect();
    assert_eq!(names, [Some("k00"), None, Some("k69"), Some("k00")]);

    let current = rows(
        &driver,
        &keys.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let current: Vec<Row> = current.into_iter().flatten().collect();
    let at = |row: &Row| Version::of(&row.0, &row.1);
    let mut second = vec![insert(&sealer, "k00", Utc::now())];
    second.extend(["k70", "k71", "k72"].map(|k| insert(&sealer, k, Utc::now())));
    // 40 Completes at their rows' versions: runs of 32 and 8.
    second.extend(
        current[1..41]
            .iter()
            .map(|row| complete(&sealer, row, at(row))),
    );
    let moved = Version {
        attempt: 2,
        ..at(&current[41])
    };
    second.push(complete(&sealer, &current[41], moved));
    let mut gone = current[42].clone();
    gone.0.id = id("gone");
    second.push(complete(&sealer, &gone, at(&current[42])));
    let mut late = insert(&sealer, "late", Utc::now());
    late.due = Some(tokio::time::Instant::now());
    second.push(late);
    let outcomes = driver.write_many(&second).await.expect("the batch commits");

    let found = |o: &WriteOutcome| match o {
        WriteOutcome::Stale(_, row) => Some(row.as_ref().map(|r| (r.0.clone(), r.1.clone()))),
        _ => None,
    };
    assert_eq!(
        found(&outcomes[0]),
        Some(Some(current[0].clone())),
        "k00 exists"
    );
    for o in &outcomes[1..44] {
        assert!(matches!(o, WriteOutcome::Written(_)), "made: {o:?}");
    }
    assert_eq!(
        found(&outcomes[44]),
        Some(Some(current[41].clone())),
        "at attempt 1"
    );
    assert_eq!(found(&outcomes[45]), Some(None), "no row to update");
    assert!(
        matches!(outcomes[46], WriteOutcome::Late),
        "{:?}",
        outcomes[46]
    );

    let after = rows(&driver, &["k01", "k40", "k41", "k72", "gone", "late"]).await;
    for (row, w) in after[..2].iter().zip([&second[4], &second[43]]) {
        let (receipt, blobs) = row.as_ref().expect("the completed row is there");
        assert_eq!(receipt.state, State::Completed);
        assert_eq!(
            blobs, &w.stored,
            "its sealed columns and write id are the write's"
        );
    }
    assert_eq!(
        after[2],
        Some(current[41].clone()),
        "the stale write changed nothing"
    );
    assert!(after[3].is_some(), "the new row is there");
    assert_eq!(
        (&after[4], &after[5]),
        (&None, &None),
        "nothing was made of the others"
    );
}
