//! The fault matrix's power-failure rows (docs/RELIABILITY.md): a process kill keeps the
//! page cache, a power failure does not. The data directory is on LazyFS (`lazyfs`), which
//! keeps every write in its own cache until the file is fsynced; mid-load claimd (and, for
//! PostgreSQL, the server whose data directory is there) is killed with SIGKILL, LazyFS
//! drops every unsynced byte, everything starts again on the same directories, and the
//! history checker runs over the whole history with every answered write read back
//! (`load`). Each mount first shows that it loses an unsynced write, so no row can pass by
//! simulating nothing; the first test also shows an SQLite without fsync losing commits.
//! Each row has two failures: one at whatever moment the load is in, one right before an
//! fsync of the write-ahead log, when a commit is written and not yet durable. The data
//! directory's generated `seal.key` and lock file go through the same failure.
//! Root, `/dev/fuse` and LazyFS are needed: without them these tests fail saying so.

mod cluster;
mod detect;
mod lazyfs;
mod load;

use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use crate::faults::{Db, SECOND, replica};
use crate::history::workload;
use claimd::pb::{self, Decision, State};
use cluster::PgOnLazyFs;
use detect::{loses_an_unsynced_write, rows_after_power_failure};
use lazyfs::LazyFs;
use load::{power_failure, power_failure_before_fsync, recorded};
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteSynchronous};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::task::block_in_place;

/// The load before each power failure.
const BETWEEN: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazyfs_loses_unsynced_writes_and_an_sqlite_without_fsync_but_keeps_fsynced_ones() {
    let fs = LazyFs::mount("64mb");
    loses_an_unsynced_write(&fs);
    let full = rows_after_power_failure(&fs, "full.db", SqliteSynchronous::Full);
    assert_eq!(
        full.await,
        Ok(50),
        "commits fsynced (synchronous=FULL) are kept"
    );
    let off = rows_after_power_failure(&fs, "off.db", SqliteSynchronous::Off);
    let off = off.await;
    println!("SQLite with synchronous=OFF after the power failure: {off:?} of 50 rows");
    assert!(
        off != Ok(50),
        "commits never fsynced (synchronous=OFF) survived"
    );
}

/// SIGKILL of the claimd `kept` holds.
fn kill_9(kept: &mut Option<Claimd>) {
    // Reason: a row starts claimd again after each failure, before the next.
    kept.take().expect("a claimd runs").kill_9();
}

