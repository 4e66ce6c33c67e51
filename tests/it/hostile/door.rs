//! Issue 27 §1, §2 against the real binary with API keys on, plaintext and TLS: a flood of
//! Connect calls without a key whose bodies never finish — HTTP/2 streams each sending
//! 32 KiB, HTTP/1.1 connections each sending 10 bytes of a declared 256 KiB — is refused
//! from the headers (401, or 429 once the address is over the failed-authentication limit)
//! and costs no body memory: the resident memory stays within [`RSS_BOUND_KIB`] of what it
//! was, at its peak during the flood and after. Callers with a key are served during and
//! after it; those of them whose bodies never finish are answered at the body deadline and
//! their HTTP/1.1 connections closed. (Before the fix the door read the bodies first: the
//! same flood held 128 MiB and every connection.)

use super::{BOUND, RSS_BOUND_KIB, Target};
use crate::common::http1;
use crate::common::http2;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncRead, AsyncWrite};

/// HTTP/2 connections of the flood, its streams on each and what each stream sends.
const H2_CONNECTIONS: usize = 100;
const STREAMS: usize = 40;
const STREAM_BYTES: usize = 32 * 1024;
/// HTTP/1.1 connections of the flood.
const H1_CONNECTIONS: usize = 200;
/// Callers with a key whose bodies never finish: HTTP/1.1 connections, HTTP/2 streams.
const KEYED_H1: usize = 20;
const KEYED_H2: usize = 10;
/// What an unfinished HTTP/1.1 body declares, and sends of it.
const DECLARED: usize = 256 * 1024;
const SENT: &[u8] = b"{\"namespa";

/// A byte stream to claimd: plain TCP or TLS.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Opens connections to a target, in TLS when it serves TLS (ALPN `h2` or `http/1.1`).
pub(super) struct Dialer {
    addr: std::net::SocketAddr,
    tls: Option<(tokio_rustls::TlsConnector, tokio_rustls::TlsConnector)>,
}

impl Dialer {
    pub(super) fn new(target: &Target) -> Dialer {
        let tls = target.pki.as_ref().map(|pki| {
            use rustls_pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(&pki.ca).expect("the CA");
            for cert in certs {
                roots
                    .add(cert.expect("a PEM certificate"))
                    .expect("a CA certificate");
            }
            let connector = |alpn: &[u8]| {
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .expect("TLS versions")
                    .with_root_certificates(roots.clone())
                    .with_no_client_auth();
                config.alpn_protocols = vec![alpn.to_vec()];
                tokio_rustls::TlsConnector::from(Arc::new(config))
            };
            (connector(b"h2"), connector(b"http/1.1"))
        });
        Dialer {
            addr: target.addr,
            tls,
        }
    }

    async fn dial(&self, h2: bool) -> Box<dyn Io> {
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("connects");
        self.over(tcp, h2).await.expect("TLS handshake")
    }

    /// A connection from the loopback address `from`, or why it could not be made.
    pub(super) async fn dial_from(
        &self,
        from: std::net::IpAddr,
        h2: bool,
    ) -> std::io::Result<Box<dyn Io>> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(from, 0))?;
        let tcp = socket.connect(self.addr).await?;
        self.over(tcp, h2).await
    }

    /// `tcp` as is, or through a TLS handshake when the target serves TLS.
    async fn over(&self, tcp: tokio::net::TcpStream, h2: bool) -> std::io::Result<Box<dyn Io>> {
        let Some((for_h2, for_h1)) = &self.tls else {
            return Ok(Box::new(tcp));
        };
        let connector = if h2 { for_h2 } else { for_h1 };
        let name = rustls_pki_types::ServerName::try_from("localhost").expect("a name");
        Ok(Box::new(connector.connect(name, tcp).await?))
    }
}

/// Samples claimd's RSS until dropped; the highest seen.
pub(super) struct Peak {
    highest: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Peak {
    pub(super) fn watch(target: &Target) -> Peak {
        let highest = Arc::new(AtomicU64::new(target.rss_kib()));
        let path = format!("/proc/{}/status", target.claimd.pid());
        let seen = highest.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(kib) = super::rss_of(&path) {
                    seen.fetch_max(kib, Ordering::Relaxed);
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        });
        Peak { highest, task }
    }

