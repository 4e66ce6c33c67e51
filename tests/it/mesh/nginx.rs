//! `X-Forwarded-For` through Debian's `nginx` (`grpc_pass`, `grpc_bind` to the trusted
//! 127.0.0.8, the header set from `$proxy_add_x_forwarded_for`): 200 callers behind it are
//! served with no refusal by the per-source connection cap, and failed authentications are
//! counted per caller, not per proxy; the same header sent straight to claimd changes
//! nothing.

use super::{program, wait_for_port};
use crate::common::app::{Backend, TestApp, connect};
use crate::common::http2::{answer, handshake, open, post, tcp_from};
use crate::common::process::free_addr;
use claimd::pb::ClaimRequest;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Where nginx connects to claimd from: the one trusted address.
const PROXY_SOURCE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 8));

/// claimd trusting 127.0.0.8, with `configure` applied after.
async fn claimd_behind_nginx(configure: impl FnOnce(&mut claimd::config::Config)) -> TestApp {
    TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|config| {
            let trusted = claimd::mesh::TrustedProxies(vec!["127.0.0.8/32".parse().expect("CIDR")]);
            config.connections.trusted_proxies = trusted.clone();
            config.mesh.trusted_proxies = trusted;
            configure(config);
        })
        .spawn()
        .await
}

/// nginx in front of `claimd` (its default upstream settings: no keepalive, a connection
/// per call), stopped when dropped.
pub struct Nginx {
    child: Child,
    /// Where callers connect (HTTP/2 without TLS).
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts nginx proxying gRPC to `claimd` from [`PROXY_SOURCE`], adding `extra` to the
/// location (e.g. an XFCC header).
pub async fn nginx(claimd: SocketAddr, extra: &str) -> Nginx {
    let bin = program("nginx", "nginx");
    let addr = free_addr();
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().display();
    let text = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {root}/nginx.pid;\n\
         error_log {root}/error.log warn;\n\
         events {{ worker_connections 2048; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {root}/body;\n\
           proxy_temp_path {root}/proxy;\n  fastcgi_temp_path {root}/fastcgi;\n\
           uwsgi_temp_path {root}/uwsgi;\n  scgi_temp_path {root}/scgi;\n\
           server {{\n    listen {addr} http2;\n    location / {{\n\
               grpc_bind {PROXY_SOURCE};\n\
               grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
               {extra}\n      grpc_pass grpc://{claimd};\n    }}\n  }}\n}}\n"
    );
    let conf = dir.path().join("nginx.conf");
    std::fs::write(&conf, text).expect("write nginx.conf");
    let child = Command::new(bin)
        .arg("-e")
        .arg(dir.path().join("error.log"))
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    wait_for_port(addr).await;
    Nginx {
        child,
        addr,
        _dir: dir,
    }
}

#[tokio::test]
async fn two_hundred_callers_behind_nginx_are_served_with_no_refusal() {
    let app = claimd_behind_nginx(|_| {}).await;
    let proxy = nginx(app.addr, "").await;
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..200 {
        let addr = proxy.addr;
        callers.spawn(async move {
            let mut client = connect(addr).await;
            let mut refused = Vec::new();
            for call in 0..5 {
                let request = ClaimRequest {
                    namespace: "nginx".into(),
                    key: format!("c{caller}-{call}"),
                    lease_ttl: Some(prost_types::Duration {
                        seconds: 30,
                        nanos: 0,
                    }),
                    ..Default::default()
                };
                if let Err(status) = client.claim(request).await {
                    refused.push(format!("{:?}: {}", status.code(), status.message()));
                }
            }
            refused
        });
    }
    let mut refused = Vec::new();
    while let Some(done) = callers.join_next().await {
        // A caller's task only panics if the test itself is broken.
        refused.extend(done.expect("a caller finishes"));
    }
    assert!(
        refused.is_empty(),
        "{} of 1000 calls refused: {:?}",
        refused.len(),
        &refused[..refused.len().min(5)]
    );
}

/// A Claim with a wrong API key from `source` to `addr`, with `headers`: its gRPC status.
async fn wrong_key(
    source: IpAddr,
    addr: SocketAddr,
    headers: &[(&str, &str)],
) -> Option<tonic::Code> {
    let (mut send, _conn) = handshake(tcp_from(source, addr).await).await;
    let mut all = vec![
        ("authorization", "Bearer cd_wrong_wrongwrongwrongwrong"),
        ("te", "trailers"),
    ];
    all.extend_from_slice(headers);
    let request = post("claimd", "Claim", "application/grpc", &all);
    let (response, _stream) = open(&mut send, request, vec![0, 0, 0, 0, 0], true).await;
    answer(response, Duration::from_secs(5)).await?.2
}

#[tokio::test]
async fn failed_authentications_behind_nginx_count_per_forwarded_caller() {
    let app = claimd_behind_nginx(|config| {
        config.auth_failure_limit = 3;
        config.auth_failure_window = Duration::from_secs(600);
    })
    .await;
    app.create_key("t", None).await;
    let proxy = nginx(app.addr, "").await;
    let (a, b) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(wrong_key(a, proxy.addr, &[]).await);
    }
    let limited = Some(tonic::Code::ResourceExhausted);
    assert_eq!(
        codes.last(),
        Some(&limited),
        "127.0.0.2 never limited: {codes:?}"
    );
    // Another caller behind the same proxy has its own budget.
    let code = wrong_key(b, proxy.addr, &[]).await;
    assert_eq!(
        code,
        Some(tonic::Code::Unauthenticated),
        "127.0.0.3 shared 127.0.0.2's limit"
    );
    // Sent straight to claimd by an untrusted peer, the header names nobody: 127.0.0.4 is
    // limited as itself whatever it claims to forward for.
    let mut codes = Vec::new();
    for i in 0..5 {
        let forged = format!("192.0.2.{i}");
        codes.push(
            wrong_key(
                IpAddr::from([127, 0, 0, 4]),
                app.addr,
                &[("x-forwarded-for", &forged)],
            )
            .await,
        );
    }
    assert_eq!(
        codes.last(),
        Some(&limited),
        "a forged X-Forwarded-For was believed: {codes:?}"
    );
}
