//! Sealing of stored payloads (docs/DESIGN.md §3.6): the recovery payload, checkpoint,
//! response and error text are stored with XChaCha20-Poly1305, bound to their row, the
//! row's life and the field, under a key ring.
//!
//! Stored formats, every sealed column of both stores (the first byte says which):
//!
//! | format | bytes after the format byte | written |
//! | --- | --- | --- |
//! | `0x00` plaintext | the plaintext | only without keys, with `--allow-plaintext-payloads` |
//! | `0x01` AES-256-GCM | key id (4), random nonce (12), ciphertext and tag (16) | no longer; opened in rows without a life id |
//! | `0x02` XChaCha20-Poly1305 | key id (4), random nonce (24), ciphertext and tag (16) | every sealed value |
//!
//! The key id is the first four bytes of SHA-256(key). The associated data of `0x02` is
//! `claimd/v2\0` tenant `\0` namespace `\0` key `\0` field `\0` life, where life is the
//! row's 16-byte `life_id` (created with the row, never changed; empty for rows from before
//! lifetimes), so a ciphertext copied to another row, another field or another life of the
//! same key fails authentication. `0x01` bound `claimd/v1\0` tenant `\0` namespace `\0` key
//! `\0` field and no life, so it opens only in a row without a life id. Opening fails
//! closed: a value that does not verify is an error, never plaintext.

mod format;
mod keyfile;
mod ring;

pub use format::{
    FORMAT_AES_GCM, FORMAT_PLAINTEXT, FORMAT_SEALED, FORMAT_XCHACHA, Standing, stored_key_id,
};
pub use keyfile::{
    KEY_FILE_NAME, load as load_key_file, load_in_data_dir as load_data_dir_key_file,
    load_or_create as load_or_create_key_file,
};
pub use ring::{KEY_LEN, KeyError, KeyId, KeyPosition, KeyRing, encode_key, generate_key};

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, AeadCore, Nonce, OsRng, Payload};
use chacha20poly1305::XChaCha20Poly1305;
use format::Layout;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The length of a row's life id.
pub const LIFE_LEN: usize = 16;

/// A new random life id, for a row about to be inserted.
pub fn new_life() -> [u8; LIFE_LEN] {
    rand::random()
}

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

/// The row, and the life of the row, a sealed value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// The key.
    pub key: &'a str,
    /// The row's `life_id`; empty for a row from before lifetimes.
    pub life: &'a [u8],
}

