//! Request validation (docs/DESIGN.md §2 "Error model"): every check names its field and never
//! echoes the value, which may be a secret.

use super::error::InvalidField;
use crate::domain::{MAX_DELAY, MAX_NAMESPACE, State};
use crate::pb;
use chrono::TimeDelta;
use uuid::Uuid;

/// Longest key, in bytes.
pub const MAX_KEY: usize = 512;
/// Longest fingerprint, in bytes.
pub const MAX_FINGERPRINT: usize = 64;
/// Default limit for each blob (payloads, checkpoint, response, error text).
pub const DEFAULT_MAX_BLOB: usize = 64 * 1024;

/// The largest request message claimd decodes (tonic's `max_decoding_message_size`; larger
/// is RESOURCE_EXHAUSTED before the body is read). The largest valid request is a Claim:
/// namespace 128 + key 512 + fingerprint 64 + recovery payload 65,536 bytes, two Durations
/// (≤ 24 each) and `delivery_attempt` (≤ 6), and a tag and length (≤ 4) per field: under
/// 66,350 bytes. Complete, Heartbeat, Retry and Quarantine carry one 64 KiB blob and a
/// 36-byte token besides the names; the rest are smaller still. 256 KiB is about four
/// times the largest.
pub use crate::body_limit::MAX_REQUEST_BYTES;
const _: () = assert!(MAX_REQUEST_BYTES > 2 * (DEFAULT_MAX_BLOB + MAX_NAMESPACE + MAX_KEY + 1024));

/// The most bytes one receipt takes on the wire: four blobs of at most 64 KiB (the error
/// text may carry claimd's 23-byte "exceeded max attempts: " prefix), the namespace, key
/// and fingerprint, and the rest of its fields (`store::RECEIPT_OVERHEAD`).
pub const MAX_RECEIPT_BYTES: usize = 4 * DEFAULT_MAX_BLOB
    + 64
    + MAX_NAMESPACE
    + MAX_KEY
    + MAX_FINGERPRINT
    + crate::store::RECEIPT_OVERHEAD;

/// The largest response message claimd encodes (`max_encoding_message_size`) with pages
/// of at most `page_bytes`: a page holds no more than that, or one receipt that alone is
/// larger; 64 KiB more covers the page token (base64 of a namespace and key) and the
/// message's own framing.
pub fn max_response_bytes(page_bytes: usize) -> usize {
    page_bytes.max(MAX_RECEIPT_BYTES).saturating_add(64 * 1024)
}

type Checked<T> = Result<T, InvalidField>;

/// `[A-Za-z0-9._:/-]{1,128}` (`domain::check_name`).
pub fn namespace(field: &'static str, ns: &str) -> Checked<()> {
    crate::domain::check_name(ns, MAX_NAMESPACE)
        .map_err(|e| InvalidField::new(field, e.to_string()))
}

/// 1 to 512 bytes, no NUL.
pub fn key(k: &str) -> Checked<()> {
    if k.is_empty() {
        return Err(InvalidField::new("key", "must not be empty"));
    }
    if k.len() > MAX_KEY {
        return Err(InvalidField::new(
            "key",
            format!("must be at most {MAX_KEY} bytes"),
        ));
    }
    if k.contains('\0') {
        return Err(InvalidField::new("key", "must not contain NUL"));
    }
    Ok(())
}

/// At most 64 bytes.
pub fn fingerprint(fp: &[u8]) -> Checked<()> {
    if fp.len() > MAX_FINGERPRINT {
        return Err(InvalidField::new(
            "fingerprint",
            format!("must be at most {MAX_FINGERPRINT} bytes"),
        ));
    }
    Ok(())
}

/// A blob within `max` bytes; empty means absent.
pub fn blob(field: &'static str, b: Vec<u8>, max: usize) -> Checked<Option<Vec<u8>>> {
    if b.len() > max {
        return Err(InvalidField::new(
            field,
            format!("must be at most {max} bytes"),
        ));
    }
    Ok((!b.is_empty()).then_some(b))
}

/// Error text within `max` bytes.
pub fn text(field: &'static str, s: String, max: usize) -> Checked<String> {
    if s.len() > max {
        return Err(InvalidField::new(
            field,
            format!("must be at most {max} bytes"),
        ));
    }
    Ok(s)
}

/// An optional duration within `min ..= MAX_DELAY`.
pub fn duration(
    field: &'static str,
    d: Option<prost_types::Duration>,
    min: TimeDelta,
) -> Checked<Option<TimeDelta>> {
    duration_within(field, d, min, MAX_DELAY)
}

/// As [`duration`], at most `max`.
fn duration_within(
    field: &'static str,
    d: Option<prost_types::Duration>,
    min: TimeDelta,
    max: TimeDelta,
) -> Checked<Option<TimeDelta>> {
    let Some(d) = d else { return Ok(None) };
    let mixed_signs = (d.seconds > 0 && d.nanos < 0) || (d.seconds < 0 && d.nanos > 0);
    if mixed_signs || d.nanos.unsigned_abs() >= 1_000_000_000 {
        return Err(InvalidField::new(field, "is not a valid duration"));
    }
    let out_of_range = || {
        let min_text = if min.is_zero() {
            "0 s".to_owned()
        } else {
            format!("{} s", min.num_seconds())
        };
        let max_text = match max == MAX_DELAY {
            true => "24 h".to_owned(),
            false => format!("{} s", max.num_seconds()),
        };
        InvalidField::new(field, format!("must be between {min_text} and {max_text}"))
    };
    let delta = TimeDelta::try_seconds(d.seconds)
        .and_then(|s| s.checked_add(&TimeDelta::nanoseconds(i64::from(d.nanos))))
        .ok_or_else(out_of_range)?;
    if delta < min || delta > max {
        return Err(out_of_range());
    }
    Ok(Some(delta))
}

