//! The files claimd reads at start besides TLS's (`tls_startup.rs`): the seal keys
//! (`--seal-key-file`, `CLAIMD_SEAL_KEYS`, the data directory's `seal.key`) and the policy
//! file (`--config`). Unknown fields and bad values in a policy file are in
//! `policies.rs` (`serve_refuses_to_start_with_a_bad_policy_file`); a read-only data
//! directory is in `faults_disk.rs`.

use super::{assert_names, error_line, refused, serve_in};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A file `name` in `dir` holding `text`, with mode `mode`.
fn file(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a test file");
    let permissions = std::fs::Permissions::from_mode(mode);
    std::fs::set_permissions(&path, permissions).expect("chmod a test file");
    path
}

/// A base64 key of `len` bytes that no message may show.
fn key_of(len: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(vec![0x5a; len])
}

#[tokio::test]
async fn a_seal_key_file_that_is_missing_or_unusable_is_named_with_its_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let short = key_of(16);
    let cases = [
        (dir.path().join("gone.key"), "No such file or directory"),
        (
            file(dir.path(), "b64.key", "not*base64!\n", 0o600),
            "line 1: not standard base64",
        ),
        (
            file(dir.path(), "short.key", &format!("{short}\n"), 0o600),
            "line 1: 16 bytes, expected 32",
        ),
        (
            file(dir.path(), "open.key", &format!("{}\n", key_of(32)), 0o644),
            "mode 644 lets other users read it: run `chmod 600",
        ),
    ];
    for (path, problem) in cases {
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.arg("--seal-key-file").arg(&path);
        let log = refused(cmd).await;
        let line = error_line(&log);
        assert_names(
            line,
            &[&format!("--seal-key-file {}", path.display()), problem],
        );
        assert!(!line.contains(&short), "{line} shows the key");
        assert!(!line.contains(&key_of(32)), "{line} shows the key");
    }
}

#[tokio::test]
async fn seal_keys_in_the_environment_that_are_unusable_name_the_variable_and_what_to_do() {
    let short = key_of(31);
    for (keys, problem) in [
        (
            short.clone(),
            "entry 1 of CLAIMD_SEAL_KEYS: 31 bytes, expected 32",
        ),
        (
            format!("{},%%%", key_of(32)),
            "entry 2 of CLAIMD_SEAL_KEYS: not standard base64",
        ),
    ] {
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.env("CLAIMD_SEAL_KEYS", &keys);
        let log = refused(cmd).await;
        let line = error_line(&log);
        assert_names(line, &[problem, "openssl rand -base64 32"]);
        assert!(
            !line.contains(&short) && !line.contains(&key_of(32)),
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_data_directory_key_file_that_cannot_be_made_names_the_data_directory() {
    let data = tempfile::tempdir().expect("temp dir");
    // No keys from the flag or the environment: claimd generates `seal.key` there first.
    let mut cmd = serve_in(data.path());
    super::unprivileged(&mut cmd, data.path(), false);
    let log = refused(cmd).await;
    assert_names(
        error_line(&log),
        &[
            "the seal key file",
            "in the data directory (--data-dir)",
            "Permission denied",
            "--seal-key-file or CLAIMD_SEAL_KEYS",
        ],
    );
}

#[tokio::test]
async fn a_policy_file_that_is_missing_or_not_toml_is_named_with_its_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            dir.path().join("gone.toml"),
            "--config: cannot read the policy file",
        ),
        (
            file(dir.path(), "bad.toml", "[default]\nlease = \n", 0o600),
            "--config: policy file",
        ),
    ];
    for (path, named) in cases {
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.arg("--config").arg(&path);
        let log = refused(cmd).await;
        assert_names(error_line(&log), &[named, &path.display().to_string()]);
    }
}
