//! Seal key files: one base64 key per line, the current one first, `#` comments allowed.
//! The embedded store generates one (mode 0600, its directory 0700 when created) on first
//! start; it is written under a temporary name and linked into place, so a crash never
//! leaves a half-written key file and two processes starting at once end up with the same
//! key. The temporary file is created exclusively (`O_CREAT|O_EXCL`, `O_NOFOLLOW`, 0600):
//! a file or symlink left at its name is removed (never followed or reused) and creation
//! tried once more. A key file readable by group or others is refused (docs/DESIGN.md §3.6.2).

use super::ring::{KeyError, KeyRing, encode_key, generate_key};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name of the generated key file, beside the embedded database.
pub const KEY_FILE_NAME: &str = "seal.key";

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::File {
        path: path.to_owned(),
        source,
    }
}

/// Reads the key ring in `path`; refuses a file that group or others may access (the
/// error names the file and says to `chmod 600` it).
pub fn load(path: &Path) -> Result<KeyRing, KeyError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(file_error(path))?;
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
    let text = std::fs::read_to_string(path).map_err(file_error(path))?;
    KeyRing::parse_file(&text).map_err(|e| match e {
        KeyError::Empty => KeyError::File {
            path: path.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "holds no key"),
        },
        other => other,
    })
}

/// Reads the key ring in `path`, first generating a file with one new key (mode 0600) if
/// there is none. Returns the ring and whether the file was created now.
pub fn load_or_create(path: &Path) -> Result<(KeyRing, bool), KeyError> {
    if path.exists() {
        return Ok((load(path)?, false));
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
            Ok((load(path)?, true))
        }
        // Another process created it first: use its key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((load(path)?, false)),
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
