//! That a mount simulates anything: what LazyFS does to a write never fsynced (dropped) and
//! to one fsynced (kept), for a plain file and for SQLite commits with and without fsync.
//! Every row runs the file check on its own mount before its load, so none can pass on a
//! LazyFS that keeps everything.

use super::lazyfs::LazyFs;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{Connection, SqliteConnection};
use std::fs::{self, File};
use std::io::Write;
use tokio::task::block_in_place;

/// A file written without fsync is empty after [`LazyFs::clear_cache`] (its name kept, its
/// data dropped); one fsynced is whole. Both are removed afterwards.
pub fn loses_an_unsynced_write(fs: &LazyFs) {
    let (unsynced, synced) = (fs.path().join("unsynced"), fs.path().join("synced"));
    // Reason: a mounted LazyFS takes writes and fsyncs like any file system.
    fs::write(&unsynced, "never fsynced\n").expect("a write through LazyFS");
    let mut file = File::create(&synced).expect("a file on LazyFS");
    file.write_all(b"fsynced\n")
        .expect("a write through LazyFS");
    file.sync_all().expect("an fsync through LazyFS");
    drop(file);
    assert!(fs.unsynced().0 > 0, "LazyFS holds nothing unsynced");
    fs.clear_cache();
    // Reason: LazyFS keeps metadata: both names are there whatever happened to the data.
    let lost = fs::read(&unsynced).expect("the unsynced file's name is kept");
    assert_eq!(lost, b"", "LazyFS kept a write that was never fsynced");
    let kept = fs::read(&synced).expect("the fsynced file");
    assert_eq!(kept, b"fsynced\n", "LazyFS lost an fsynced write");
    for f in [unsynced, synced] {
        fs::remove_file(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}

/// Commits 50 rows one by one into a new SQLite database `name` on `fs` with `synchronous`,
/// closes it (a WAL checkpoint), lets LazyFS drop what is unsynced, and counts the rows left
/// (an error: the database lost its table or is unreadable).
pub async fn rows_after_power_failure(
    fs: &LazyFs,
    name: &str,
    synchronous: SqliteSynchronous,
) -> Result<i64, String> {
    let db = fs.path().join(name);
    let options = SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous);
    // Reason: SQLite runs on a mounted LazyFS as on any file system (WAL's mmap included).
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .expect("an SQLite database on LazyFS");
    let statements = ["CREATE TABLE t (n INTEGER)"].into_iter();
    let inserts = (0..50).map(|_| "INSERT INTO t VALUES (1)");
    for statement in statements.chain(inserts) {
        // Reason: the same database, before any failure.
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .expect("a commit through LazyFS");
    }
    // Reason: the same database, before any failure.
    conn.close().await.expect("the database closes");
    block_in_place(|| fs.clear_cache());
    let options = SqliteConnectOptions::new().filename(&db);
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::query_scalar("SELECT count(*) FROM t")
        .fetch_one(&mut conn)
        .await
        .map_err(|e| e.to_string())
}
