//! Files and directories only their owner may read: the embedded store's data directory
//! (0700 when claimd creates it), its database, WAL, shared-memory and lock files (0600) and
//! the generated seal key file (0600, created exclusively, never through a symlink). Modes
//! are set explicitly rather than through the process umask, which is process-wide and
//! would race with every other thread creating files. Elsewhere than Unix these are the
//! plain `std::fs` calls.

use std::fs::File;
use std::io;
use std::path::Path;

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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

/// Makes an existing `path` 0600 (only the owner may read or write it); nothing if it does
/// not exist.
pub fn restrict(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_file() && meta.permissions().mode() & 0o077 != 0 => {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}
