//! docs/DESIGN.md §5 TLS at start: the TLS flags go together, and a missing, unreadable or invalid PEM
//! file stops claimd with an error naming the flag, never the file's contents.

use crate::common::app::{Backend, test_config};
use crate::common::certs::Pki;
use crate::common::process::{Claimd, PATIENCE, claimd, free_addr};
use claimd::server::Application;
use std::net::SocketAddr;
use std::path::PathBuf;

#[tokio::test]
async fn unreadable_or_invalid_pem_files_stop_the_start_naming_the_flag() {
    let pki = Pki::new();
    let secret = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWNvbnRlbnRz!!\n-----END PRIVATE KEY-----\n";
    let bad = pki.file("garbage.pem", secret);
    let gone = pki.ca.with_file_name("does-not-exist.pem");
    // Generating a key pair only fails if the system has no randomness.
    let other_key = rcgen::KeyPair::generate().expect("key pair");
    let other = pki.file("other.key", &other_key.serialize_pem());
    let (cert, key, ca) = (&pki.server_cert, &pki.server_key, &pki.ca);
    let s = |p: &PathBuf| Some(p.clone());
    let cases = [
        ("--tls-cert", s(&gone), s(key), None),
        ("--tls-cert", s(&bad), s(key), None),
        ("--tls-cert", s(key), s(key), None),
        ("--tls-key", s(cert), s(&gone), None),
        ("--tls-key", s(cert), s(&bad), None),
        ("--tls-key", s(cert), s(cert), None),
        ("--tls-cert/--tls-key", s(cert), s(&other), None),
        ("--tls-client-ca", s(cert), s(key), s(&gone)),
        ("--tls-client-ca", s(cert), s(key), s(&bad)),
        ("--tls-key", s(cert), None, None),
        ("--tls-key", s(cert), None, s(ca)),
        ("--tls-cert", None, s(key), None),
        ("--tls-client-ca", None, None, s(ca)),
    ];
    for (flag, cert, key, client_ca) in cases {
        let (url, _dir) = Backend::Sqlite.fresh_database().await;
        let mut config = test_config(&url);
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        (config.tls_cert, config.tls_key, config.tls_client_ca) = (cert, key, client_ca);
        let error = match Application::build(config).await {
            Ok(_) => panic!("claimd started although {flag} is wrong"),
            Err(e) => format!("{e:#}"),
        };
        assert!(error.contains(flag), "{error:?} does not name {flag}");
        assert!(!error.contains("c2VjcmV0"), "{error:?} shows the file");
        assert!(!error.contains("BEGIN"), "{error:?} shows the file");
    }
}

/// Runs the binary with `tls_args` (and a fresh data directory), demands a non-zero exit
/// with nothing written to the data directory, and returns what it printed.
async fn refused_start(tls_args: &[&std::ffi::OsStr]) -> String {
    // A test cannot run claimd without somewhere to put its data.
    let data = tempfile::tempdir().expect("temp dir");
    let mut cmd = claimd();
    cmd.arg("--listen")
        .arg(free_addr().to_string())
        .arg("--data-dir")
        .arg(data.path())
        .args(tls_args);
    let mut child = Claimd::spawn(cmd);
    let status = child.wait_for_exit(PATIENCE).await;
    let log = child.log();
    let status = status.unwrap_or_else(|| panic!("claimd kept running:\n{log}"));
    assert!(!status.success(), "exit {status}:\n{log}");
    // The test created the directory, so it can be listed.
    let mut created = std::fs::read_dir(data.path()).expect("data dir");
    assert!(
        created.next().is_none(),
        "files created before refusing:\n{log}"
    );
    log
}

#[tokio::test]
async fn the_binary_with_tls_cert_but_no_tls_key_exits_non_zero_naming_the_missing_flag() {
    let pki = Pki::new();
    let log = refused_start(&["--tls-cert".as_ref(), pki.server_cert.as_os_str()]).await;
    assert!(log.contains("--tls-key"), "{log}");
}

#[tokio::test]
async fn the_binary_with_an_invalid_key_file_exits_before_touching_the_data_dir() {
    let pki = Pki::new();
    let bad = pki.file("bad.key", "not a key\n");
    let args = [
        "--tls-cert".as_ref(),
        pki.server_cert.as_os_str(),
        "--tls-key".as_ref(),
        bad.as_os_str(),
    ];
    let log = refused_start(&args).await;
    assert!(log.contains("--tls-key"), "{log}");
    assert!(!log.contains("not a key"), "the log shows the file:\n{log}");
}
