//! Issue 29 item 6, start-up errors name what to fix: every way `claimd serve` (and
//! `migrate`) can fail before it serves, through the real binary. Each refusal exits
//! non-zero within a bound, prints one line naming the flag (or environment variable) and
//! the address or file, says what to do, and shows no panic, no backtrace and no secret.
//! The listeners are in `startup_errors/listeners.rs`, the data directory, seal keys and
//! policy file in `startup_errors/files.rs`, the database in `startup_errors/database.rs`
//! (the TLS files in `tls_startup.rs`).

mod database;
mod files;
mod listeners;
mod mesh;

use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use std::process::Command;

/// `claimd serve` on a free loopback port (`CLAIMD_LISTEN`, so a `--listen` flag wins) with
/// the data directory `data` (`CLAIMD_DATA_DIR`, likewise), as an operator would start it,
/// with `RUST_BACKTRACE=1` so that a backtrace, if one were printed, shows.
fn serve_in(data: &std::path::Path) -> Command {
    let mut cmd = claimd();
    cmd.arg("serve")
        .env("CLAIMD_LISTEN", free_addr().to_string())
        .env("CLAIMD_DATA_DIR", data)
        .env("RUST_BACKTRACE", "1");
    cmd
}

/// Runs `cmd`, demands that it exits non-zero within [`PATIENCE`] with an `Error:` line
/// and no panic or backtrace, and returns what it printed.
async fn refused(cmd: Command) -> String {
    let mut child = Claimd::spawn(cmd);
    let status = child.wait_for_exit(PATIENCE).await;
    let log = child.log();
    let status = status.unwrap_or_else(|| panic!("claimd kept running:\n{log}"));
    assert!(!status.success(), "exit {status}:\n{log}");
    assert!(log.contains("Error: "), "no error line:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(!log.contains("backtrace"), "{log}");
    assert!(!log.contains("Caused by"), "not one line:\n{log}");
    log
}

/// The line of `log` that says why claimd stopped.
fn error_line(log: &str) -> &str {
    log.lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_else(|| panic!("no error line:\n{log}"))
}

/// Asserts that `line` holds every one of `parts`.
#[track_caller]
fn assert_names(line: &str, parts: &[&str]) {
    for part in parts {
        assert!(line.contains(part), "{line:?} does not say {part:?}");
    }
}

/// Makes `cmd` run without privileges, with `data` writable by it or not. Run as root (as
/// in a container), `cmd` runs as `nobody`, owning `data` if it is to be writable; run as
/// anyone else, `cmd` runs as that user, and `data` is made read-only to it if it is not
/// to be writable.
fn unprivileged(cmd: &mut Command, data: &std::path::Path, writable: bool) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    const NOBODY: u32 = 65534;
    if nix::unistd::geteuid().is_root() {
        if writable {
            // Root may give any file away.
            std::os::unix::fs::chown(data, Some(NOBODY), Some(NOBODY)).expect("chown");
        }
        cmd.uid(NOBODY).gid(NOBODY);
    } else if !writable {
        let read_only = std::fs::Permissions::from_mode(0o500);
        std::fs::set_permissions(data, read_only).expect("chmod the test's own directory");
    }
}
