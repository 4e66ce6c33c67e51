//! One claimd per SQLite file: an exclusive lock on `<database>.lock`, holding the owner's
//! process id so a second process can say who holds it. The lock file is 0600 (created so,
//! tightened on the open file if an older claimd left it wider); a symbolic link at its
//! name is refused, never followed (the file is truncated and written).

use crate::private_fs::Links;
use crate::store::StoreError;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Held for as long as this process serves the database; released when dropped (or when the
/// process dies, however it dies).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Takes the lock beside `database`, or says which process holds it.
pub fn lock(database: &Path) -> Result<FileLock, StoreError> {
    let path = lock_path(database);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    let links = Links::Refuse("remove it (claimd creates the lock file itself)");
    let opened = crate::private_fs::open(&path, &mut options, links).and_then(|(file, meta)| {
        crate::private_fs::tighten(&file, &meta)?;
        Ok(file)
    });
    let dir = path.parent().unwrap_or(Path::new("."));
    let doing = format!("cannot open lock file {}", path.display());
    let mut file = opened.map_err(|e| super::open_error(doing, dir, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "another process".to_owned(),
                pid => format!("process {pid}"),
            };
            return Err(StoreError::Open(format!(
                "{} is in use by claimd {holder} (lock file {}); a SQLite database serves one \
                 claimd process — use PostgreSQL for several replicas",
                database.display(),
                path.display()
            )));
        }
        Err(TryLockError::Error(e)) => {
            return Err(StoreError::Open(format!(
                "cannot lock {}: {e}",
                path.display()
            )));
        }
    }
    let write_pid = |file: &mut File| -> std::io::Result<()> {
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        file.sync_all()
    };
    write_pid(&mut file)
        .map_err(|e| StoreError::Open(format!("cannot write lock file {}: {e}", path.display())))?;
    Ok(FileLock { _file: file })
}

fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}
