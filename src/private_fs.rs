//! Files and directories only their owner may read: the embedded store's data directory
//! (0700 when claimd creates it), its database, WAL, shared-memory and lock files (0600) and
//! the seal key file (0600, generated exclusively). Modes are set explicitly rather than
//! through the process umask, which is process-wide and would race with every other thread
//! creating files.
//!
//! A file claimd keeps in its data directory is opened with `O_NOFOLLOW` — a symbolic link
//! there is refused with an error naming the file and what to do, never followed (it could
//! point at another user's file, to be truncated, read as a key or made a database) — and
//! checked on the open file itself (`fstat`, `fchmod`), so nothing can be swapped in between
//! a check and a change. Elsewhere than Unix these are the plain `std::fs` calls.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

/// Whether a symbolic link at a path is refused (saying what to do instead) or followed.
#[derive(Debug, Clone, Copy)]
pub enum Links {
    /// Refused; the text says what to do instead.
    Refuse(&'static str),
    /// Followed: the operator named the path (e.g. `--seal-key-file` to a mounted secret).
    Follow,
}

/// Creates `dir` and its missing parents, each 0700; existing directories are left as they
/// are.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates `path` for writing, 0600: fails if anything (a file, a symlink) is there already.
pub fn create_new(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

/// Opens `path` with `options` (created 0600 if they create it), refusing a symbolic link
/// at it unless `links` follows them; what was opened must be a regular file, checked on the
/// open file. Returns the file and its metadata. (`O_NONBLOCK`, which changes nothing for a
/// regular file, keeps a FIFO planted at the path from blocking the open.)
pub fn open(path: &Path, options: &mut OpenOptions, links: Links) -> io::Result<(File, Metadata)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
        let no_follow = match links {
            Links::Refuse(_) => libc::O_NOFOLLOW,
            Links::Follow => 0,
        };
        options.custom_flags(no_follow | libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| match links {
        Links::Refuse(remedy) if is_link_refused(&e) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is a symbolic link, which claimd does not follow here: {remedy}"),
        ),
        _ => e,
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is not a regular file",
        ));
    }
    Ok((file, meta))
}

/// Whether `e` is what opening a symbolic link with `O_NOFOLLOW` fails with.
fn is_link_refused(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::EMLINK))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Makes the open `file` 0600 if group or others may access it (`fchmod` on the file
/// itself, never on a path).
pub fn tighten(file: &File, meta: &Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (file, meta);
    Ok(())
}

/// Refused unless the file of `meta` is owned by the user claimd runs as.
pub fn owned_by_this_user(meta: &Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions, touches no memory and cannot fail.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "is owned by uid {}, not by the user claimd runs as (uid {me}): only a \
                     file of that user's is trusted here; `chown` it to that user",
                    meta.uid()
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    Ok(())
}

/// Makes an existing `path` 0600 if it is wider, on the open file; nothing if it does not
/// exist. A symbolic link at `path` is refused with `remedy`, as is anything but a regular
/// file.
pub fn restrict(path: &Path, remedy: &'static str) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    match open(path, &mut options, Links::Refuse(remedy)) {
        Ok((file, meta)) => tighten(&file, &meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
