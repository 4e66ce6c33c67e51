//! Unit tests of sealing: the formats, the binding to row, field and life, the key ring,
//! rotation and key files.

use super::format::TAG_LEN;
use super::*;
use aes_gcm::aead::KeyInit;

const AT: Binding<'static> = Binding {
    tenant: "acme",
    namespace: "slack-events",
    key: "Ev1",
    life: &[7; LIFE_LEN],
};

/// A row from before lifetimes.
const LIFELESS: Binding<'static> = Binding { life: &[], ..AT };

const HEADER_LEN: usize = Layout::XCHACHA.header();

fn ring(keys: &[[u8; KEY_LEN]]) -> KeyRing {
    KeyRing::new(keys).expect("valid ring")
}

#[test]
fn sealed_values_open_to_the_plaintext_and_never_contain_it() {
    let sealer = Sealer::ephemeral();
    let plaintext = b"canary: the recovery payload".as_slice();
    let stored = sealer.seal(AT, Field::RecoveryPayload, plaintext);
    assert_eq!(stored[0], FORMAT_SEALED);
    assert_eq!(stored.len(), HEADER_LEN + plaintext.len() + TAG_LEN);
    assert!(!stored.windows(6).any(|w| w == b"canary"));
    let opened = sealer.open(AT, Field::RecoveryPayload, &stored);
    assert_eq!(opened.as_deref(), Ok(plaintext));
}

#[test]
fn every_seal_uses_a_new_nonce() {
    let sealer = Sealer::ephemeral();
    let a = sealer.seal(AT, Field::Response, b"same");
    let b = sealer.seal(AT, Field::Response, b"same");
    assert_ne!(a, b);
}

#[test]
fn the_empty_plaintext_is_sealed_too() {
    let sealer = Sealer::ephemeral();
    let stored = sealer.seal(AT, Field::Checkpoint, b"");
    assert_eq!(sealer.open(AT, Field::Checkpoint, &stored), Ok(Vec::new()));
}

#[test]
fn a_value_moved_to_another_row_or_field_fails_authentication() {
    let sealer = Sealer::ephemeral();
    let stored = sealer.seal(AT, Field::Checkpoint, b"progress");
    let others = [
        Binding {
            tenant: "other",
            ..AT
        },
        Binding {
            namespace: "stripe",
            ..AT
        },
        Binding { key: "Ev2", ..AT },
        // The separator keeps "a\0b" + "c" apart from "a" + "b\0c".
        Binding {
            tenant: "acme\0slack-events",
            namespace: "",
            ..AT
        },
    ];
    for other in others {
        let opened = sealer.open(other, Field::Checkpoint, &stored);
        assert_eq!(
            opened,
            Err(SealError::Forged {
                field: Field::Checkpoint
            }),
            "{other:?}"
        );
    }
    let opened = sealer.open(AT, Field::Response, &stored);
    assert_eq!(
        opened,
        Err(SealError::Forged {
            field: Field::Response
        })
    );
}

#[test]
fn any_flipped_bit_fails_closed() {
    let sealer = Sealer::ephemeral();
    let stored = sealer.seal(AT, Field::LastError, b"upstream 503");
    for byte in 0..stored.len() {
        for bit in 0..8 {
            let mut tampered = stored.clone();
            tampered[byte] ^= 1 << bit;
            let opened = sealer.open(AT, Field::LastError, &tampered);
            assert!(opened.is_err(), "byte {byte} bit {bit} still opened");
        }
    }
}

#[test]
fn truncated_and_unknown_formats_are_malformed() {
    let sealer = Sealer::ephemeral();
    let stored = sealer.seal(AT, Field::Response, b"x");
    for bad in [
        &[][..],
        &stored[..HEADER_LEN + TAG_LEN - 1],
        &[0x02, 1, 2, 3][..],
        &[0x03; 64][..],
    ] {
        let opened = sealer.open(AT, Field::Response, bad);
        assert!(
            matches!(opened, Err(SealError::Malformed { .. })),
            "{opened:?}"
        );
    }
}