impl Binding<'_> {
    /// The associated data of format `version`: `claimd/v{version}\0` and the row and field
    /// joined by `\0`; version 2 adds `\0` and the life.
    fn aad(&self, version: u8, field: Field) -> Vec<u8> {
        let parts = [self.tenant, self.namespace, self.key, field.as_str()];
        let mut aad = format!("claimd/v{version}\0").into_bytes();
        aad.extend_from_slice(parts.join("\0").as_bytes());
        if version >= 2 {
            aad.push(0);
            aad.extend_from_slice(self.life);
        }
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
    /// The tag did not verify: tampered, truncated, or copied from another row, field or
    /// life of the key.
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
    /// In format `0x01` in a row that has a life id: the row was created after lifetimes,
    /// so the value was copied from an earlier life (or another row) and is not trusted.
    #[error("{field}: an old-format value in a row that has a lifetime")]
    WrongLife {
        /// The column.
        field: Field,
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
/// which only `--allow-plaintext-payloads` asks for. It counts the values it seals, so tests
/// can prove that a path seals nothing.
#[derive(Debug)]
pub struct Sealer {
    ring: Option<KeyRing>,
    allow_plaintext: bool,
    seals: AtomicU64,
}

impl Sealer {
    /// Seals under `ring`'s current key; `allow_plaintext` also opens plaintext values (to
    /// migrate a store that ran without keys: run `claimd reseal` with it).
    pub fn with_keys(ring: KeyRing, allow_plaintext: bool) -> Sealer {
        Sealer {
            ring: Some(ring),
            allow_plaintext,
            seals: AtomicU64::new(0),
        }
    }

    /// Stores plaintext and opens only plaintext (`--allow-plaintext-payloads`, no keys).
    pub fn plaintext() -> Sealer {
        Sealer {
            ring: None,
            allow_plaintext: true,
            seals: AtomicU64::new(0),
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

    /// How many values [`Sealer::seal`] has put in stored form since this sealer was made.
    pub fn seal_count(&self) -> u64 {
        self.seals.load(Ordering::Relaxed)
    }

    /// `plaintext` in stored form for `field` of the row `at`: format `0x02` under the
    /// current key with a random 192-bit nonce, or `0x00` without keys.
    pub fn seal(&self, at: Binding<'_>, field: Field, plaintext: &[u8]) -> Vec<u8> {
        self.seals.fetch_add(1, Ordering::Relaxed);
        let Some(ring) = &self.ring else {
            let mut stored = Vec::with_capacity(1 + plaintext.len());
            stored.push(FORMAT_PLAINTEXT);
            stored.extend_from_slice(plaintext);
            return stored;
        };
        let (id, key) = ring.current_key();
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = at.aad(2, field);
        let payload = Payload {
            msg: plaintext,
            aad: &aad,
        };
        // XChaCha20-Poly1305 refuses only plaintexts over 256 GiB; stored blobs are KiBs.
        let sealed = key
            .xchacha
            .encrypt(&nonce, payload)
            .expect("blob within XChaCha20-Poly1305's length limit");
        let mut stored = Vec::with_capacity(Layout::XCHACHA.header() + sealed.len());
        stored.push(FORMAT_XCHACHA);
        stored.extend_from_slice(&id.0);
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        stored
    }

    /// The plaintext of a stored value of `field` of the row `at`, or why it cannot be
    /// trusted. A `0x01` value opens only in a row without a life id.
    pub fn open(&self, at: Binding<'_>, field: Field, stored: &[u8]) -> Result<Vec<u8>, SealError> {
        let format = stored.first().copied();
        if format == Some(FORMAT_PLAINTEXT) {
            return match self.allow_plaintext {
                true => Ok(stored[1..].to_vec()),
                false => Err(SealError::Plaintext { field }),
            };
        }
        let split = format.and_then(Layout::of).and_then(|l| l.split(stored));
        let Some((id, nonce, sealed)) = split else {
            return Err(SealError::Malformed {
                field,
                format: format.unwrap_or(0),
                len: stored.len(),
            });
        };
        if format == Some(FORMAT_AES_GCM) && !at.life.is_empty() {
            return Err(SealError::WrongLife { field });
        }
        let key = self
            .ring
            .as_ref()
            .and_then(|r| r.key(id))
            .ok_or(SealError::UnknownKey { field, id })?;
        let forged = |_| SealError::Forged { field };
        if format == Some(FORMAT_AES_GCM) {
            let aad = at.aad(1, field);
            let payload = Payload {
                msg: sealed,
                aad: &aad,
            };
            let mut n = Nonce::<Aes256Gcm>::default();
            n.copy_from_slice(nonce);
            return key.aes_gcm.decrypt(&n, payload).map_err(forged);
        }
        let aad = at.aad(2, field);
        let payload = Payload {
            msg: sealed,
            aad: &aad,
        };
        let mut n = Nonce::<XChaCha20Poly1305>::default();
        n.copy_from_slice(nonce);
        key.xchacha.decrypt(&n, payload).map_err(forged)
    }

    /// How `stored` stands against the current key (what `reseal` would do with it).
    pub fn standing(&self, stored: &[u8]) -> Standing {
        format::standing(self.ring.as_ref(), stored)
    }

    /// Whether `stored` is already in format `0x02` under the current key (so `reseal` can
    /// skip it). Without a ring nothing is current.
    pub fn is_current(&self, stored: &[u8]) -> bool {
        self.standing(stored) == Standing::Current
    }
}

#[cfg(test)]
mod tests;
