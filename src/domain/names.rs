//! The names callers and operators choose — namespaces and tenants — and the one alphabet
//! they share, `[A-Za-z0-9._:/-]`: the API, the policy file and `claimd keys` all check
//! names here.

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE: usize = 128;
/// Longest tenant, in bytes.
pub const MAX_TENANT: usize = 64;
/// The alphabet of names, as messages spell it.
pub const NAME_ALPHABET: &str = "A-Z a-z 0-9 . _ : / -";

/// Why a name is refused; the message never repeats the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("must not be empty")]
    Empty,
    /// The name is longer than the limit (in bytes).
    #[error("must be at most {0} bytes")]
    TooLong(usize),
    /// The name has a character outside [`NAME_ALPHABET`].
    #[error("may only contain {NAME_ALPHABET}")]
    Alphabet,
}

/// Whether `c` may appear in a name.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._:/-".contains(c)
}

/// Checks that `name` is 1 to `max` bytes of [`NAME_ALPHABET`].
pub fn check_name(name: &str, max: usize) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > max {
        return Err(NameError::TooLong(max));
    }
    if !name.chars().all(is_name_char) {
        return Err(NameError::Alphabet);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_alphabet_and_the_length_limit() {
        assert_eq!(
            check_name("slack-events/v1:prod_2.x", MAX_NAMESPACE),
            Ok(())
        );
        assert_eq!(check_name("", MAX_NAMESPACE), Err(NameError::Empty));
        assert_eq!(check_name("has space", 64), Err(NameError::Alphabet));
        assert_eq!(check_name("ümlaut", 64), Err(NameError::Alphabet));
        assert_eq!(
            check_name(&"a".repeat(65), MAX_TENANT),
            Err(NameError::TooLong(64))
        );
        assert_eq!(
            NameError::Alphabet.to_string(),
            "may only contain A-Z a-z 0-9 . _ : / -"
        );
    }
}
