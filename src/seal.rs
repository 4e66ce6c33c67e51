//! Sealing of stored payloads (docs/DESIGN.md §3.6): the recovery payload, checkpoint, response and
//! error text are stored with AES-256-GCM, bound to their row and field, under a key ring.
//!
//! Stored format, every sealed column of both stores:
//!
//! | byte(s) | meaning |
//! | --- | --- |
//! | 0 | `0x00`: plaintext follows (written only without keys, with `--allow-plaintext-payloads`); `0x01`: sealed |
//! | 1–4 | (sealed) the key id: first four bytes of SHA-256(key) |
//! | 5–16 | (sealed) a random 96-bit nonce |
//! | 17… | (sealed) ciphertext and the 16-byte tag |
//!
//! The associated data is `claimd/v1\0` tenant `\0` namespace `\0` key `\0` field, so a
//! ciphertext copied to another row or another field fails authentication. Opening fails
//! closed: a value that does not verify is an error, never plaintext.

mod keyfile;
mod ring;

pub use keyfile::{
    KEY_FILE_NAME, load as load_key_file, load_or_create as load_or_create_key_file,
};
pub use ring::{KEY_LEN, KeyError, KeyId, KeyPosition, KeyRing, encode_key, generate_key};

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, AeadCore, Nonce, OsRng, Payload};
use std::fmt;

/// Format byte: plaintext follows.
pub const FORMAT_PLAINTEXT: u8 = 0x00;
/// Format byte: key id, nonce, ciphertext and tag follow.
pub const FORMAT_SEALED: u8 = 0x01;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const HEADER_LEN: usize = 1 + 4 + NONCE_LEN;

/// A sealed column; its name is part of the associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// `recovery_payload`.
    RecoveryPayload,
    /// `checkpoint`.
    Checkpoint,
    /// `response`.
    Response,
    /// `last_error`.
    LastError,
}

impl Field {
    /// The column name, as bound into the associated data.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::RecoveryPayload => "recovery_payload",
            Field::Checkpoint => "checkpoint",
            Field::Response => "response",
            Field::LastError => "last_error",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The row a sealed value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// The key.
    pub key: &'a str,
}

impl Binding<'_> {
    fn aad(&self, field: Field) -> Vec<u8> {
        let parts = [self.tenant, self.namespace, self.key, field.as_str()];
        let mut aad = b"claimd/v1\0".to_vec();
        aad.extend_from_slice(parts.join("\0").as_bytes());
        aad
    }
}

/// Why a stored value could not be opened. Carries no payload; every variant is reported to
/// callers as DATA_LOSS.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Sealed under a key that is not in the ring (or no ring is configured).
    #[error("{field}: sealed under key {id}, which is not configured")]
    UnknownKey {
        /// The column.
        field: Field,
        /// The key id in the ciphertext.
        id: KeyId,
    },
    /// The tag did not verify: tampered, copied from elsewhere or truncated.
    #[error("{field}: the sealed value failed authentication")]
    Forged {
        /// The column.
        field: Field,
    },
    /// Neither format claimd writes.
    #[error("{field}: not a value claimd stores (format byte {format:#04x}, {len} bytes)")]
    Malformed {
        /// The column.
        field: Field,
        /// The first byte, if any.
        format: u8,
        /// The stored length.
        len: usize,
    },
    /// Stored in plaintext while this configuration demands sealed values.
    #[error("{field}: stored in plaintext, which this configuration does not accept")]
    Plaintext {
        /// The column.
        field: Field,
    },
}

impl SealError {
    /// Whether the value is intact but this configuration cannot open it (its key is not
    /// configured, or it is plaintext and plaintext is not accepted), so it would open again
    /// once the configuration is put right — as opposed to a damaged or forged value.
    pub fn is_configuration(&self) -> bool {
        matches!(
            self,
            SealError::UnknownKey { .. } | SealError::Plaintext { .. }
        )
    }
}

/// Seals and opens stored values. Either it has a key ring (sealing under the current key,
/// opening plaintext only if told to accept it), or it has none and stores plaintext —
/// which only `--allow-plaintext-payloads` asks for.
#[derive(Debug)]
pub struct Sealer {
    ring: Option<KeyRing>,
    allow_plaintext: bool,
}