/// What `PRAGMA integrity_check` says of the database at `db` (claimd stopped).
async fn integrity(db: &Path) -> String {
    let options = SqliteConnectOptions::new().filename(db);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap_or_else(|e| panic!("{} does not open: {e}", db.display()));
    // Reason: integrity_check always answers one row, on any database that opens.
    sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .expect("integrity_check answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_power_failures_mid_load_lose_nothing_acknowledged() {
    let began = Instant::now();
    let mut fs = LazyFs::mount("64mb");
    loses_an_unsynced_write(&fs);
    let dir = fs.path().join("data");
    let addr = free_addr();
    // Declared after the mount: killed before it is unmounted.
    let mut kept = Some(replica(Db::Sqlite(&dir), addr).await);
    let (verdict, back) = recorded(addr, SECOND, async {
        tokio::time::sleep(BETWEEN).await;
        // At whatever moment the load is in: claimd killed, then the unsynced bytes dropped.
        kill_9(&mut kept);
        block_in_place(|| power_failure(&fs, 1));
        kept = Some(replica(Db::Sqlite(&dir), addr).await);
        tokio::time::sleep(BETWEEN).await;
        // Right before a commit's fsync of the WAL: its frames written, not yet durable.
        block_in_place(|| power_failure_before_fsync(&fs, "claimd.db-wal", 2));
        kill_9(&mut kept);
        block_in_place(|| fs.remount());
        kept = Some(replica(Db::Sqlite(&dir), addr).await);
    })
    .await;
    verdict.assert_valid();
    assert!(
        back.lost.is_empty(),
        "answered, then lost: {:#?}",
        back.lost
    );
    assert!(
        verdict.unknown > 0,
        "the failures cut no call short: {verdict:?}"
    );
    // Reason: the row ends with the claimd it started after the last failure.
    let last = kept.take().expect("claimd runs");
    assert!(last.terminate().await.success());
    assert_eq!(integrity(&dir.join("claimd.db")).await, "ok");
    println!("row: {:.1} s", began.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_power_failures_with_its_data_directory_on_lazyfs_lose_nothing_acknowledged() {
    let began = Instant::now();
    let mut pg = block_in_place(PgOnLazyFs::start);
    let url = pg.cluster().create_database().await;
    let addr = free_addr();
    let mut kept = Some(replica(Db::Postgres(&url), addr).await);
    let (verdict, back) = recorded(addr, SECOND, async {
        tokio::time::sleep(BETWEEN).await;
        // At whatever moment the load is in: claimd and every server process killed, then
        // the unsynced bytes dropped.
        kill_9(&mut kept);
        block_in_place(|| {
            pg.power_failure(1);
            pg.restart();
        });
        kept = Some(replica(Db::Postgres(&url), addr).await);
        tokio::time::sleep(BETWEEN).await;
        // Right before an fsync of the WAL: a commit's records written, not yet durable.
        block_in_place(|| pg.power_failure_before_wal_fsync(2));
        kill_9(&mut kept);
        block_in_place(|| pg.restart());
        kept = Some(replica(Db::Postgres(&url), addr).await);
    })
    .await;
    drop(kept);
    verdict.assert_valid();
    assert!(
        back.lost.is_empty(),
        "answered, then lost: {:#?}",
        back.lost
    );
    assert!(
        verdict.unknown > 0,
        "the failures cut no call short: {verdict:?}"
    );
    println!("row: {:.1} s", began.elapsed().as_secs_f64());
}

/// `claimd serve` on `dir` with no seal keys given: it generates the data directory's own.
fn with_its_own_key(dir: &Path, addr: SocketAddr) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"]);
    cmd.arg(dir);
    cmd
}

const RESPONSE: &[u8] = b"the first sealed response, plaintext only in memory";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_power_failure_right_after_the_first_start_keeps_the_seal_key_and_the_lock() {
    let fs = LazyFs::mount("64mb");
    loses_an_unsynced_write(&fs);
    let dir = fs.path().join("data");
    let addr = free_addr();
    let first = Claimd::start(with_its_own_key(&dir, addr), addr).await;
    // Reason: claimd generates the key file before it serves.
    let key = std::fs::read(dir.join("seal.key")).expect("claimd generated seal.key");
    let mut client = workload::channel(addr, Duration::from_secs(10));
    let claim = pb::ClaimRequest {
        namespace: "power".into(),
        key: "first".into(),
        ..Default::default()
    };
    // Reason: a serving claimd answers a Claim of a fresh key, and its holder's Complete.
    let claimed = client.claim(claim).await.expect("a Claim").into_inner();
    assert_eq!(claimed.decision(), Decision::Claimed);
    let complete = pb::CompleteRequest {
        namespace: "power".into(),
        key: "first".into(),
        claim_token: claimed.claim_token,
        response: RESPONSE.to_vec(),
    };
    client.complete(complete).await.expect("a Complete");
    let dead = first.pid();
    first.kill_9();
    block_in_place(|| power_failure(&fs, 1));
    // Reason: the file's name is metadata, which LazyFS never drops.
    let kept = std::fs::read(dir.join("seal.key")).expect("seal.key after the failure");
    assert_eq!(
        kept, key,
        "the generated seal key did not survive the power failure"
    );
    let stored: Vec<u8> = ["claimd.db", "claimd.db-wal"]
        .iter()
        .flat_map(|f| std::fs::read(dir.join(f)).unwrap_or_default())
        .collect();
    let plaintext = stored.windows(RESPONSE.len()).any(|w| w == RESPONSE);
    assert!(
        !plaintext,
        "the response is stored in plaintext: nothing here is sealed"
    );
    let lock = dir.join("claimd.db.lock");
    // Reason: claimd creates the lock file before the database, and names are kept.
    let left = std::fs::read_to_string(&lock).expect("the lock file is there");
    println!("the lock file after the failure: {left:?} (the dead claimd was {dead})");
    // The dead process's lock file keeps nothing out; the key opens the sealed row.
    let again = Claimd::start(with_its_own_key(&dir, addr), addr).await;
    let get = pb::GetRequest {
        namespace: "power".into(),
        key: "first".into(),
    };
    let mut client = workload::channel(addr, Duration::from_secs(10));
    // Reason: the test fails here if the receipt or its key was lost.
    let receipt = client.get(get).await.expect("the first receipt");
    // Reason: a Get that answers always carries the receipt.
    let receipt = receipt.into_inner().receipt.expect("a receipt");
    assert_eq!(
        (receipt.state(), receipt.response.as_slice()),
        (State::Completed, RESPONSE)
    );
    // Reason: the new claimd holds the same lock file.
    let holder = std::fs::read_to_string(&lock).expect("the lock file");
    assert_eq!(holder.trim(), again.pid().to_string());
    // And it still keeps a second claimd out.
    let mut second = Claimd::spawn(with_its_own_key(&dir, free_addr()));
    let status = second.wait_for_exit(PATIENCE).await;
    let log = second.log();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {log}");
    let named = format!("is in use by claimd process {}", again.pid());
    assert!(log.contains(&named), "{log}");
    drop(again);
}
