//! The arrays a batch's writes become, checked against the statements that bind them.

use super::*;
use crate::domain::{ClaimInput, Policy, ReceiptKey, decide_claim};
use crate::store::postgres::writes::{INSERT_MANY, UPDATE_MANY, WRITE_MANY};
use crate::store::write::Sealed;
use chrono::TimeDelta;

/// A new receipt's write and a write over it (a takeover), both decided at `now`.
fn writes() -> [RowWrite; 2] {
    let now = chrono::Utc::now();
    let input = ClaimInput {
        id: ReceiptKey {
            namespace: "ns".into(),
            key: "k".into(),
        },
        fingerprint: vec![0, 0xab],
        lease_ttl: TimeDelta::seconds(30),
        recovery_payload: None,
        new_token: Uuid::new_v4(),
    };
    let new = decide_claim(None, &input, now, &Policy::default()).receipt;
    let stored = StoredBlobs {
        life_id: Some(vec![7; 16]),
        ..StoredBlobs::default()
    };
    let insert = RowWrite::new(
        "t",
        Expect::Absent([7; 16]),
        None,
        new.clone(),
        now,
        (Sealed::all(stored.clone()), stored.clone()),
        None,
    );
    let later = now + TimeDelta::seconds(60);
    // Another call (its own token) takes the ended lease over.
    let other = ClaimInput {
        new_token: Uuid::new_v4(),
        ..input.clone()
    };
    let taken = decide_claim(Some(&new), &other, later, &Policy::default()).receipt;
    let update = RowWrite::new(
        "t",
        Expect::Row(Version::of(&new, &stored)),
        Some(&new),
        taken,
        later,
        (Sealed::default(), stored),
        Some(Instant::now() + Duration::from_secs(5)),
    );
    [insert, update]
}

#[test]
fn an_insert_and_an_update_fill_one_element_of_every_column() {
    let [insert, update] = writes();
    let mut a = Arrays::default();
    a.push(3, &insert, &ClockGap::new());
    a.push(1, &update, &ClockGap::new());
    assert_eq!(a.idx, [3, 1]);
    assert_eq!(a.key, ["k", "k"]);
    assert_eq!(a.ins, [true, false]);
    assert_eq!(a.life, [Some(&[7u8; 16][..]), Some(&[7u8; 16][..])]);
    assert_eq!(a.n_fingerprint, [&[0u8, 0xab][..], &[0, 0xab][..]]);
    // The insert's lease runs from the write's clock; the version is the update's alone.
    assert_eq!(a.after[0][0], Some(30_000_000));
    assert_eq!(a.v_state, [None, Some("processing")]);
    assert_eq!(a.v_attempt, [None, Some(1)]);
    assert_eq!(a.n_attempt, [1, 2]);
    assert_eq!(a.v_updated[1], Some(insert.next.updated_at));
    // Only the update has a deadline, and it is still ahead.
    assert_eq!(a.due_in[0], None);
    assert!(a.due_in[1].is_some_and(|us| us > 0));
    assert_eq!(a.n_write, [insert.id, update.id]);
    for col in [&a.v_blobs, &a.n_blobs] {
        assert!(col.iter().all(|c| c.len() == 2));
    }
}

#[test]
fn each_statement_unnests_exactly_the_columns_it_binds_in_order() {
    for statement in [&*INSERT_MANY, &*UPDATE_MANY, &*WRITE_MANY] {
        let names: Vec<&str> = statement.cols.iter().map(|c| c.sql().0).collect();
        assert!(
            statement
                .sql
                .contains(&format!("AS i({})", names.join(", "))),
            "{}",
            statement.sql
        );
        for (n, col) in statement.cols.iter().enumerate() {
            let param = format!("${}::{}", n + 3, col.sql().1);
            assert!(statement.sql.contains(&param), "{param} missing");
        }
        let after = format!("${}", statement.cols.len() + 3);
        assert!(!statement.sql.contains(&after), "{after} is not bound");
    }
    // An insert carries no expected version, an update no fingerprint.
    assert!(!INSERT_MANY.cols.contains(&Col::VState));
    assert!(!UPDATE_MANY.cols.contains(&Col::NFingerprint));
}