#[test]
fn a_value_under_an_unknown_key_names_the_key_id() {
    let old = generate_key();
    let stored = Sealer::with_keys(ring(&[old]), false).seal(AT, Field::Response, b"x");
    let other = Sealer::ephemeral();
    let opened = other.open(AT, Field::Response, &stored);
    let id = KeyId::of(&old);
    assert_eq!(
        opened,
        Err(SealError::UnknownKey {
            field: Field::Response,
            id
        })
    );
    assert!(
        SealError::UnknownKey {
            field: Field::Response,
            id
        }
        .to_string()
        .contains(&id.to_string())
    );
    assert!(
        Sealer::plaintext()
            .open(AT, Field::Response, &stored)
            .is_err()
    );
}

#[test]
fn rotation_seals_under_the_first_key_and_opens_under_any() {
    let (old, new) = (generate_key(), generate_key());
    let before = Sealer::with_keys(ring(&[old]), false);
    let during = Sealer::with_keys(ring(&[new, old]), false);
    let stored_old = before.seal(AT, Field::Checkpoint, b"cp");
    assert_eq!(stored_key_id(&stored_old), Some(KeyId::of(&old)));
    assert!(!during.is_current(&stored_old));
    assert_eq!(
        during.open(AT, Field::Checkpoint, &stored_old),
        Ok(b"cp".to_vec())
    );
    let stored_new = during.seal(AT, Field::Checkpoint, b"cp");
    assert_eq!(stored_key_id(&stored_new), Some(KeyId::of(&new)));
    assert!(during.is_current(&stored_new));
}

#[test]
fn plaintext_is_written_only_without_keys_and_read_only_when_allowed() {
    let plain = Sealer::plaintext();
    let stored = plain.seal(AT, Field::Response, b"hello");
    assert_eq!(stored, b"\x00hello");
    assert_eq!(
        plain.open(AT, Field::Response, &stored),
        Ok(b"hello".to_vec())
    );
    let strict = Sealer::ephemeral();
    let refused = strict.open(AT, Field::Response, &stored);
    assert_eq!(
        refused,
        Err(SealError::Plaintext {
            field: Field::Response
        })
    );
    let migrating = Sealer::with_keys(ring(&[generate_key()]), true);
    assert_eq!(
        migrating.open(AT, Field::Response, &stored),
        Ok(b"hello".to_vec())
    );
    assert!(!migrating.is_current(&stored));
}

#[test]
fn key_lists_and_files_parse_current_first_and_never_echo_a_key() {
    let (a, b) = (generate_key(), generate_key());
    let list = format!(" {} , {} ,", encode_key(&a), encode_key(&b));
    let parsed = KeyRing::parse_list(&list).expect("two keys");
    assert_eq!(parsed.ids(), vec![KeyId::of(&a), KeyId::of(&b)]);
    let file = format!(
        "# current\n{}\n\n# older\n{}\n",
        encode_key(&b),
        encode_key(&a)
    );
    let parsed = KeyRing::parse_file(&file).expect("two keys");
    assert_eq!(parsed.current(), KeyId::of(&b));

    let short = encode_key(&a)[..24].to_owned();
    let errors = [
        KeyRing::parse_list("").unwrap_err(),
        KeyRing::parse_list("not base64!").unwrap_err(),
        KeyRing::parse_file(&format!("# c\n{short}\n")).unwrap_err(),
        KeyRing::parse_list(&format!("{},{}", encode_key(&a), encode_key(&a))).unwrap_err(),
    ];
    assert!(matches!(errors[0], KeyError::Empty));
    assert!(matches!(errors[1], KeyError::Base64(KeyPosition::Entry(1))));
    assert!(matches!(
        errors[2],
        KeyError::Length {
            at: KeyPosition::Line(2),
            len: 18
        }
    ));
    assert!(matches!(
        errors[3],
        KeyError::Duplicate {
            at: KeyPosition::Entry(2),
            ..
        }
    ));
    for e in &errors {
        assert!(!e.to_string().contains(&encode_key(&a)[..8]), "{e}");
    }
    assert!(!format!("{parsed:?}").contains(&encode_key(&a)[..8]));
}

#[test]
fn a_generated_key_file_is_private_and_reused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested").join(KEY_FILE_NAME);
    let (first, created) = load_or_create_key_file(&path).expect("generated");
    assert!(created);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (again, created) = load_or_create_key_file(&path).expect("reused");
    assert!(!created);
    assert_eq!(first.ids(), again.ids());
    assert_eq!(load_key_file(&path).expect("loads").ids(), first.ids());
    let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(leftovers, 1, "the temporary file was left behind");
}

