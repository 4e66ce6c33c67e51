//! The claimds the Go and Java packages' suites run against, all at once, and the
//! environment that tells a suite where they are:
//!
//! | variable | claimd |
//! | --- | --- |
//! | `CLAIMD_EMBEDDED_ADDR` | on its embedded store, anonymous |
//! | `CLAIMD_POSTGRES_ADDR` | on a fresh database of the harness's PostgreSQL, anonymous |
//! | `CLAIMD_KEYED_ADDR`, `CLAIMD_API_KEY` | embedded, with an API key of tenant `acme` (every call needs one) |
//! | `CLAIMD_TLS_ADDR`, `CLAIMD_TLS_API_KEY`, `CLAIMD_CA_FILE`, `CLAIMD_CLIENT_CERT`, `CLAIMD_CLIENT_KEY` | embedded, mutual TLS (the test PKI of `common::certs`) and an API key |
//! | `CLAIMD_QUOTA_ADDR` | embedded, anonymous, over its Claims quota after one Claim ([`Live::embedded_with_quota`]) |
//!
//! Each suite runs every behaviour on both anonymous stores, so one invocation of `go test`
//! or `mvn verify` covers both; a suite fails (never skips) when a variable is missing.

use super::tools::Live;
use crate::common::certs::Pki;
use std::ffi::OsString;

/// Five running claimds and the PKI of the TLS one (all stopped when dropped).
pub(super) struct ClientServers {
    embedded: Live,
    quota: Live,
    postgres: Live,
    keyed: (Live, String),
    tls: (Live, String),
    pki: Pki,
}

impl ClientServers {
    /// Starts the five claimds.
    pub(super) async fn start() -> ClientServers {
        let pki = Pki::new();
        let embedded = Live::embedded().await;
        let quota = Live::embedded_with_quota().await;
        let postgres = Live::postgres().await;
        let keyed = Live::embedded_with_key(|_| {}).await;
        let tls = Live::embedded_with_key(|cmd| {
            cmd.arg("--tls-cert").arg(&pki.server_cert);
            cmd.arg("--tls-key").arg(&pki.server_key);
            cmd.arg("--tls-client-ca").arg(&pki.ca);
        })
        .await;
        ClientServers {
            embedded,
            quota,
            postgres,
            keyed,
            tls,
            pki,
        }
    }

    /// The variables of the table above.
    pub(super) fn env(&self) -> Vec<(&'static str, OsString)> {
        let (cert, key) = &self.pki.client_files;
        vec![
            ("CLAIMD_EMBEDDED_ADDR", self.embedded.target().into()),
            ("CLAIMD_POSTGRES_ADDR", self.postgres.target().into()),
            ("CLAIMD_QUOTA_ADDR", self.quota.target().into()),
            ("CLAIMD_KEYED_ADDR", self.keyed.0.target().into()),
            ("CLAIMD_API_KEY", self.keyed.1.clone().into()),
            (
                "CLAIMD_TLS_ADDR",
                format!("localhost:{}", self.tls.0.addr.port()).into(),
            ),
            ("CLAIMD_TLS_API_KEY", self.tls.1.clone().into()),
            ("CLAIMD_CA_FILE", self.pki.ca.clone().into()),
            ("CLAIMD_CLIENT_CERT", cert.clone().into()),
            ("CLAIMD_CLIENT_KEY", key.clone().into()),
        ]
    }

    /// The servers' logs, for a failed suite's report.
    pub(super) fn logs(&self) -> String {
        [
            ("embedded", &self.embedded),
            ("quota", &self.quota),
            ("postgres", &self.postgres),
            ("keyed", &self.keyed.0),
            ("tls", &self.tls.0),
        ]
        .iter()
        .map(|(name, live)| format!("--- claimd log ({name})\n{}", live.claimd.log()))
        .collect()
    }
}

/// `cmd` without any `CLAIMD_*` variable of the test process: a suite gets only what the
/// test gives it.
pub(super) fn clear_claimd_env(cmd: &mut std::process::Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CLAIMD_") {
            cmd.env_remove(name);
        }
    }
}
