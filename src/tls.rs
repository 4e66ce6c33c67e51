//! TLS for the gRPC listener (rustls, through tonic's `tls-ring` feature): the flag rules
//! (`--tls-cert` and `--tls-key` together; `--tls-client-ca` only with them) and the PEM
//! files read and checked at start, so a bad file stops claimd before it serves. Errors name
//! the flag and the path, never the file's contents.
//!
//! `load` runs twice: while the configuration is validated (before the database is opened
//! or anything is written) and in `Application::build`, which serves what it read. Only ring
//! is compiled into rustls; a dependency that also enabled aws-lc-rs would make rustls's
//! provider choice ambiguous.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How long a client may take to finish the TLS handshake before the connection is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The main listener's TLS files, as the flags name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// `--tls-cert`: the certificate chain (PEM); TLS is on when this and `key` are set.
    pub cert: Option<PathBuf>,
    /// `--tls-key`: the private key of `cert` (PEM).
    pub key: Option<PathBuf>,
    /// `--tls-client-ca`: CA certificates (PEM) client certificates must chain to (mTLS).
    pub client_ca: Option<PathBuf>,
}

/// Checks which TLS flags go together, without touching the files.
pub fn check_flags(files: &TlsFiles) -> anyhow::Result<()> {
    match (&files.cert, &files.key, &files.client_ca) {
        (Some(_), None, _) => anyhow::bail!(
            "--tls-cert (CLAIMD_TLS_CERT) is set but --tls-key (CLAIMD_TLS_KEY) is not: TLS \
             needs both, plaintext neither"
        ),
        (None, Some(_), _) => anyhow::bail!(
            "--tls-key (CLAIMD_TLS_KEY) is set but --tls-cert (CLAIMD_TLS_CERT) is not: TLS \
             needs both, plaintext neither"
        ),
        (None, None, Some(_)) => anyhow::bail!(
            "--tls-client-ca (CLAIMD_TLS_CLIENT_CA) needs --tls-cert and --tls-key: client \
             certificates are only checked over TLS"
        ),
        _ => Ok(()),
    }
}

/// Reads and checks the TLS files: `None` for plaintext, otherwise the main listener's TLS
/// configuration (client certificates required when `client_ca` is set).
pub fn load(files: &TlsFiles) -> anyhow::Result<Option<ServerTlsConfig>> {
    check_flags(files)?;
    let (Some(cert), Some(key)) = (&files.cert, &files.key) else {
        return Ok(None);
    };
    let cert_pem = read("--tls-cert", cert)?;
    certificates("--tls-cert", cert, &cert_pem)?;
    let key_pem = read("--tls-key", key)?;
    if PrivateKeyDer::from_pem_slice(&key_pem).is_err() {
        anyhow::bail!(
            "--tls-key: {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        );
    }
    let mut tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(cert_pem, key_pem))
        .timeout(HANDSHAKE_TIMEOUT);
    if let Some(ca) = &files.client_ca {
        let ca_pem = read("--tls-client-ca", ca)?;
        certificates("--tls-client-ca", ca, &ca_pem)?;
        tls = tls
            .client_ca_root(Certificate::from_pem(ca_pem))
            .client_auth_optional(false);
    }
    // rustls checks what PEM parsing cannot: a usable key that matches the certificate.
    if let Err(e) = tonic::transport::Server::builder().tls_config(tls.clone()) {
        anyhow::bail!(
            "--tls-cert/--tls-key: {} and {} are not a usable certificate and key pair: {}",
            cert.display(),
            key.display(),
            error_chain(&e)
        );
    }
    Ok(Some(tls))
}

fn read(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow::anyhow!("{flag}: cannot read {}: {e}", path.display()))
}

/// At least one certificate, and every PEM section a well-formed one. The parser's own error
/// is not shown: it can quote lines of the file.
fn certificates(flag: &str, path: &Path, pem: &[u8]) -> anyhow::Result<()> {
    let parsed: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    match parsed {
        Ok(certs) if !certs.is_empty() => Ok(()),
        _ => anyhow::bail!("{flag}: {} holds no valid PEM certificate", path.display()),
    }
}

/// The error and its sources on one line (tonic's transport error hides the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
