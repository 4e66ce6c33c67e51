//! The `[mesh]` table of the `--config` file (issue 48): the trusted proxies (CIDR
//! blocks), whether they speak PROXY protocol v2, and `[mesh.spiffe."<id>"]` tables
//! mapping a mesh identity to a tenant and namespaces (→ [`MeshOptions`]). Read once at
//! start (SIGHUP reloads only the policies); every error names the key, and an unknown key
//! fails the start.

use crate::mesh::{Cidr, MeshIdentity, MeshOptions, TrustedProxies};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the `[mesh]` table was refused; every message names the file and the key.
#[derive(Debug, thiserror::Error)]
pub enum MeshFileError {
    /// The file cannot be read.
    #[error("--config: cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        error: std::io::Error,
    },
    /// A key is unknown, of the wrong type, or its value is refused.
    #[error(
        "--config: {}: {key}: {problem} — fix it there (`claimd check-config` checks a file)",
        path.display()
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key at fault, e.g. `mesh.trusted_proxies[1]`.
        key: String,
        /// What is wrong.
        problem: String,
    },
}

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    mesh: Option<Section>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    #[serde(default)]
    trusted_proxies: Vec<String>,
    proxy_protocol: Option<String>,
    #[serde(default)]
    spiffe: BTreeMap<String, Identity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Identity {
    tenant: String,
    #[serde(default)]
    namespaces: Vec<String>,
}

/// The `[mesh]` table of the file at `path`; no file or no table: nothing trusted.
pub fn load(path: Option<&Path>) -> Result<MeshOptions, MeshFileError> {
    let Some(path) = path else {
        return Ok(MeshOptions::default());
    };
    let text = std::fs::read_to_string(path).map_err(|error| MeshFileError::Read {
        path: path.to_owned(),
        error,
    })?;
    parse(path, &text)
}

/// Validates the `[mesh]` table of `text` (read from `path`, named in errors).
pub fn parse(path: &Path, text: &str) -> Result<MeshOptions, MeshFileError> {
    let invalid = |key: String, problem: String| MeshFileError::Invalid {
        path: path.to_owned(),
        key,
        problem,
    };
    let file: File = toml::from_str(text).map_err(|e| {
        let key = e.span().map(|s| super::policies::key_at(text, s.start));
        let key = key
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "mesh".into());
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
        invalid(key, format!("{}{at}", e.message()))
    })?;
    let Some(section) = file.mesh else {
        return Ok(MeshOptions::default());
    };
    let mut trusted = Vec::new();
    for (i, block) in section.trusted_proxies.iter().enumerate() {
        let cidr: Cidr = block
            .parse()
            .map_err(|e| invalid(format!("mesh.trusted_proxies[{i}]"), format!("{e}")))?;
        trusted.push(cidr);
    }
    let proxy_protocol = match section.proxy_protocol.as_deref() {
        None => false,
        Some("v2") => true,
        Some(other) => {
            let problem =
                format!("{other:?} is not a PROXY protocol version claimd reads (\"v2\")");
            return Err(invalid("mesh.proxy_protocol".into(), problem));
        }
    };
    if proxy_protocol && trusted.is_empty() {
        let problem = "needs mesh.trusted_proxies: only the peers named there may send a \
                       PROXY header"
            .to_owned();
        return Err(invalid("mesh.proxy_protocol".into(), problem));
    }
    let mut spiffe = std::collections::HashMap::new();
    for (id, identity) in section.spiffe {
        let key = format!("mesh.spiffe.{id:?}");
        check_spiffe_id(&id).map_err(|p| invalid(key.clone(), p))?;
        crate::domain::check_name(&identity.tenant, crate::domain::MAX_TENANT)
            .map_err(|e| invalid(format!("{key}.tenant"), format!("tenant {e}")))?;
        for (i, ns) in identity.namespaces.iter().enumerate() {
            crate::domain::check_name(ns, crate::domain::MAX_NAMESPACE)
                .map_err(|e| invalid(format!("{key}.namespaces[{i}]"), format!("namespace {e}")))?;
        }
        spiffe.insert(
            id,
            MeshIdentity {
                tenant: identity.tenant,
                namespaces: identity.namespaces,
            },
        );
    }
    Ok(MeshOptions {
        trusted_proxies: TrustedProxies(trusted),
        proxy_protocol,
        spiffe,
    })
}

/// A SPIFFE ID is `spiffe://<trust domain>/<path>`: a non-empty lowercase trust domain of
/// `a-z 0-9 . - _` and a path of visible ASCII.
fn check_spiffe_id(id: &str) -> Result<(), String> {
    let rest = id
        .strip_prefix("spiffe://")
        .ok_or("a SPIFFE ID starts with spiffe:// (spiffe://cluster.local/ns/NS/sa/SA)")?;
    let (domain, path) = rest.split_once('/').unwrap_or((rest, ""));
    let domain_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c);
    if domain.is_empty() || !domain.chars().all(domain_ok) {
        return Err("the trust domain (after spiffe://) must be lowercase a-z 0-9 . - _".into());
    }
    if !path.chars().all(|c| c.is_ascii_graphic()) || path.ends_with('/') {
        return Err("the path must be visible ASCII, not ending in /".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