impl Sealer {
    /// Seals under `ring`'s current key; `allow_plaintext` also opens plaintext values (to
    /// migrate a store that ran without keys: run `claimd reseal` with it).
    pub fn with_keys(ring: KeyRing, allow_plaintext: bool) -> Sealer {
        Sealer {
            ring: Some(ring),
            allow_plaintext,
        }
    }

    /// Stores plaintext and opens only plaintext (`--allow-plaintext-payloads`, no keys).
    pub fn plaintext() -> Sealer {
        Sealer {
            ring: None,
            allow_plaintext: true,
        }
    }

    /// A sealer with one new random key that lives as long as the process, for unit tests
    /// (integration tests have their own under `tests/`).
    #[cfg(test)]
    pub(crate) fn ephemeral() -> Sealer {
        // One freshly generated key can neither be empty nor repeat itself.
        let ring = KeyRing::new(&[generate_key()]).expect("one random key is a valid ring");
        Sealer::with_keys(ring, false)
    }

    /// The key ring, if any.
    pub fn ring(&self) -> Option<&KeyRing> {
        self.ring.as_ref()
    }

    /// Whether plaintext values are accepted on reading.
    pub fn allows_plaintext(&self) -> bool {
        self.allow_plaintext
    }

    /// `plaintext` in stored form for `field` of the row `at`.
    pub fn seal(&self, at: Binding<'_>, field: Field, plaintext: &[u8]) -> Vec<u8> {
        let Some(ring) = &self.ring else {
            let mut stored = Vec::with_capacity(1 + plaintext.len());
            stored.push(FORMAT_PLAINTEXT);
            stored.extend_from_slice(plaintext);
            return stored;
        };
        let (id, cipher) = ring.current_cipher();
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let aad = at.aad(field);
        let payload = Payload {
            msg: plaintext,
            aad: &aad,
        };
        // AES-GCM refuses only plaintexts over 64 GiB; stored blobs are limited to KiBs.
        let sealed = cipher
            .encrypt(&nonce, payload)
            .expect("blob within AES-GCM's length limit");
        let mut stored = Vec::with_capacity(HEADER_LEN + sealed.len());
        stored.push(FORMAT_SEALED);
        stored.extend_from_slice(&id.0);
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        stored
    }

    /// The plaintext of a stored value of `field` of the row `at`, or why it cannot be
    /// trusted.
    pub fn open(&self, at: Binding<'_>, field: Field, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        let malformed = || SealError::Malformed {
            field,
            format: stored.first().copied().unwrap_or(0),
            len: stored.len(),
        };
        match stored.first() {
            Some(&FORMAT_PLAINTEXT) if self.allow_plaintext => Ok(stored[1..].to_vec()),
            Some(&FORMAT_PLAINTEXT) => Err(SealError::Plaintext { field }),
            Some(&FORMAT_SEALED) if stored.len() >= HEADER_LEN + TAG_LEN => {
                let id = KeyId([stored[1], stored[2], stored[3], stored[4]]);
                let cipher = self
                    .ring
                    .as_ref()
                    .and_then(|r| r.cipher(id))
                    .ok_or(SealError::UnknownKey { field, id })?;
                let mut nonce = Nonce::<Aes256Gcm>::default();
                nonce.copy_from_slice(&stored[5..HEADER_LEN]);
                let aad = at.aad(field);
                let payload = Payload {
                    msg: &stored[HEADER_LEN..],
                    aad: &aad,
                };
                cipher
                    .decrypt(&nonce, payload)
                    .map_err(|_| SealError::Forged { field })
            }
            _ => Err(malformed()),
        }
    }

    /// Whether `stored` is already sealed under the current key (so `reseal` can skip it).
    /// Without a ring nothing is current.
    pub fn is_current(&self, stored: &[u8]) -> bool {
        match &self.ring {
            Some(ring) => {
                stored.len() >= HEADER_LEN + TAG_LEN
                    && stored[0] == FORMAT_SEALED
                    && stored[1..5] == ring.current().0
            }
            None => false,
        }
    }
}

/// The key id in a stored value, if it is sealed (for tests and diagnostics).
pub fn stored_key_id(stored: &[u8]) -> Option<KeyId> {
    match stored {
        [FORMAT_SEALED, a, b, c, d, ..] => Some(KeyId([*a, *b, *c, *d])),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