    pub(super) fn highest(&self) -> u64 {
        self.highest.load(Ordering::Relaxed)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One HTTP/2 connection's streams, each a Connect Claim with `headers` sending `bytes`
/// and never finishing; their HTTP statuses, and what keeps them open.
async fn h2_streams(
    dialer: &Dialer,
    headers: &[(&str, &str)],
    streams: usize,
    bytes: usize,
) -> (Vec<Option<u16>>, impl Sized) {
    let (mut send, conn) = http2::handshake(dialer.dial(true).await).await;
    let mut open = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..streams {
        let request = http2::post("localhost", "Claim", "application/json", headers);
        let (response, stream) = http2::open(&mut send, request, vec![b' '; bytes], false).await;
        open.push(stream);
        answers.push(http2::answer(response, BOUND));
    }
    let statuses = futures::future::join_all(answers).await;
    let statuses = statuses.into_iter().map(|a| a.map(|(s, _, _)| s)).collect();
    (statuses, (send, conn, open))
}

/// One HTTP/1.1 connection sending a Connect Claim with `headers` whose body never
/// finishes: its answer's status if claimd answered and closed the connection.
async fn h1_unfinished(dialer: &Dialer, headers: &[(&str, &str)]) -> Option<u16> {
    let mut io = dialer.dial(false).await;
    let head = http1::head("Claim", "localhost", "application/json", DECLARED, headers);
    http1::send(&mut io, &head, SENT).await;
    http1::answer(&mut io, BOUND).await.map(|a| a.status)
}

/// A whole Connect Claim with `key` over HTTP/1.1: its status.
async fn h1_claim(dialer: &Dialer, key: &str, event: &str) -> u16 {
    let bearer = format!("Bearer {key}");
    let body = format!(r#"{{"namespace":"hostile","key":"{event}"}}"#);
    let head = http1::head(
        "Claim",
        "localhost",
        "application/json",
        body.len(),
        &[("Authorization", &bearer)],
    );
    let mut io = dialer.dial(false).await;
    http1::send(&mut io, &head, body.as_bytes()).await;
    http1::answer(&mut io, BOUND).await.map_or(0, |a| a.status)
}

async fn flood_of_unfinished_bodies(tls: bool) {
    // The flood comes from one address: the per-source connection and handshake limits
    // (`hostile/stalls.rs`) are raised so that this test measures the bodies' memory.
    let args = [
        "--body-read-timeout",
        "2s",
        "--max-connections-per-source",
        "1000",
        "--max-tls-handshakes-per-source",
        "1000",
        "--max-tls-handshakes",
        "1000",
    ];
    let target = Target::start_keyed(&args, tls).await;
    let what = if tls { "TLS" } else { "plaintext" };
    let key = target.key.clone().expect("a key");
    let dialer = Dialer::new(&target);
    let peak = Peak::watch(&target);
    let started = std::time::Instant::now();

    // The flood: no key, bodies never finished, every connection kept open.
    let h2 = futures::future::join_all(
        (0..H2_CONNECTIONS).map(|_| h2_streams(&dialer, &[], STREAMS, STREAM_BYTES)),
    );
    let h1 = futures::future::join_all((0..H1_CONNECTIONS).map(|_| h1_unfinished(&dialer, &[])));
    let (flood, flood_h1) = tokio::join!(h2, h1);
    let refused = |s: &Option<u16>| matches!(s, Some(401 | 429));
    for (statuses, _) in &flood {
        assert!(statuses.iter().all(refused), "{what} h2: {statuses:?}");
    }
    let all_closed = flood_h1.iter().all(refused);
    assert!(
        all_closed,
        "{what} HTTP/1.1 (answered and closed): {flood_h1:?}"
    );
    let flooded = started.elapsed();

    // Served during the flood (its HTTP/2 connections still open) over gRPC and the door.
    target.assert_serves().await;
    assert_eq!(
        h1_claim(&dialer, &key, &format!("{what}-during")).await,
        200
    );

    // With a key, bodies that never finish are answered at the body deadline (408) and
    // their HTTP/1.1 connections closed.
    let bearer = format!("Bearer {key}");
    let keyed = [("Authorization", bearer.as_str())];
    let h1 = futures::future::join_all((0..KEYED_H1).map(|_| h1_unfinished(&dialer, &keyed)));
    let h2 = h2_streams(&dialer, &keyed, KEYED_H2, STREAM_BYTES);
    let (h1, (h2, _open)) = tokio::join!(h1, h2);
    assert!(
        h1.iter().all(|s| *s == Some(408)),
        "{what} keyed HTTP/1.1: {h1:?}"
    );
    assert!(
        h2.iter().all(|s| *s == Some(408)),
        "{what} keyed h2: {h2:?}"
    );

    let highest = peak.highest();
    drop(peak);
    println!(
        "{what}: {} h2 streams × {} KiB and {} HTTP/1.1 bodies without a key refused in {:?}; \
         RSS {} KiB before, {highest} KiB at the peak ({:+} KiB)",
        H2_CONNECTIONS * STREAMS,
        STREAM_BYTES / 1024,
        H1_CONNECTIONS,
        flooded,
        target.rss_before,
        i128::from(highest) - i128::from(target.rss_before)
    );
    assert!(
        highest < target.rss_before + RSS_BOUND_KIB,
        "{what}: RSS peaked at {highest} KiB from {} KiB",
        target.rss_before
    );
    drop(flood);
    assert_eq!(h1_claim(&dialer, &key, &format!("{what}-after")).await, 200);
    target
        .assert_survived(&format!(
            "a flood of unfinished bodies without a key ({what})"
        ))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unfinished_bodies_without_a_key_holds_no_memory_in_plaintext() {
    flood_of_unfinished_bodies(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unfinished_bodies_without_a_key_holds_no_memory_over_tls() {
    flood_of_unfinished_bodies(true).await;
}
