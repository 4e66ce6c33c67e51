//! Connections that hold a slot and do nothing, against the real binary (issue 27 §3, §4):
//! TLS connections that finish the handshake and then send nothing are closed at the
//! first-bytes timeout, as plaintext ones are; and one loopback source holding as many idle
//! connections, or stalled TLS handshakes, as the whole listener takes does not keep a client
//! from another loopback address (127.0.0.2) from being served — its own cap
//! (`--max-connections-per-source`, `--max-tls-handshakes-per-source`, left at their
//! defaults here) closes the rest, counted in `claimd_connections_refused_total`.

use super::{BOUND, Target};
use crate::common::certs::Pki;
use claimd::pb::Decision;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The listener's cap in the flood tests; the flood opens more than this from one source.
const CAP: usize = 150;
/// Connections the flooding source opens.
const FLOOD: usize = CAP + 20;
/// The address the other source's client connects from.
const OTHER_SOURCE: [u8; 4] = [127, 0, 0, 2];

/// A TLS client trusting `pki`'s CA, offering `h2` only, without a certificate.
fn tls_connector(pki: &Pki) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&pki.ca).expect("the CA file");
    for cert in certs {
        roots
            .add(cert.expect("a CA certificate"))
            .expect("a usable CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Whether the server closes `io` (EOF, reset or a TLS error) within `bound`, reading and
/// dropping whatever it sends until then.
async fn closed_within(io: &mut (impl AsyncRead + Unpin), bound: Duration) -> bool {
    let drain = async {
        let mut buf = [0u8; 4096];
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, drain).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_that_finish_the_handshake_and_send_nothing_are_closed_at_the_first_bytes_timeout()
 {
    let pki = Pki::new();
    let target = Target::start_tls(&pki, false, &["--first-bytes-timeout", "2s"]).await;
    let connector = tls_connector(&pki);
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("a DNS name");
    let mut silent = Vec::new();
    for _ in 0..50 {
        let tcp = TcpStream::connect(target.addr).await.expect("connects");
        let tls = connector.connect(name.clone(), tcp).await;
        let tls = tls.expect("the handshake completes");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        silent.push(tls);
    }
    // The maximum age (30 min) is the only other thing that would close them.
    let started = Instant::now();
    for (n, tls) in silent.iter_mut().enumerate() {
        assert!(
            closed_within(tls, BOUND).await,
            "silent TLS connection {n} still open after {:?}",
            started.elapsed()
        );
    }
    println!(
        "50 TLS connections silent after the handshake: all closed {:?} after the last \
         handshake (--first-bytes-timeout 2s)",
        started.elapsed()
    );
    target
        .assert_survived("50 TLS connections silent after the handshake")
        .await;
}

/// Opens [`FLOOD`] connections to `addr` from 127.0.0.1, each having sent `first`, and
/// waits until claimd has taken them up: until as many are open in three looks in a row
/// (those refused at once are closed by then), or 5 s have passed.
async fn flood_from_one_source(addr: SocketAddr, first: &[u8]) -> Vec<TcpStream> {
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        // Beyond a cap, a connect may succeed and be closed at once, or fail: both fine.
        if let Ok(mut stream) = TcpStream::connect(addr).await {
            let _ = stream.write_all(first).await;
            flood.push(stream);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut last, mut same) = (usize::MAX, 0);
    while same < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut open = 0;
        for stream in &mut flood {
            if !closed_within(stream, Duration::from_millis(1)).await {
                open += 1;
            }
        }
        same = if open == last { same + 1 } else { 0 };
        last = open;
    }
    flood
}

/// Closes `flood` and waits until its source is served again.
async fn end_flood(target: &Target, flood: Vec<TcpStream>) {
    drop(flood);
    let deadline = Instant::now() + BOUND;
    while target.claim_from(None, None).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the flooding source is never served again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_holding_idle_connections_does_not_starve_another_source() {
    // Idle connections stay until the first-bytes timeout; a minute here.
    let cap = CAP.to_string();
    let args = ["--max-connections", &cap, "--first-bytes-timeout", "60s"];
    let target = Target::start(&args).await;
    let flood = flood_from_one_source(target.addr, b"").await;

    let other = Some(IpAddr::from(OTHER_SOURCE));
    let served = target.claim_from(other, None).await;
    match served {
        Ok(decision) => assert_eq!(decision, Decision::Claimed),
        Err(s) => panic!("the other source was not served: {s:?}\n{}", target.log()),
    }
    let refused = target
        .metric(r#"claimd_connections_refused_total{reason="per_source"}"#)
        .await;
    assert!(
        refused >= (FLOOD - CAP) as f64,
        "{refused} refused per source"
    );
    println!("170 idle connections from one source: {refused} refused per source");

    end_flood(&target, flood).await;
    target
        .assert_survived("170 idle connections from one source")
        .await;
}

/// The first 40 bytes of a ClientHello: a handshake record announcing 512 bytes, and the
/// start of the message. The server waits for the rest.
fn client_hello_start() -> Vec<u8> {
    let mut hello = vec![
        0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
    ];
    hello.resize(40, 0x2a);
    hello
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_stalling_tls_handshakes_does_not_starve_another_source_with_a_certificate() {
    let pki = Pki::new();
    let cap = CAP.to_string();
    let target = Target::start_tls(&pki, true, &["--max-connections", &cap]).await;
    let flood = flood_from_one_source(target.addr, &client_hello_start()).await;

    let other = Some(IpAddr::from(OTHER_SOURCE));
    let served = target.claim_from(other, None).await;
    match served {
        Ok(decision) => assert_eq!(decision, Decision::Claimed),
        Err(s) => panic!("the other source was not served: {s:?}\n{}", target.log()),
    }
    let series = r#"claimd_connections_refused_total{reason="tls_handshakes_per_source"}"#;
    let refused = target.metric(series).await;
    assert!(refused > 0.0, "{refused} handshakes refused per source");
    let per_source = r#"claimd_connections_refused_total{reason="per_source"}"#;
    println!(
        "170 stalled TLS handshakes from one source: {refused} refused by the handshakes \
         per source, {} by the connections per source",
        target.metric(per_source).await
    );

    end_flood(&target, flood).await;
    target
        .assert_survived("170 stalled TLS handshakes from one source")
        .await;
}