#[test]
fn an_empty_key_file_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(KEY_FILE_NAME);
    std::fs::write(&path, "# nothing here\n").unwrap();
    // Key files must be the owner's only (docs/DESIGN.md §3.6.2), or the mode is the error.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let error = load_key_file(&path).unwrap_err().to_string();
    assert!(
        error.contains(KEY_FILE_NAME) && error.contains("no key"),
        "{error}"
    );
}

/// `plaintext` sealed in format `0x01`, as claimd wrote it before format `0x02`.
fn sealed_v1(key: &[u8; KEY_LEN], at: Binding<'_>, field: Field, plaintext: &[u8]) -> Vec<u8> {
    let cipher = Aes256Gcm::new(key.into());
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let aad = at.aad(1, field);
    let payload = Payload {
        msg: plaintext,
        aad: &aad,
    };
    let sealed = cipher.encrypt(&nonce, payload).unwrap();
    let mut stored = vec![FORMAT_AES_GCM];
    stored.extend_from_slice(&KeyId::of(key).0);
    stored.extend_from_slice(&nonce);
    stored.extend_from_slice(&sealed);
    stored
}

#[test]
fn old_format_values_open_only_in_rows_without_a_life() {
    let key = generate_key();
    let sealer = Sealer::with_keys(ring(&[key]), false);
    let old = sealed_v1(&key, LIFELESS, Field::Response, b"from before");
    assert_eq!(
        sealer.open(LIFELESS, Field::Response, &old),
        Ok(b"from before".to_vec())
    );
    assert_eq!(sealer.standing(&old), Standing::OldFormat);
    assert!(!sealer.is_current(&old));
    assert_eq!(stored_key_id(&old), Some(KeyId::of(&key)));
    assert_eq!(
        sealer.open(AT, Field::Response, &old),
        Err(SealError::WrongLife {
            field: Field::Response
        })
    );
    let mut tampered = old.clone();
    tampered[Layout::AES_GCM.header()] ^= 1;
    assert_eq!(
        sealer.open(LIFELESS, Field::Response, &tampered),
        Err(SealError::Forged {
            field: Field::Response
        })
    );
}

#[test]
fn new_values_are_bound_to_the_life_of_their_row() {
    let sealer = Sealer::ephemeral();
    let stored = sealer.seal(AT, Field::RecoveryPayload, b"payload");
    assert_eq!(sealer.standing(&stored), Standing::Current);
    let later = Binding {
        life: &[8; LIFE_LEN],
        ..AT
    };
    for other in [later, LIFELESS] {
        assert_eq!(
            sealer.open(other, Field::RecoveryPayload, &stored),
            Err(SealError::Forged {
                field: Field::RecoveryPayload
            })
        );
    }
    let lifeless = sealer.seal(LIFELESS, Field::RecoveryPayload, b"payload");
    assert_eq!(
        sealer.open(LIFELESS, Field::RecoveryPayload, &lifeless),
        Ok(b"payload".to_vec())
    );
    assert!(sealer.open(AT, Field::RecoveryPayload, &lifeless).is_err());
    assert_ne!(new_life(), new_life());
}

#[test]
fn every_seal_is_counted_and_nothing_else() {
    let sealer = Sealer::ephemeral();
    assert_eq!(sealer.seal_count(), 0);
    let stored = sealer.seal(AT, Field::Checkpoint, b"cp");
    sealer.seal(AT, Field::Checkpoint, b"cp");
    sealer.open(AT, Field::Checkpoint, &stored).unwrap();
    sealer.is_current(&stored);
    assert_eq!(sealer.seal_count(), 2);
}

#[test]
fn standing_sorts_values_for_reseal() {
    let (old, new) = (generate_key(), generate_key());
    let before = Sealer::with_keys(ring(&[old]), false);
    let during = Sealer::with_keys(ring(&[new, old]), false);
    let under_old = before.seal(AT, Field::Response, b"x");
    assert_eq!(during.standing(&under_old), Standing::OldKey);
    assert_eq!(during.standing(b"\x00x"), Standing::Plaintext);
    assert_eq!(during.standing(b"\x02short"), Standing::Malformed);
    assert_eq!(during.standing(&[]), Standing::Malformed);
    assert_eq!(Sealer::plaintext().standing(&under_old), Standing::OldKey);
}
