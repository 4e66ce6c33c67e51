//! PROXY protocol v2 through Debian's `haproxy` (TCP mode, `send-proxy-v2`, connecting to
//! claimd from the trusted 127.0.0.9): callers from 127.0.0.2 and 127.0.0.3 are two
//! sources; one over `--max-connections-per-source` is capped while the other connects. A
//! trusted peer without a header, or silent, is closed; a PROXY header from an untrusted
//! peer is refused.

use super::{health, program, wait_for_port};
use crate::common::app::{Backend, TestApp};
use crate::common::http2::tcp_from;
use crate::common::process::free_addr;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where HAProxy connects to claimd from: the one trusted address.
const PROXY_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9));

fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// claimd trusting 127.0.0.9 to send PROXY v2 headers, at most 2 connections per source
/// and a 1 s first-bytes timeout.
async fn claimd_behind_haproxy() -> TestApp {
    TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|config| {
            let trusted = claimd::mesh::TrustedProxies(vec!["127.0.0.9/32".parse().expect("CIDR")]);
            config.connections.trusted_proxies = trusted.clone();
            config.connections.proxy_protocol = true;
            config.connections.max_connections_per_source = 2;
            config.connections.first_bytes_timeout = Some(Duration::from_secs(1));
            config.mesh.trusted_proxies = trusted;
            config.mesh.proxy_protocol = true;
        })
        .spawn()
        .await
}

/// HAProxy in TCP mode in front of `claimd`, killed when dropped.
struct Haproxy {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn haproxy(claimd: SocketAddr) -> Haproxy {
    let bin = program("haproxy", "haproxy");
    let addr = free_addr();
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("haproxy.cfg");
    let text = format!(
        "global\n  maxconn 256\n\
         defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
         frontend f\n  bind {addr}\n  default_backend b\n\
         backend b\n  server claimd {claimd} send-proxy-v2 source {PROXY_SOURCE}\n"
    );
    std::fs::write(&cfg, text).expect("write haproxy.cfg");
    let child = Command::new(bin)
        .arg("-db")
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    wait_for_port(addr).await;
    Haproxy {
        child,
        addr,
        _dir: dir,
    }
}

#[tokio::test]
async fn callers_behind_haproxy_are_limited_each_by_the_address_of_the_proxy_header() {
    let app = claimd_behind_haproxy().await;
    let proxy = haproxy(app.addr).await;
    // Two connections from 127.0.0.2 through HAProxy: both served, held open.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (code, send) = health(tcp_from(loopback(2), proxy.addr).await).await;
        assert_eq!(code, Some(tonic::Code::Ok), "127.0.0.2 within its cap");
        held.push(send);
    }
    // A third from 127.0.0.2 is over its cap: claimd closes it, HAProxy passes that on.
    let (code, _) = health(tcp_from(loopback(2), proxy.addr).await).await;
    assert_eq!(code, None, "a third connection of 127.0.0.2 was served");
    // 127.0.0.3, behind the same proxy, is its own source.
    for _ in 0..2 {
        let (code, send) = health(tcp_from(loopback(3), proxy.addr).await).await;
        assert_eq!(
            code,
            Some(tonic::Code::Ok),
            "127.0.0.3 was capped with 127.0.0.2"
        );
        held.push(send);
    }
    drop(held);
}

#[tokio::test]
async fn a_trusted_peer_without_a_proxy_header_is_closed_and_an_untrusted_one_with_it_refused() {
    let app = claimd_behind_haproxy().await;
    // HTTP/2 straight from the trusted address: not a PROXY header.
    let (code, _) = health(tcp_from(PROXY_SOURCE, app.addr).await).await;
    assert_eq!(
        code, None,
        "a trusted peer was served without a PROXY header"
    );
    // Silent: closed by the first-bytes timeout (1 s).
    let mut silent = tcp_from(PROXY_SOURCE, app.addr).await;
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "still open after 5 s: {read:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A PROXY header from an untrusted peer naming someone else: not believed, not served.
    let mut header = claimd::listener::proxy::SIGNATURE.to_vec();
    header.extend([
        0x21, 0x11, 0, 12, 127, 0, 0, 5, 127, 0, 0, 1, 0x30, 0x39, 0, 80,
    ]);
    let mut forged = tcp_from(loopback(4), app.addr).await;
    forged.write_all(&header).await.expect("write the header");
    let (code, _) = health(forged).await;
    assert_eq!(code, None, "an untrusted peer's PROXY header was accepted");
    // The plain client (127.0.0.1, untrusted) is still served as itself.
    let (code, _) = health(tcp_from(loopback(1), app.addr).await).await;
    assert_eq!(code, Some(tonic::Code::Ok));
}
