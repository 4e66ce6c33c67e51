//! The embedded data is its owner's only (issue 17 §6), checked on the real binary started
//! under umask 022: the data directory 0700, `claimd.db`, `-wal`, `-shm`, the lock file and
//! `seal.key` 0600; files an older claimd left 0644 are tightened at start; a `seal.key`
//! readable by others stops claimd with a message naming the file; neither a file nor a
//! symlink planted at the key's temporary name makes the key readable or writes it elsewhere;
//! and (issue 27 §8) a symbolic link at the lock file's, the database's, its `-wal`'s or
//! `-shm`'s or `seal.key`'s name, or a `seal.key` another user owns, stops claimd with a
//! message naming the file, with nothing written through the link.

use crate::common::app::connect;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use claimd::pb;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    meta.permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `claimd serve` on `dir`, under umask 022 whatever the test process's is.
fn serve(dir: &Path, addr: std::net::SocketAddr) -> std::process::Command {
    let mut cmd = claimd();
    cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
        .arg(dir);
    // SAFETY: umask is async-signal-safe and touches nothing but the child's own state.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        });
    }
    cmd
}

/// Starts claimd on `dir` and writes one receipt (so the WAL has been written).
async fn serve_and_claim(dir: &Path) -> Claimd {
    let addr = free_addr();
    let claimd = Claimd::start(serve(dir, addr), addr).await;
    let request = pb::ClaimRequest {
        namespace: "modes".into(),
        key: "Ev1".into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    connect(addr)
        .await
        .claim(request)
        .await
        .expect("Claim answers");
    claimd
}

const PRIVATE_FILES: [&str; 5] = [
    "claimd.db",
    "claimd.db-wal",
    "claimd.db-shm",
    "claimd.db.lock",
    "seal.key",
];

#[tokio::test]
async fn a_fresh_data_directory_and_its_files_are_the_owners_only() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("claimd-data");
    let claimd = serve_and_claim(&data).await;
    assert_eq!(mode(&data), 0o700, "the data directory");
    for name in PRIVATE_FILES {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
    assert!(claimd.terminate().await.success());
}

#[tokio::test]
async fn database_files_an_older_claimd_left_readable_are_tightened_at_start() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("claimd-data");
    let first = serve_and_claim(&data).await;
    // An older claimd's files, as a umask of 022 made them (the key file is handled apart).
    for name in &PRIVATE_FILES[..4] {
        chmod(&data.join(name), 0o644);
    }
    let second = serve_and_claim_after(first, &data).await;
    for name in PRIVATE_FILES {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
    assert!(second.terminate().await.success());
}

/// Stops `first` with SIGKILL (leaving `-wal` and `-shm` behind) and starts another on `dir`.
async fn serve_and_claim_after(first: Claimd, dir: &Path) -> Claimd {
    first.kill_9();
    serve_and_claim(dir).await
}

#[tokio::test]
async fn a_seal_key_readable_by_others_stops_claimd_naming_the_file() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = tmp.path().join("claimd-data");
    let first = serve_and_claim(&data).await;
    assert!(first.terminate().await.success());
    let key_file = data.join("seal.key");
    chmod(&key_file, 0o644);

    let mut second = Claimd::spawn(serve(&data, free_addr()));
    let Some(status) = second.wait_for_exit(PATIENCE).await else {
        panic!(
            "claimd started with a world-readable key file:\n{}",
            second.log()
        );
    };
    let log = second.log();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&key_file.display().to_string()) && log.contains("chmod 600"),
        "{log}"
    );
}

/// `seal.key`'s temporary name in this process (the name claimd gives it: `.tmp-<pid>`).
fn temp_name(key_file: &Path) -> std::path::PathBuf {
    let mut name = key_file.as_os_str().to_owned();
    name.push(format!(".tmp-{}", std::process::id()));
    name.into()
}

#[test]
fn a_file_planted_at_the_temporary_name_does_not_make_the_key_readable() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let key_file = tmp.path().join(claimd::seal::KEY_FILE_NAME);
    let planted = temp_name(&key_file);
    std::fs::write(&planted, "planted\n").unwrap();
    chmod(&planted, 0o644);

    let (ring, created) = claimd::seal::load_or_create_key_file(&key_file).expect("a key file");
    assert!(created && !ring.ids().is_empty());
    assert_eq!(mode(&key_file), 0o600);
    assert!(!planted.exists(), "the temporary file was left behind");
}

