//! The console over TLS: when the gRPC listener has `--tls-cert`, the console serves TLS
//! with the same certificate (ALPN `http/1.1`), its session cookie is `Secure`, and a
//! plaintext request to it gets no page.

use super::page::text;
use crate::common::app::{Backend, TestApp};
use crate::common::certs::Pki;
use crate::common::http1;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A TLS connector trusting `pki`'s CA, offering `http/1.1`.
fn connector(pki: &Pki) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(&pki.ca).expect("the CA") {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_console_serves_tls_and_its_cookie_is_secure() {
    let pki = Pki::new();
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            pki.serve_tls(c, false);
            c.console_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        })
        .spawn()
        .await;
    let (_, key) = app.create_key("acme", None).await;
    let console = app.console_addr.expect("the console is on");

    let tcp = tokio::net::TcpStream::connect(console).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("a name");
    let mut tls = connector(&pki)
        .connect(name, tcp)
        .await
        .expect("a TLS handshake");
    let body = serde_urlencoded::to_string([("key", key.as_str())]).unwrap();
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        console.port(),
        body.len()
    );
    http1::send(&mut tls, &head, body.as_bytes()).await;
    let answer = http1::answer(&mut tls, Duration::from_secs(10))
        .await
        .expect("an answer");
    assert_eq!(answer.status, 303, "{}", text(&answer));
    let cookie = super::page::header(&answer, "set-cookie").expect("a session cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));

    // Plain HTTP to the TLS console is not served a page.
    let mut plain = tokio::net::TcpStream::connect(console).await.unwrap();
    http1::send(
        &mut plain,
        "GET /login HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    )
    .await;
    let answer = http1::answer(&mut plain, Duration::from_secs(15)).await;
    assert!(
        answer.is_none_or(|a| a.status != 200),
        "a plaintext page over the TLS console"
    );
}
