//! Seal key files: one base64 key per line, the current one first, `#` comments allowed.
//! The embedded store generates one (mode 0600, its directory 0700 when created) on first
//! start; it is written under a temporary name and linked into place, so a crash never
//! leaves a half-written key file and two processes starting at once end up with the same
//! key. The temporary file is created exclusively (`O_CREAT|O_EXCL`, `O_NOFOLLOW`, 0600):
//! a file or symlink left at its name is removed (never followed or reused) and creation
//! tried once more.
//!
//! A key file is checked on the open file itself (docs/DESIGN.md §3.6.2): a regular file,
//! owned by the user claimd runs as, that group and others cannot access; otherwise it is
//! refused with a message naming it and saying what to do. The data directory's `seal.key`
//! must also not be a symbolic link (one could lend claimd another user's key); a file named
//! with `--seal-key-file` may be one (mounted secrets are), the operator chose its path.

use super::ring::{KeyError, KeyRing, encode_key, generate_key};
use crate::private_fs::Links;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The name of the generated key file, beside the embedded database.
pub const KEY_FILE_NAME: &str = "seal.key";

/// What to do about a symbolic link at the data directory's key file.
const KEY_FILE_LINK: &str = "put the key file itself there (owned by the user claimd runs as, \
     mode 600), or name the file with --seal-key-file";

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::File {
        path: path.to_owned(),
        source,
    }
}

/// Reads the key ring in `path` (`--seal-key-file`: a symbolic link is followed); refuses a
/// file that group or others may access (the error names the file and says to `chmod 600`
/// it) or that another user owns.
pub fn load(path: &Path) -> Result<KeyRing, KeyError> {
    read(path, Links::Follow)
}

/// Reads the key ring of the data directory's key file `path`, as [`load`] does but
/// refusing a symbolic link.
pub fn load_in_data_dir(path: &Path) -> Result<KeyRing, KeyError> {
    read(path, Links::Refuse(KEY_FILE_LINK))
}

fn read(path: &Path, links: Links) -> Result<KeyRing, KeyError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let (mut file, meta) =
        crate::private_fs::open(path, &mut options, links).map_err(file_error(path))?;
    crate::private_fs::owned_by_this_user(&meta).map_err(file_error(path))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            let reason = format!(
                "mode {mode:o} lets other users read it: run `chmod 600 {}` (owned by the \
                 user claimd runs as)",
                path.display()
            );
            let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, reason);
            return Err(file_error(path)(denied));
        }
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(file_error(path))?;
    KeyRing::parse_file(&text).map_err(|e| match e {
        KeyError::Empty => KeyError::File {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "holds no key"),
        },
        other => other,
    })
}

/// Reads the key ring of the data directory's key file `path` (as [`load_in_data_dir`]),
/// first generating a file with one new key (mode 0600) if there is none. Returns the ring and whether the file was created now.
pub fn load_or_create(path: &Path) -> Result<(KeyRing, bool), KeyError> {
    match load_in_data_dir(path) {
        Err(KeyError::File { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        loaded => return Ok((loaded?, false)),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private_fs::create_dir_all(dir).map_err(file_error(dir))?;
    }
    let temp = temp_path(path);
    let written = write_new(&temp);
    let linked = written.and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                // Make the new directory entry durable; failing that, the file is still there.
                let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
            }
            Ok((load_in_data_dir(path)?, true))
        }
        // Another process created it first (or something else is there): use it if it is a
        // key file of ours.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok((load_in_data_dir(path)?, false))
        }
        Err(e) => Err(file_error(path)(e)),
    }
}

/// The temporary name the new key file is written under before it is linked into place:
/// `<path>.tmp-<process id>`.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".tmp-{}", std::process::id()));
    PathBuf::from(name)
}

/// Creates `path` exclusively and writes a new key into it. Whatever was at `path` (a stale
/// temporary file, or a file or symlink planted there) is removed, not followed, and the
/// exclusive creation tried once more.
fn write_new(path: &Path) -> std::io::Result<()> {
    let mut file = match crate::private_fs::create_new(path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            crate::private_fs::create_new(path)?
        }
        other => other?,
    };
    writeln!(
        file,
        "# claimd seal keys: one base64 AES-256 key per line, the current key first; keys\n\
         # after it only open what they sealed. Keep this file secret, and keep it with the\n\
         # database's backups: without it the sealed payloads cannot be read.\n{}",
        encode_key(&generate_key())
    )?;
    file.sync_all()
}
