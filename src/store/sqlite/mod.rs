//! The embedded SQLite driver: one file, one claimd process, the same semantics as
//! PostgreSQL. Statements only — what is composed of them lives in `store::receipts`. WAL journal with `synchronous=FULL`, so a commit is on disk before claimd
//! answers. Reads (duplicates, Get, ListOrphaned) use a pool of readers; every write goes
//! through a single writer connection in a `BEGIN IMMEDIATE` transaction that re-reads the
//! row, decides with the pure domain functions and writes the result, so writes are
//! serialized and exactly one Claim wins. The clock is this process's (the database is in
//! this process), shifted by the store's [`Clock`]. The payload columns are sealed when
//! bound and opened when a row is decoded (`store::sealed`).
//!
//! Only the owner may read the data (docs/DESIGN.md §3.6.2): a directory claimd creates is 0700, and
//! before SQLite opens anything the database file is created 0600 (or tightened to 0600,
//! with any `-wal` and `-shm` left by an earlier run), so the `-wal` and `-shm` SQLite
//! creates take the database file's mode, as SQLite's Unix VFS does for its journal files.
//! A symbolic link at any of those names, or at the lock file's, stops claimd at start
//! (`crate::private_fs`).
//! An existing directory is not changed (through `--database-url` it may be shared, as
//! `/tmp` is): the files in it are what is protected.

mod batch;
mod keys;
mod lock;
mod many;
mod pages;
mod prune;
mod rows;
mod writable;

pub use lock::FileLock;

use super::{Lifecycle, StoreError, StoreOptions};
use crate::domain::Timestamp;
use crate::seal::Sealer;
use crate::store::Clock;
use crate::store::batch::Batcher;
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use writable::Writable;

/// The `receipts` columns claimd reads, as SQLite returns them: counts are `INTEGER`, times
/// microseconds since the epoch.
type ReceiptRow = crate::store::row::ReceiptRow<i64, i64>;

/// Microseconds since the epoch, as stored.
fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

/// `--group-commit-lanes` on SQLite unless set: one, since its single writer serializes
/// batches.
pub const DEFAULT_LANES: usize = 1;

/// Receipts in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteDriver {
    reader: SqlitePool,
    writer: SqlitePool,
    clock: Clock,
    seal: Arc<Sealer>,
    batcher: Batcher,
    writable: Writable,
    /// The receipts waiting Claims watch (woken inside this process only: it is the
    /// database's only writer).
    settles: Arc<crate::store::settles::Settles>,
    _lock: Option<Arc<FileLock>>,
}

impl SqliteDriver {
    /// Opens (creating if needed) the database `url` names. With `options.exclusive`, takes
    /// the file lock first, so a second claimd on the same file refuses to start.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<SqliteDriver, StoreError> {
        let connect = SqliteConnectOptions::from_str(url)
            .map_err(|_| StoreError::UnsupportedUrl)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            // A batch's multi-row statement keeps the pages it changes in a statement
            // journal, to undo that statement alone; on disk it was a temporary file
            // created, written and removed per batch (measured: 202 page writes per commit
            // with it, 118 without). It is never read after a crash, so keeping it in
            // memory loses nothing of the commit's durability.
            .pragma("temp_store", "memory")
            .busy_timeout(options.acquire_timeout);
        if let Some(dir) = connect
            .get_filename()
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            crate::private_fs::create_dir_all(dir)
                .map_err(|e| open_error(format!("cannot create {}", dir.display()), dir, e))?;
            warn_if_open(dir);
        }
        private_files(connect.get_filename())?;
        let lock = match options.exclusive {
            true => Some(Arc::new(lock::lock(connect.get_filename())?)),
            false => None,
        };
        // A file has no peer to lose: sqlx's ping on every acquire would only cost a trip
        // to the connection's worker thread.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .after_release(writable::reusable)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.clone())
            .await
            .map_err(interpret)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(options.max_connections.clamp(1, 8))
            .test_before_acquire(false)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect.read_only(true))
            .await
            .map_err(interpret)?;
        Ok(SqliteDriver {
            reader,
            writer,
            clock: options.clock.clone(),
            seal: options.seal.clone(),
            batcher: Batcher::new(options.batch, DEFAULT_LANES),
            writable: Writable::default(),
            settles: crate::store::settles::Settles::new(),
            _lock: lock,
        })
    }
}