#[test]
fn a_symlink_planted_at_the_temporary_name_is_not_followed() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let key_file = tmp.path().join(claimd::seal::KEY_FILE_NAME);
    let elsewhere = tmp.path().join("readable-by-all");
    std::fs::write(&elsewhere, "someone else's file\n").unwrap();
    chmod(&elsewhere, 0o644);
    symlink(&elsewhere, temp_name(&key_file)).unwrap();

    claimd::seal::load_or_create_key_file(&key_file).expect("a key file");
    assert_eq!(mode(&key_file), 0o600);
    let untouched = std::fs::read_to_string(&elsewhere).unwrap();
    assert_eq!(
        untouched, "someone else's file\n",
        "the key was written through the link"
    );
}

/// Starts `claimd serve` on `dir` and requires it to exit with an error within
/// [`PATIENCE`] whose message names `file` and says `problem`; returns the log.
async fn refused_naming(dir: &Path, file: &Path, problem: &str) -> String {
    let mut claimd = Claimd::spawn(serve(dir, free_addr()));
    let Some(status) = claimd.wait_for_exit(PATIENCE).await else {
        panic!(
            "claimd started with {} in place:\n{}",
            file.display(),
            claimd.log()
        );
    };
    let log = claimd.log();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains(&file.display().to_string()) && log.contains(problem),
        "{log}"
    );
    log
}

/// An empty data directory in `tmp`, as claimd makes it.
fn data_dir(tmp: &Path) -> std::path::PathBuf {
    let data = tmp.join("claimd-data");
    std::fs::create_dir(&data).unwrap();
    chmod(&data, 0o700);
    data
}

/// A file outside the data directory, readable by all, for a link in it to point at.
fn victim(tmp: &Path, contents: &str) -> std::path::PathBuf {
    let path = tmp.join("someone-elses-file");
    std::fs::write(&path, contents).unwrap();
    chmod(&path, 0o644);
    path
}

#[tokio::test]
async fn a_lock_file_symlink_stops_claimd_and_its_target_is_left_untouched() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = data_dir(tmp.path());
    let target = victim(tmp.path(), "precious\n");
    let lock = data.join("claimd.db.lock");
    symlink(&target, &lock).unwrap();

    let log = refused_naming(&data, &lock, "is a symbolic link").await;
    assert!(log.contains("remove it"), "{log}");
    let untouched = std::fs::read_to_string(&target).unwrap();
    assert_eq!(
        untouched, "precious\n",
        "the lock was written through the link"
    );
    assert_eq!(mode(&target), 0o644);
}

#[tokio::test]
async fn a_database_wal_or_shm_symlink_stops_claimd_and_nothing_is_written_through_it() {
    for name in ["claimd.db", "claimd.db-wal", "claimd.db-shm"] {
        let tmp = tempfile::tempdir().expect("temp dir");
        let data = data_dir(tmp.path());
        let target = victim(tmp.path(), "");
        let link = data.join(name);
        symlink(&target, &link).unwrap();

        refused_naming(&data, &link, "is a symbolic link").await;
        let beside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(std::fs::metadata(&target).unwrap().len(), 0, "{name}");
        assert_eq!(mode(&target), 0o644, "{name}");
        assert!(
            beside
                .iter()
                .all(|f| !f.contains("-wal") && !f.contains("-shm")),
            "{name}: {beside:?}"
        );
    }
}

/// A valid key file's contents (one fresh key).
fn key_file_text() -> String {
    let key = claimd::seal::generate_key();
    format!("{}\n", claimd::seal::encode_key(&key))
}

#[tokio::test]
async fn a_seal_key_symlink_stops_claimd_even_to_a_private_key_file() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = data_dir(tmp.path());
    let elsewhere = tmp.path().join("another.key");
    std::fs::write(&elsewhere, key_file_text()).unwrap();
    chmod(&elsewhere, 0o600);
    let key_file = data.join("seal.key");
    symlink(&elsewhere, &key_file).unwrap();

    let log = refused_naming(&data, &key_file, "is a symbolic link").await;
    assert!(log.contains("--seal-key-file"), "{log}");
    assert!(!data.join("claimd.db").exists(), "a database was made");
}

#[tokio::test]
async fn a_seal_key_owned_by_another_user_stops_claimd() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root to give a file to another user: run the tests as root (CI does)"
    );
    let tmp = tempfile::tempdir().expect("temp dir");
    let data = data_dir(tmp.path());
    let key_file = data.join("seal.key");
    std::fs::write(&key_file, key_file_text()).unwrap();
    chmod(&key_file, 0o600);
    // 65534: `nobody`, a user claimd does not run as.
    std::os::unix::fs::chown(&key_file, Some(65534), Some(65534)).unwrap();

    let log = refused_naming(&data, &key_file, "is owned by uid 65534").await;
    assert!(log.contains("chown"), "{log}");
}