/// Claim's `wait`: 0 to [`super::MAX_WAIT`]; `None` when unset or 0.
pub fn wait(d: Option<prost_types::Duration>) -> Checked<Option<std::time::Duration>> {
    // The constant is a whole number of seconds, well inside TimeDelta's range.
    let max = TimeDelta::from_std(super::MAX_WAIT).unwrap_or(MAX_DELAY);
    let wait = duration_within("wait", d, TimeDelta::zero(), max)?;
    Ok(wait.and_then(|w| w.to_std().ok()).filter(|w| !w.is_zero()))
}

/// A claim token: the UUID minted by Claim.
pub fn claim_token(t: &str) -> Checked<Uuid> {
    if t.is_empty() {
        return Err(InvalidField::new("claim_token", "must not be empty"));
    }
    Uuid::try_parse(t).map_err(|_| InvalidField::new("claim_token", "is not a claim token"))
}

/// An optional namespace filter: empty means every namespace.
pub fn optional_namespace(field: &'static str, ns: String) -> Checked<Option<String>> {
    if ns.is_empty() {
        return Ok(None);
    }
    namespace(field, &ns)?;
    Ok(Some(ns))
}

/// A state filter: every value must be a known state other than `STATE_UNSPECIFIED`.
pub fn states(field: &'static str, values: &[i32]) -> Checked<Vec<State>> {
    values
        .iter()
        .map(|&v| match pb::State::try_from(v) {
            Ok(pb::State::Processing) => Ok(State::Processing),
            Ok(pb::State::RetryWait) => Ok(State::RetryWait),
            Ok(pb::State::Completed) => Ok(State::Completed),
            Ok(pb::State::Quarantined) => Ok(State::Quarantined),
            Ok(pb::State::Unspecified) | Err(_) => Err(InvalidField::new(
                field,
                "may only hold STATE_PROCESSING, STATE_RETRY_WAIT, STATE_COMPLETED or \
                 STATE_QUARANTINED",
            )),
        })
        .collect()
}

/// 0 means the default (100); larger than 1000 is cut to 1000; negative is an error.
pub fn page_size(n: i32) -> Checked<u32> {
    match n {
        0 => Ok(100),
        n if n < 0 => Err(InvalidField::new("page_size", "must not be negative")),
        n => Ok(n.unsigned_abs().min(1000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::MIN_DELAY;

    fn dur(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
        Some(prost_types::Duration { seconds, nanos })
    }

    #[test]
    fn namespaces_follow_the_documented_alphabet() {
        assert!(namespace("namespace", "slack-events/v1:prod_2.x").is_ok());
        for bad in ["", "has space", "ümlaut", &"a".repeat(129)] {
            let err = namespace("namespace", bad).unwrap_err();
            assert_eq!(err.field, "namespace");
        }
    }

    #[test]
    fn durations_outside_one_second_to_a_day_are_rejected() {
        assert_eq!(duration("lease_ttl", None, MIN_DELAY), Ok(None));
        assert_eq!(
            duration("lease_ttl", dur(1, 0), MIN_DELAY),
            Ok(Some(MIN_DELAY))
        );
        assert_eq!(
            duration("lease_ttl", dur(86_400, 0), MIN_DELAY),
            Ok(Some(MAX_DELAY))
        );
        for bad in [
            dur(0, 999_999_999),
            dur(86_400, 1),
            dur(-5, 0),
            dur(1, -1),
            dur(i64::MAX, 0),
            // `i32::MIN.abs()` overflows: found by the hostile-input fuzz (tests/it/hostile).
            dur(0, i32::MIN),
            dur(-1, i32::MIN),
        ] {
            assert_eq!(
                duration("lease_ttl", bad, MIN_DELAY).unwrap_err().field,
                "lease_ttl"
            );
        }
        assert_eq!(
            duration("overdue_by", dur(0, 0), TimeDelta::zero()),
            Ok(Some(TimeDelta::zero()))
        );
    }

    #[test]
    fn state_filters_take_known_states_only() {
        let quarantined = pb::State::Quarantined as i32;
        assert_eq!(states("states", &[]), Ok(vec![]));
        assert_eq!(
            states("states", &[quarantined, pb::State::RetryWait as i32]),
            Ok(vec![State::Quarantined, State::RetryWait])
        );
        for bad in [0, 5, -1] {
            let err = states("states", &[quarantined, bad]).unwrap_err();
            assert_eq!(err.field, "states");
        }
    }

    #[test]
    fn page_sizes_default_and_cap() {
        assert_eq!(page_size(0), Ok(100));
        assert_eq!(page_size(5000), Ok(1000));
        assert!(page_size(-1).is_err());
    }
}
