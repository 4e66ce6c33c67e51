//! A throwaway PKI made at test time with rcgen: a CA, a server certificate for
//! `localhost` and 127.0.0.1 signed by it, a client certificate signed by it and one signed
//! by another CA. The server's files and the CA are PEM files in a temporary directory, as
//! an operator would pass them to `--tls-cert`, `--tls-key` and `--tls-client-ca`.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::PathBuf;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// The certificates of one test.
pub struct Pki {
    /// The CA's certificate (PEM file): what clients trust and `--tls-client-ca` names.
    pub ca: PathBuf,
    /// The server's certificate (PEM file) for `localhost` and 127.0.0.1.
    pub server_cert: PathBuf,
    /// The server's private key (PEM file).
    pub server_key: PathBuf,
    /// A client certificate and key signed by the CA.
    pub client: Identity,
    /// The same client certificate and key as PEM files (`client.pem`, `client.key`), for
    /// clients outside the test process.
    pub client_files: (PathBuf, PathBuf),
    /// A client certificate and key signed by another CA.
    pub stranger: Identity,
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

/// A self-signed CA and what signs with it.
fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    // Certificate generation only fails on invalid parameters, and these are fixed.
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Key generation only fails without system randomness; signing then cannot fail.
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

/// A leaf certificate for `names`, signed by `issuer`: (certificate PEM, key PEM).
fn new_leaf(
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'static, KeyPair>,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    // Certificate generation only fails on invalid parameters, and these are fixed.
    let mut params = CertificateParams::new(names.clone()).expect("leaf params");
    params
        .distinguished_name
        .push(DnType::CommonName, &names[0]);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    // Key generation only fails without system randomness; signing then cannot fail.
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    /// A fresh CA, server certificate and two client certificates.
    pub fn new() -> Pki {
        // A test cannot run without somewhere to put its certificates.
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca_pem, ca) = new_ca("claimd test CA");
        let (_, other_ca) = new_ca("some other CA");
        let (server_cert, server_key) = new_leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca,
        );
        let (client_cert, client_key) =
            new_leaf(&["client.test"], ExtendedKeyUsagePurpose::ClientAuth, &ca);
        let (stranger_cert, stranger_key) = new_leaf(
            &["stranger.test"],
            ExtendedKeyUsagePurpose::ClientAuth,
            &other_ca,
        );
        let write = |name: &str, pem: &str| {
            let path = dir.path().join(name);
            // The temporary directory was just created and is writable.
            std::fs::write(&path, pem).expect("write PEM file");
            path
        };
        Pki {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_files: (
                write("client.pem", &client_cert),
                write("client.key", &client_key),
            ),
            client: Identity::from_pem(client_cert, client_key),
            stranger: Identity::from_pem(stranger_cert, stranger_key),
            ca_pem,
            issuer: ca,
            dir,
        }
    }

    /// A client certificate from this CA whose SAN holds the URI `uri` (a SPIFFE ID).
    pub fn client_with_uri(&self, uri: &str) -> Identity {
        // Certificate generation only fails on invalid parameters, and these are fixed.
        let mut params = CertificateParams::new(vec!["client.test".to_owned()]).expect("params");
        // A SPIFFE ID is ASCII.
        let uri = rcgen::string::Ia5String::try_from(uri).expect("an ASCII URI");
        params.subject_alt_names.push(rcgen::SanType::URI(uri));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        // Key generation only fails without system randomness; signing then cannot fail.
        let key = KeyPair::generate().expect("leaf key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("leaf certificate");
        Identity::from_pem(cert.pem(), key.serialize_pem())
    }

    /// The directory holding every file of this PKI (`ca.pem`, `client.pem`, …).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A file named `name` in the test's directory holding `contents`.
    pub fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        // The temporary directory exists and is writable while the Pki lives.
        std::fs::write(&path, contents).expect("write file");
        path
    }

    /// Has `config` serve TLS with this PKI's server certificate; with `mtls`, also require
    /// client certificates from its CA.
    pub fn serve_tls(&self, config: &mut claimd::config::Config, mtls: bool) {
        config.tls_cert = Some(self.server_cert.clone());
        config.tls_key = Some(self.server_key.clone());
        config.tls_client_ca = mtls.then(|| self.ca.clone());
    }

    /// A client that trusts the CA and presents no certificate.
    pub fn client_tls(&self) -> ClientTlsConfig {
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca_pem))
    }

    /// A client that trusts the CA and presents `identity`.
    pub fn client_tls_as(&self, identity: &Identity) -> ClientTlsConfig {
        self.client_tls().identity(identity.clone())
    }
}
