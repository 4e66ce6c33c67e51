//! The stored formats of a sealed column: the format bytes, each sealed format's layout, and
//! how a stored value stands against the key ring (for `claimd reseal`). See the table in
//! the `seal` module's documentation.

use super::ring::{KeyId, KeyRing};

/// Format byte: plaintext follows.
pub const FORMAT_PLAINTEXT: u8 = 0x00;
/// Format byte of AES-256-GCM with a random 96-bit nonce, as claimd sealed before format
/// `0x02`: still opened (in rows from before lifetimes), never written.
pub const FORMAT_AES_GCM: u8 = 0x01;
/// Format byte of XChaCha20-Poly1305 with a random 192-bit nonce, bound to the row's life.
pub const FORMAT_XCHACHA: u8 = 0x02;
/// The format every new sealed value is written in.
pub const FORMAT_SEALED: u8 = FORMAT_XCHACHA;

/// The length of both formats' authentication tag.
pub(super) const TAG_LEN: usize = 16;
/// Format byte and key id.
const PREFIX_LEN: usize = 1 + 4;

/// The layout of one sealed format: how long its nonce is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    /// The nonce's length in bytes.
    pub(super) nonce: usize,
}

impl Layout {
    /// Format `0x01`: a 96-bit nonce.
    pub(super) const AES_GCM: Layout = Layout { nonce: 12 };
    /// Format `0x02`: a 192-bit nonce.
    pub(super) const XCHACHA: Layout = Layout { nonce: 24 };

    /// Format byte, key id and nonce.
    pub(super) const fn header(self) -> usize {
        PREFIX_LEN + self.nonce
    }

    /// The shortest well-formed value (an empty plaintext).
    pub(super) const fn min_len(self) -> usize {
        self.header() + TAG_LEN
    }

    /// The layout of a sealed format byte.
    pub(super) fn of(format: u8) -> Option<Layout> {
        match format {
            FORMAT_AES_GCM => Some(Layout::AES_GCM),
            FORMAT_XCHACHA => Some(Layout::XCHACHA),
            _ => None,
        }
    }

    /// The key id and nonce of `stored`, if it is long enough for this layout.
    pub(super) fn split(self, stored: &[u8]) -> Option<(KeyId, &[u8], &[u8])> {
        if stored.len() < self.min_len() {
            return None;
        }
        let id = KeyId([stored[1], stored[2], stored[3], stored[4]]);
        let (header, sealed) = stored.split_at(self.header());
        Some((id, &header[PREFIX_LEN..], sealed))
    }
}

/// How a stored value stands against the current key: what `claimd reseal` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Format `0x02` under the current key: nothing to do.
    Current,
    /// Format `0x01` (AES-256-GCM): to be sealed again in format `0x02`.
    OldFormat,
    /// Format `0x02` under a key other than the current one.
    OldKey,
    /// Stored in plaintext.
    Plaintext,
    /// Not a value claimd writes (reseal reports it as unreadable).
    Malformed,
}

/// How `stored` stands against `ring` (without a ring, nothing is current).
pub(super) fn standing(ring: Option<&KeyRing>, stored: &[u8]) -> Standing {
    let Some(&format) = stored.first() else {
        return Standing::Malformed;
    };
    if format == FORMAT_PLAINTEXT {
        return Standing::Plaintext;
    }
    match Layout::of(format).and_then(|l| l.split(stored)) {
        None => Standing::Malformed,
        Some(_) if format == FORMAT_AES_GCM => Standing::OldFormat,
        Some((id, _, _)) if ring.is_some_and(|r| r.current() == id) => Standing::Current,
        Some(_) => Standing::OldKey,
    }
}

/// The key id in a stored value, if it is sealed in either format (for tests and
/// diagnostics).
pub fn stored_key_id(stored: &[u8]) -> Option<KeyId> {
    match stored {
        [FORMAT_AES_GCM | FORMAT_XCHACHA, a, b, c, d, ..] => Some(KeyId([*a, *b, *c, *d])),
        _ => None,
    }
}