/// What to do about a symbolic link at the database's name.
const DATABASE_LINK: &str = "put the database file itself there, or point --data-dir \
     (--database-url) at the directory that holds it";
/// What to do about a symbolic link at the name of its `-wal` or `-shm`.
const JOURNAL_LINK: &str = "with claimd stopped, remove the link (SQLite creates the file \
     beside the database), or put the file itself there if it belongs to this database";

/// Creates the database file 0600 if it is missing and makes it and its `-wal` and `-shm`
/// 0600 if they are wider, before SQLite opens them, on the open files. A symbolic link at
/// any of the three names is refused: SQLite would follow it and make the other two beside
/// its target, wherever that is.
fn private_files(database: &Path) -> Result<(), StoreError> {
    let name = database.as_os_str();
    if name.is_empty() || name == ":memory:" {
        return Ok(());
    }
    let fail = |path: &Path, e: std::io::Error| {
        let dir = path.parent().unwrap_or(Path::new("."));
        open_error(format!("cannot make {} private", path.display()), dir, e)
    };
    match crate::private_fs::create_new(database) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(database, e)),
    }
    for (suffix, remedy) in [
        ("", DATABASE_LINK),
        ("-wal", JOURNAL_LINK),
        ("-shm", JOURNAL_LINK),
    ] {
        let mut path = name.to_owned();
        path.push(suffix);
        let path = std::path::PathBuf::from(path);
        crate::private_fs::restrict(&path, remedy).map_err(|e| fail(&path, e))?;
    }
    Ok(())
}

/// Warns when an existing data directory (not a shared, sticky one such as `/tmp`) lets
/// other users list it: the files in it are 0600, but `chmod 700` it.
fn warn_if_open(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir).map_or(0, |m| m.permissions().mode());
        if mode & 0o077 != 0 && mode & 0o1000 == 0 {
            tracing::warn!(
                dir = %dir.display(),
                mode = format!("{:o}", mode & 0o777),
                "the data directory is open to other users; chmod 700 it"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Why a file of the database in `dir` could not be made: `doing`, and the error. A
/// read-only filesystem is named as such, with the directory: claimd writes its database,
/// WAL and lock file there, so it does not start on one (docs/DESIGN.md §4.3).
fn open_error(doing: String, dir: &Path, e: std::io::Error) -> StoreError {
    if e.kind() == std::io::ErrorKind::ReadOnlyFilesystem {
        StoreError::Open(format!(
            "the data directory {} is on a read-only filesystem: claimd writes its database, \
             WAL and lock file there; mount it read-write ({doing}: {e})",
            dir.display()
        ))
    } else if e.kind() == std::io::ErrorKind::PermissionDenied {
        StoreError::Open(format!(
            "the data directory {} cannot be written by the user claimd runs as: make it \
             theirs (chown) or point --data-dir elsewhere ({doing}: {e})",
            dir.display()
        ))
    } else {
        StoreError::Open(format!(
            "{doing}: {e} — point --data-dir at a directory claimd can create or write"
        ))
    }
}

/// Every SQLite error goes through here. The storage failing — SQLITE_READONLY (8),
/// SQLITE_IOERR (10), SQLITE_FULL (13), SQLITE_CANTOPEN (14), with their extended codes — is
/// [`StoreError::Storage`]; a busy or locked database (SQLITE_BUSY 5, SQLITE_LOCKED 6), an
/// I/O error of sqlx's, a pool timed out or closed and a crashed worker are
/// [`StoreError::Unavailable`]: both UNAVAILABLE to callers. Anything else is
/// [`StoreError::Database`].
fn interpret(e: sqlx::Error) -> StoreError {
    let code = match &e {
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|c| c.parse::<i64>().ok())
            .map(|code| code & 0xff),
        _ => None,
    };
    let unavailable = matches!(code, Some(5 | 6))
        || matches!(
            e,
            sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::WorkerCrashed
        );
    if matches!(code, Some(8 | 10 | 13 | 14)) {
        StoreError::Storage(e)
    } else if unavailable {
        StoreError::Unavailable(e)
    } else {
        StoreError::Database(e)
    }
}

#[async_trait]
impl Lifecycle for SqliteDriver {
    /// While the last write failed for the storage, one real write (`writable`); otherwise a
    /// statement on a reader.
    async fn ping(&self) -> Result<(), StoreError> {
        if self.writable.failing() {
            return self.writable.probe(&self.writer).await;
        }
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(interpret)?;
        Ok(())
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.writer)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
