//! The key ring: 32-byte keys, the current one first, older ones after it for reading
//! only. Each key seals with XChaCha20-Poly1305 (format `0x02`) and opens both that and the
//! AES-256-GCM values of format `0x01`, which claimd no longer writes. A key is named by its [`KeyId`], the first four bytes of its SHA-256, so
//! keys need no names and a ciphertext says which key sealed it. Nothing here ever puts key
//! material into an error message or a `Debug` string.

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{KeyInit, OsRng};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::XChaCha20Poly1305;
use sha2::{Digest, Sha256};
use std::fmt;

/// The length of a key in bytes (256 bits, for either cipher).
pub const KEY_LEN: usize = 32;

/// Names a key inside every ciphertext: the first four bytes of SHA-256(key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub [u8; 4]);

impl KeyId {
    /// The id of `key`.
    pub fn of(key: &[u8; KEY_LEN]) -> KeyId {
        let digest = Sha256::digest(key);
        KeyId([digest[0], digest[1], digest[2], digest[3]])
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// Where a bad key was found, for messages that must not echo the key itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPosition {
    /// The n-th entry (from 1) of `CLAIMD_SEAL_KEYS`.
    Entry(usize),
    /// Line n (from 1) of a key file.
    Line(usize),
}

impl fmt::Display for KeyPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPosition::Entry(n) => write!(f, "entry {n} of CLAIMD_SEAL_KEYS"),
            KeyPosition::Line(n) => write!(f, "line {n}"),
        }
    }
}

/// Why a set of seal keys cannot be used. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// No key at all.
    #[error("no seal key given")]
    Empty,
    /// Not standard base64.
    #[error("seal key at {0}: not standard base64")]
    Base64(KeyPosition),
    /// Decodes to the wrong number of bytes.
    #[error("seal key at {at}: {len} bytes, expected {KEY_LEN}")]
    Length {
        /// Where the key is.
        at: KeyPosition,
        /// Its decoded length.
        len: usize,
    },
    /// The same key twice.
    #[error("seal key at {at} repeats key {id}")]
    Duplicate {
        /// Where the repetition is.
        at: KeyPosition,
        /// The repeated key's id.
        id: KeyId,
    },
    /// A key file cannot be read or written.
    #[error("seal key file {path}: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}

/// One configured key, ready for both ciphers.
pub(super) struct RingKey {
    id: KeyId,
    /// Seals and opens format `0x02`.
    pub(super) xchacha: XChaCha20Poly1305,
    /// Only opens format `0x01`.
    pub(super) aes_gcm: Aes256Gcm,
}

/// The configured keys, never empty: the first seals, every one opens.
pub struct KeyRing {
    keys: Vec<RingKey>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing").field("ids", &self.ids()).finish()
    }
}

impl KeyRing {
    /// A ring of `keys`, the current one first.
    pub fn new(keys: &[[u8; KEY_LEN]]) -> Result<KeyRing, KeyError> {
        let positioned: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (KeyPosition::Entry(i + 1), *k))
            .collect();
        KeyRing::build(positioned)
    }

    fn build(keys: Vec<(KeyPosition, [u8; KEY_LEN])>) -> Result<KeyRing, KeyError> {
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        let mut ring: Vec<RingKey> = Vec::with_capacity(keys.len());
        for (at, key) in keys {
            let id = KeyId::of(&key);
            if ring.iter().any(|k| k.id == id) {
                return Err(KeyError::Duplicate { at, id });
            }
            ring.push(RingKey {
                id,
                xchacha: XChaCha20Poly1305::new(&key.into()),
                aes_gcm: Aes256Gcm::new(&key.into()),
            });
        }
        Ok(KeyRing { keys: ring })
    }

    /// Parses `CLAIMD_SEAL_KEYS`: base64 keys separated by commas, the current one first.
    pub fn parse_list(list: &str) -> Result<KeyRing, KeyError> {
        let entries = list.split(',').map(str::trim).filter(|e| !e.is_empty());
        let keys = entries
            .enumerate()
            .map(|(i, e)| {
                decode(KeyPosition::Entry(i + 1), e).map(|k| (KeyPosition::Entry(i + 1), k))
            })
            .collect::<Result<Vec<_>, _>>()?;
        KeyRing::build(keys)
    }

    /// Parses a key file: one base64 key per line, the current one first; blank lines and
    /// lines starting with `#` are ignored.
    pub fn parse_file(text: &str) -> Result<KeyRing, KeyError> {
        let mut keys = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = KeyPosition::Line(i + 1);
            keys.push((at, decode(at, line)?));
        }
        KeyRing::build(keys)
    }

    /// The id of the key that seals.
    pub fn current(&self) -> KeyId {
        self.keys[0].id
    }

    /// Every key's id, the current one first.
    pub fn ids(&self) -> Vec<KeyId> {
        self.keys.iter().map(|k| k.id).collect()
    }

    /// The sealing key.
    pub(super) fn current_key(&self) -> (KeyId, &RingKey) {
        (self.keys[0].id, &self.keys[0])
    }

    /// The key named `id`, if configured.
    pub(super) fn key(&self, id: KeyId) -> Option<&RingKey> {
        self.keys.iter().find(|k| k.id == id)
    }
}

/// A new random key from the operating system's generator.
pub fn generate_key() -> [u8; KEY_LEN] {
    Aes256Gcm::generate_key(OsRng).into()
}

/// A key as it is written in `CLAIMD_SEAL_KEYS` and key files: standard base64.
pub fn encode_key(key: &[u8; KEY_LEN]) -> String {
    STANDARD.encode(key)
}

fn decode(at: KeyPosition, text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let bytes = STANDARD.decode(text).map_err(|_| KeyError::Base64(at))?;
    let len = bytes.len();
    bytes.try_into().map_err(|_| KeyError::Length { at, len })
}
