//! docs/DESIGN.md §5 TLS: `--tls-cert`/`--tls-key` serve gRPC over TLS (rustls), `--tls-client-ca`
//! refuses clients without a certificate from that CA at the handshake, and health on the
//! main listener follows the same rules. `--health-listen`: `health_listener.rs`.

use crate::common::app::{Backend, TestApp, tls_channel};
use crate::common::certs::Pki;
use crate::common::probe::{health_in_plaintext, health_over_tls, plaintext_channel, wait_for};
use claimd::config::Config;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, Decision};
use std::net::SocketAddr;
use tonic::transport::ClientTlsConfig;
use tonic_health::pb::health_check_response::ServingStatus;

const SERVICE: &str = "claimd.v1.ClaimService";

/// A claimd serving TLS with the test PKI's server certificate; with `mtls`, it also requires
/// client certificates from the test CA.
async fn spawn_tls(pki: &Pki, mtls: bool) -> TestApp {
    TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c: &mut Config| pki.serve_tls(c, mtls))
        .spawn()
        .await
}

fn claim_request(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "tls".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    }
}

/// A Claim over TLS with `tls`: its decision, or the error of the connection or the call.
async fn claim_over_tls(
    addr: SocketAddr,
    tls: ClientTlsConfig,
    key: &str,
) -> Result<Decision, String> {
    let channel = tls_channel(addr, tls)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let response = ClaimServiceClient::new(channel)
        .claim(claim_request(key))
        .await
        .map_err(|s| format!("call: {s:?}"))?;
    Ok(response.into_inner().decision())
}

/// Asserts that the server refused the TLS handshake with the fatal `alert`. Over TLS 1.3 the
/// client finishes its side first, so the alert arrives with the first call, as a transport
/// error (UNKNOWN) rather than a gRPC status the server sent.
fn assert_refused<T: std::fmt::Debug>(outcome: &Result<T, String>, alert: &str) {
    match outcome {
        Err(e) => assert!(e.contains(&format!("received fatal alert: {alert}")), "{e}"),
        Ok(v) => panic!("served, answering {v:?}; expected the {alert} alert"),
    }
}

/// Asserts that a plaintext client got nothing from a TLS port: the server reads the HTTP/2
/// preface as a broken TLS record and closes the connection.
fn assert_plaintext_refused<T: std::fmt::Debug>(outcome: &Result<T, String>) {
    match outcome {
        Err(e) => assert!(
            e.contains("code: Unknown") && e.contains("transport error"),
            "{e}"
        ),
        Ok(v) => panic!("a plaintext call was answered: {v:?}"),
    }
}

#[tokio::test]
async fn a_client_trusting_the_ca_claims_over_tls() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, false).await;
    let decision = claim_over_tls(app.addr, pki.client_tls(), "a").await;
    assert_eq!(decision, Ok(Decision::Claimed));
    app.shutdown().await;
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_server_certificate_fails_at_the_handshake() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, false).await;
    let connected = tls_channel(app.addr, ClientTlsConfig::new()).await;
    let error = format!(
        "{:?}",
        connected.expect_err("connected without trusting the CA")
    );
    assert!(
        error.contains("InvalidCertificate(UnknownIssuer)"),
        "{error}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_plaintext_client_fails_against_the_tls_port() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, false).await;
    // The TLS port takes the HTTP/2 preface for a broken handshake and closes the connection.
    let outcome = match plaintext_channel(app.addr).await {
        Err(e) => Err(format!("connect: {e:?}")),
        Ok(channel) => match ClaimServiceClient::new(channel)
            .claim(claim_request("p"))
            .await
        {
            Ok(_) => Ok(()),
            Err(s) => Err(format!("call: {s:?}")),
        },
    };
    assert_plaintext_refused(&outcome);
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

#[tokio::test]
async fn with_a_client_ca_a_client_without_a_certificate_is_refused_at_the_handshake() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, true).await;
    let outcome = claim_over_tls(app.addr, pki.client_tls(), "a").await;
    assert_refused(&outcome, "CertificateRequired");
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

#[tokio::test]
async fn with_a_client_ca_a_certificate_from_another_ca_is_refused_at_the_handshake() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, true).await;
    let outcome = claim_over_tls(app.addr, pki.client_tls_as(&pki.stranger), "a").await;
    assert_refused(&outcome, "UnknownCA");
    assert_eq!(app.receipt_rows().await, 0);
    app.shutdown().await;
}

#[tokio::test]
async fn with_a_client_ca_a_certificate_from_that_ca_claims() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, true).await;
    let decision = claim_over_tls(app.addr, pki.client_tls_as(&pki.client), "a").await;
    assert_eq!(decision, Ok(Decision::Claimed));
    app.shutdown().await;
}

#[tokio::test]
async fn health_on_the_tls_port_follows_the_same_rules() {
    let pki = Pki::new();
    let app = spawn_tls(&pki, true).await;
    let trusted = tls_channel(app.addr, pki.client_tls_as(&pki.client)).await;
    // The point of mTLS: a certificate from the CA gets through.
    let trusted = trusted.expect("a client with the CA's certificate connects");
    wait_for(&trusted, "", ServingStatus::Serving).await;
    wait_for(&trusted, SERVICE, ServingStatus::Serving).await;

    let no_certificate = health_over_tls(app.addr, pki.client_tls()).await;
    assert_refused(&no_certificate, "CertificateRequired");
    let stranger = health_over_tls(app.addr, pki.client_tls_as(&pki.stranger)).await;
    assert_refused(&stranger, "UnknownCA");
    assert_plaintext_refused(&health_in_plaintext(app.addr).await);
    app.shutdown().await;
}
