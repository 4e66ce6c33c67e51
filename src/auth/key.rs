//! API keys themselves: `claimd_<id>_<secret>`, generated from the operating system's
//! CSPRNG, parsed back into id and secret, and the secret's SHA-256 (all that is stored).

use super::KEY_PREFIX;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// A freshly generated key: the whole key is shown once, only the hash is stored.
#[derive(Debug, Clone)]
pub struct GeneratedKey {
    /// The public id.
    pub id: String,
    /// The key to hand to the caller: `claimd_<id>_<secret>`.
    pub key: String,
    /// SHA-256 of the secret.
    pub secret_hash: Vec<u8>,
}

/// Generates a key with 256 bits of secret from the operating system's CSPRNG.
pub fn generate_key() -> GeneratedKey {
    let id: [u8; 8] = rand::random();
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let secret: [u8; 32] = rand::random();
    let secret = URL_SAFE_NO_PAD.encode(secret);
    GeneratedKey {
        key: format!("{KEY_PREFIX}{id}_{secret}"),
        secret_hash: hash_secret(&secret),
        id,
    }
}

/// Splits a presented key into its id and secret.
pub fn parse_key(key: &str) -> Option<(&str, &str)> {
    let (id, secret) = key.strip_prefix(KEY_PREFIX)?.split_once('_')?;
    let id_ok = id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (id_ok && !secret.is_empty()).then_some((id, secret))
}

pub(super) fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_back_to_their_id_and_hash() {
        let generated = generate_key();
        assert!(generated.key.starts_with(KEY_PREFIX));
        let (id, secret) = parse_key(&generated.key).unwrap();
        assert_eq!(id, generated.id);
        assert_eq!(hash_secret(secret), generated.secret_hash);
        assert_ne!(generate_key().key, generated.key);
    }

    #[test]
    fn malformed_keys_do_not_parse() {
        for bad in [
            "",
            "claimd_",
            "claimd_abc_def",
            "other_0123456789abcdef_x",
            "claimd_0123456789abcdef_",
        ] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }
}
