//! TLS for the main listener (rustls with ring, handshakes in [`accept`]): the flag rules
//! (`--tls-cert` and `--tls-key` together; `--tls-client-ca` only with them) and the PEM
//! files read and checked at start, so a bad file stops claimd before it serves. Errors name
//! the flag and the path, never the file's contents.
//!
//! `load` runs twice: while the configuration is validated (before the database is opened
//! or anything is written) and in `Application::build`, which serves what it read. Only ring
//! is compiled into rustls; a dependency that also enabled aws-lc-rs would make rustls's
//! provider choice ambiguous.

pub mod accept;

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
/// configuration (client certificates required when `client_ca` is set), offering `h2` and
/// `http/1.1` in ALPN (served by [`accept::Accepting`]).
pub fn load(files: &TlsFiles) -> anyhow::Result<Option<Arc<ServerConfig>>> {
    check_flags(files)?;
    let (Some(cert), Some(key)) = (&files.cert, &files.key) else {
        return Ok(None);
    };
    let cert_pem = read("--tls-cert", cert)?;
    let chain = certificates("--tls-cert", cert, &cert_pem)?;
    let key_pem = read("--tls-key", key)?;
    let Ok(private_key) = PrivateKeyDer::from_pem_slice(&key_pem) else {
        anyhow::bail!(
            "--tls-key: {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        );
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let ca_pem = read("--tls-client-ca", ca)?;
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(certificates("--tls-client-ca", ca, &ca_pem)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .map_err(|e| {
                    anyhow::anyhow!("--tls-client-ca: {}: {}", ca.display(), error_chain(&e))
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    // rustls checks what PEM parsing cannot: a usable key that matches the certificate.
    let mut config = builder.with_single_cert(chain, private_key).map_err(|e| {
        anyhow::anyhow!(
            "--tls-cert/--tls-key: {} and {} are not a usable certificate and key pair: {}",
            cert.display(),
            key.display(),
            error_chain(&e)
        )
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

fn read(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| anyhow::anyhow!("{flag}: cannot read {}: {e}", path.display()))
}

/// At least one certificate, and every PEM section a well-formed one. The parser's own error
/// is not shown: it can quote lines of the file.
fn certificates(
    flag: &str,
    path: &Path,
    pem: &[u8],
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let parsed: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    match parsed {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        _ => anyhow::bail!("{flag}: {} holds no valid PEM certificate", path.display()),
    }
}

/// The error and its sources on one line.
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
