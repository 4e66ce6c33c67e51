//! Seal keys from `CLAIMD_SEAL_KEYS`, `--seal-key-file` or, for the embedded store, a key
//! file generated beside the database → one [`Sealer`]. PostgreSQL without keys refuses to
//! start unless told `--allow-plaintext-payloads`. A [`SealKeysError`] names where the keys
//! came from (the flag, the variable or the data directory's file) and what to do.

use crate::seal::{self, KeyRing, Sealer};
use clap::Args;
use sqlx::sqlite::SqliteConnectOptions;
use std::path::PathBuf;
use std::str::FromStr;

/// The environment variable that holds seal keys: base64 keys separated by commas, the
/// current one first. A variable only, never a flag, so keys do not show in `ps`.
pub const SEAL_KEYS_VAR: &str = "CLAIMD_SEAL_KEYS";

/// Why no sealer could be made; never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum SealKeysError {
    /// Keys given twice.
    #[error("give seal keys either in {SEAL_KEYS_VAR} or in --seal-key-file, not both: unset one")]
    Both,
    /// `CLAIMD_SEAL_KEYS` does not hold usable keys.
    #[error(
        "{SEAL_KEYS_VAR}: {0} — set it to base64 32-byte keys, comma-separated, the current \
         one first (`openssl rand -base64 32` makes one)"
    )]
    List(seal::KeyError),
    /// The `--seal-key-file` file cannot be read or holds no usable keys.
    #[error("--seal-key-file {}: {}", path.display(), explain(error, KEY_FILE_FIX))]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        error: seal::KeyError,
    },
    /// The embedded store's key file cannot be made, read or used.
    #[error(
        "the seal key file {} in the data directory (--data-dir): {}",
        path.display(), explain(error, DATA_DIR_KEY_FIX)
    )]
    DataDirKeyFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        error: seal::KeyError,
    },
    /// `reseal` without keys.
    #[error(
        "reseal needs seal keys: set {SEAL_KEYS_VAR} (the new key first, then the old ones) \
         or --seal-key-file"
    )]
    ResealNeedsKeys,
    /// PostgreSQL without keys and without `--allow-plaintext-payloads`.
    #[error(
        "refusing to start: PostgreSQL needs seal keys to store payloads sealed at rest. Set \
         {SEAL_KEYS_VAR} to a base64 32-byte key (e.g. `openssl rand -base64 32`) or point \
         --seal-key-file at a file of keys; or pass --allow-plaintext-payloads to store \
         payloads in plaintext"
    )]
    PostgresNeedsKeys,
    /// The database URL names no store claimd has.
    #[error(transparent)]
    Url(#[from] crate::store::StoreError),
}

/// What to do about a `--seal-key-file` that is missing or holds no usable key.
const KEY_FILE_FIX: &str = "name a file of keys, one base64 32-byte key per line, the \
     current one first (`openssl rand -base64 32` makes one), or set CLAIMD_SEAL_KEYS instead";
/// What to do about a data directory's key file that cannot be made or read.
const DATA_DIR_KEY_FIX: &str = "point --data-dir at a directory claimd can create and write, \
     or give the keys with --seal-key-file or CLAIMD_SEAL_KEYS";

/// A key file's `error` in words, followed by `fix` unless the error says what to do itself
/// (a file mode says to `chmod 600`).
fn explain(error: &seal::KeyError, fix: &str) -> String {
    let text = match error {
        seal::KeyError::File { source, .. } => source.to_string(),
        other => other.to_string(),
    };
    if text.contains("chmod") {
        text
    } else {
        format!("{text} — {fix}")
    }
}

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
    pub fn sealer(&self, url: &str, usage: KeyUse) -> Result<Sealer, SealKeysError> {
        let allow = self.allow_plaintext_payloads;
        let listed = std::env::var(SEAL_KEYS_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let ring = match (listed, &self.seal_key_file) {
            (Some(_), Some(_)) => return Err(SealKeysError::Both),
            (Some(list), None) => Some(KeyRing::parse_list(&list).map_err(SealKeysError::List)?),
            (None, Some(path)) => {
                Some(
                    seal::load_key_file(path).map_err(|error| SealKeysError::KeyFile {
                        path: path.clone(),
                        error,
                    })?,
                )
            }
            (None, None) => self.default_ring(url, usage)?,
        };
        match ring {
            Some(ring) => {
                let ids: Vec<String> = ring.ids().iter().map(ToString::to_string).collect();
                tracing::info!(keys = ?ids, "payloads are sealed under key {}", ids[0]);
                Ok(Sealer::with_keys(ring, allow))
            }
            None if usage == KeyUse::Reseal => Err(SealKeysError::ResealNeedsKeys),
            None if allow => {
                tracing::warn!(
                    "no seal keys: payloads are stored in plaintext (--allow-plaintext-payloads)"
                );
                Ok(Sealer::plaintext())
            }
            None => Err(SealKeysError::PostgresNeedsKeys),
        }
    }

    /// The embedded store's key file beside its database, generated when serving; `None`
    /// for PostgreSQL.
    fn default_ring(&self, url: &str, usage: KeyUse) -> Result<Option<KeyRing>, SealKeysError> {
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
        let in_data_dir = |error| SealKeysError::DataDirKeyFile {
            path: path.clone(),
            error,
        };
        if usage == KeyUse::Reseal {
            return match seal::load_data_dir_key_file(&path) {
                Ok(ring) => Ok(Some(ring)),
                Err(seal::KeyError::File { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(in_data_dir(e)),
            };
        }
        let (ring, created) = seal::load_or_create_key_file(&path).map_err(in_data_dir)?;
        if created {
            tracing::info!(
                path = %path.display(),
                "generated a seal key file; back it up with the database"
            );
        }
        Ok(Some(ring))
    }
}
