//! The mesh identity of a directly connected mTLS client (issue 48): the `spiffe://` URI
//! SAN of the certificate it presented (already verified against `--tls-client-ca`), put
//! in each request's extensions ([`CertIdentity`]) and mapped through `[mesh.spiffe]`.

/// The SPIFFE ID of the connection's client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity(pub String);

/// What a served connection knows of its client's certificate.
pub trait PeerIdentity {
    /// The SPIFFE ID of the client certificate, if the client presented one with it.
    fn peer_identity(&self) -> Option<CertIdentity>;
}

/// The first `spiffe://` URI SAN of the DER certificate `der`.
pub fn spiffe_id(der: &[u8]) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|name| match name {
        GeneralName::URI(uri) if uri.starts_with("spiffe://") => Some((*uri).to_owned()),
        _ => None,
    })
}
