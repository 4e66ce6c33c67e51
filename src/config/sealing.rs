//! Seal keys from `CLAIMD_SEAL_KEYS`, `--seal-key-file` or, for the embedded store, a key
//! file generated beside the database → one [`Sealer`]. PostgreSQL without keys refuses to
//! start unless told `--allow-plaintext-payloads`.

use crate::seal::{self, KeyRing, Sealer};
use clap::Args;
use sqlx::sqlite::SqliteConnectOptions;
use std::path::PathBuf;
use std::str::FromStr;

/// The environment variable that holds seal keys: base64 keys separated by commas, the
/// current one first. A variable only, never a flag, so keys do not show in `ps`.
pub const SEAL_KEYS_VAR: &str = "CLAIMD_SEAL_KEYS";

/// How payloads are sealed at rest.
#[derive(Debug, Clone, Args)]
pub struct SealArgs {
    /// A file of seal keys: one base64 32-byte key per line, the current key first (older
    /// ones only open), `#` comments allowed. Instead, keys may be given in CLAIMD_SEAL_KEYS
    /// (comma-separated, current first). Default for the embedded store: `seal.key` beside
    /// the database, generated (mode 0600) on first start.
    #[arg(long, env = "CLAIMD_SEAL_KEY_FILE")]
    pub seal_key_file: Option<PathBuf>,
    /// Without seal keys, store payloads in plaintext (PostgreSQL otherwise refuses to
    /// start); with keys, also accept plaintext rows (so `reseal` can seal them).
    #[arg(long, env = "CLAIMD_ALLOW_PLAINTEXT_PAYLOADS")]
    pub allow_plaintext_payloads: bool,
}

/// What the sealer is for: serving may generate the embedded store's key file, resealing
/// needs keys that already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// `claimd serve`.
    Serve,
    /// `claimd reseal`.
    Reseal,
}

impl SealArgs {
    /// The sealer for the database `url`.
    pub fn sealer(&self, url: &str, usage: KeyUse) -> anyhow::Result<Sealer> {
        let allow = self.allow_plaintext_payloads;
        let listed = std::env::var(SEAL_KEYS_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let ring = match (listed, &self.seal_key_file) {
            (Some(_), Some(_)) => anyhow::bail!(
                "give seal keys either in {SEAL_KEYS_VAR} or in --seal-key-file, not both"
            ),
            (Some(list), None) => Some(KeyRing::parse_list(&list)?),
            (None, Some(path)) => Some(seal::load_key_file(path)?),
            (None, None) => self.default_ring(url, usage)?,
        };
        match ring {
            Some(ring) => {
                let ids: Vec<String> = ring.ids().iter().map(ToString::to_string).collect();
                tracing::info!(keys = ?ids, "payloads are sealed under key {}", ids[0]);
                Ok(Sealer::with_keys(ring, allow))
            }
            None if usage == KeyUse::Reseal => anyhow::bail!(
                "reseal needs seal keys: set {SEAL_KEYS_VAR} (the new key first, then the old \
                 ones) or --seal-key-file"
            ),
            None if allow => {
                tracing::warn!(
                    "no seal keys: payloads are stored in plaintext (--allow-plaintext-payloads)"
                );
                Ok(Sealer::plaintext())
            }
            None => anyhow::bail!(
                "refusing to start: PostgreSQL needs seal keys to store payloads sealed at rest. \
                 Set {SEAL_KEYS_VAR} to a base64 32-byte key (e.g. `openssl rand -base64 32`) \
                 or point --seal-key-file at a file of keys; or pass \
                 --allow-plaintext-payloads to store payloads in plaintext"
            ),
        }
    }

    /// The embedded store's key file beside its database, generated when serving; `None`
    /// for PostgreSQL.
    fn default_ring(&self, url: &str, usage: KeyUse) -> anyhow::Result<Option<KeyRing>> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(None);
        }
        if !url.starts_with("sqlite:") {
            return Err(crate::store::StoreError::UnsupportedUrl.into());
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|_| crate::store::StoreError::UnsupportedUrl)?;
        let path = options
            .get_filename()
            .parent()
            .unwrap_or(std::path::Path::new(""))
            .join(seal::KEY_FILE_NAME);
        if usage == KeyUse::Reseal {
            return match seal::load_data_dir_key_file(&path) {
                Ok(ring) => Ok(Some(ring)),
                Err(seal::KeyError::File { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            };
        }
        let (ring, created) = seal::load_or_create_key_file(&path)?;
        if created {
            tracing::info!(
                path = %path.display(),
                "generated a seal key file; back it up with the database"
            );
        }
        Ok(Some(ring))
    }
}
