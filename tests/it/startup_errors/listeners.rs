//! `--listen`, `--health-listen`, `--metrics-listen` and `--console-listen`: an address in use, a
//! port below 1024 without the privilege, an address this machine does not have.

use super::{assert_names, error_line, refused, serve_in};
use std::net::{SocketAddr, TcpListener};

/// A loopback address another socket holds for as long as the listener lives.
fn taken() -> (TcpListener, SocketAddr) {
    // Binding port 0 on loopback always succeeds on a test machine.
    let holder = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let addr = holder.local_addr().expect("bound address");
    (holder, addr)
}

#[tokio::test]
async fn a_listen_address_in_use_is_named_with_its_flag() {
    for flag in [
        "--listen",
        "--health-listen",
        "--metrics-listen",
        "--console-listen",
    ] {
        let data = tempfile::tempdir().expect("temp dir");
        let (_holder, addr) = taken();
        let mut cmd = serve_in(data.path());
        cmd.arg(flag).arg(addr.to_string());
        let log = refused(cmd).await;
        assert_names(
            error_line(&log),
            &[
                &format!("cannot listen on {addr} ({flag})"),
                "the address is in use",
                &format!("pass another {flag}"),
            ],
        );
    }
}

#[tokio::test]
async fn an_address_not_on_this_machine_is_named_with_its_flag() {
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no machine has it.
    let absent = "192.0.2.1:50051";
    for flag in [
        "--listen",
        "--health-listen",
        "--metrics-listen",
        "--console-listen",
    ] {
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.arg(flag).arg(absent).arg("--allow-unauthenticated");
        let log = refused(cmd).await;
        assert_names(
            error_line(&log),
            &[
                &format!("cannot listen on {absent} ({flag})"),
                "192.0.2.1 is not an address of this machine",
            ],
        );
    }
}

/// The first port an unprivileged process may bind, as the kernel is set.
fn unprivileged_port_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1024)
}

#[tokio::test]
async fn a_privileged_port_without_the_privilege_is_named_with_its_flag() {
    let start = unprivileged_port_start();
    assert!(
        start > 1,
        "this kernel lets anyone bind any port: the case cannot happen here"
    );
    let addr = format!("127.0.0.1:{}", start - 1);
    for flag in [
        "--listen",
        "--health-listen",
        "--metrics-listen",
        "--console-listen",
    ] {
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.arg(flag).arg(&addr);
        super::unprivileged(&mut cmd, data.path(), true);
        let log = refused(cmd).await;
        assert_names(
            error_line(&log),
            &[
                &format!("cannot listen on {addr} ({flag})"),
                "ports below 1024 need root or CAP_NET_BIND_SERVICE",
            ],
        );
    }
}

#[tokio::test]
async fn a_console_payload_namespace_that_is_not_a_name_is_named_with_its_flag() {
    let data = tempfile::tempdir().expect("temp dir");
    let mut cmd = serve_in(data.path());
    cmd.args(["--console-show-payloads", "stripe,not a name"]);
    let log = refused(cmd).await;
    assert_names(
        error_line(&log),
        &[
            "--console-show-payloads",
            "\"not a name\" is not a namespace",
        ],
    );
}
