//! Domain values ↔ wire messages: receipts, decisions, timestamps and page tokens.
//!
//! Page tokens are base64url (no padding) JSON of the last row's sort key: opaque to
//! clients, checked on the way in (INVALID_ARGUMENT naming `page_token`). Each RPC accepts
//! only its own tokens.

use super::error::InvalidField;
use crate::domain::{Decision, Receipt, State, Timestamp};
use crate::pb;
use crate::store::{ListCursor, OrphanCursor};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::DateTime;

fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        // Always below 10^9 for a chrono timestamp.
        nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The wire form of a receipt. The claim token is never part of it.
pub fn receipt(r: Receipt) -> pb::Receipt {
    pb::Receipt {
        namespace: r.id.namespace,
        key: r.id.key,
        state: state(r.state) as i32,
        attempt: r.attempt,
        fingerprint: r.fingerprint,
        lease_expires_at: r.lease_expires_at.map(timestamp),
        next_attempt_at: r.next_attempt_at.map(timestamp),
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
        completed_at: r.completed_at.map(timestamp),
        last_error: r.last_error.unwrap_or_default(),
        checkpoint: r.checkpoint.unwrap_or_default(),
        response: r.response.unwrap_or_default(),
        recovery_payload: r.recovery_payload.unwrap_or_default(),
        response_pruned_at: r.response_pruned_at.map(timestamp),
    }
}

/// The wire form of a state.
pub fn state(s: State) -> pb::State {
    match s {
        State::Processing => pb::State::Processing,
        State::RetryWait => pb::State::RetryWait,
        State::Completed => pb::State::Completed,
        State::Quarantined => pb::State::Quarantined,
    }
}

/// The wire form of a decision.
pub fn decision(d: Decision) -> pb::Decision {
    match d {
        Decision::Claimed => pb::Decision::Claimed,
        Decision::InFlight => pb::Decision::InFlight,
        Decision::Completed => pb::Decision::Completed,
        Decision::RetryScheduled => pb::Decision::RetryScheduled,
        Decision::Quarantined => pb::Decision::Quarantined,
        Decision::Conflict => pb::Decision::Conflict,
    }
}

/// Why a receipt is an orphan.
pub fn orphan(r: Receipt) -> pb::Orphan {
    let reason = match r.state {
        State::RetryWait => pb::OrphanReason::RetryDue,
        _ => pb::OrphanReason::LeaseExpired,
    };
    pb::Orphan {
        receipt: Some(receipt(r)),
        reason: reason as i32,
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PageToken {
    /// Due time, microseconds since the epoch.
    d: i64,
    /// Namespace.
    n: String,
    /// Key.
    k: String,
}

/// An opaque page token for the cursor.
pub fn encode_page_token(c: &OrphanCursor) -> String {
    let token = PageToken {
        d: c.due_at.timestamp_micros(),
        n: c.namespace.clone(),
        k: c.key.clone(),
    };
    // Serializing a struct of plain strings and integers cannot fail.
    let json = serde_json::to_vec(&token).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// The cursor in a page token; an empty token is the first page.
pub fn decode_page_token(s: &str) -> Result<Option<OrphanCursor>, InvalidField> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || InvalidField::new("page_token", "is not a page token from ListOrphaned");
    let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
    let token: PageToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok(Some(OrphanCursor {
        due_at: DateTime::from_timestamp_micros(token.d).ok_or_else(bad)?,
        namespace: token.n,
        key: token.k,
    }))
}

/// A List page token: the last receipt's namespace and key. Unknown fields are refused, so
/// a ListOrphaned token is not mistaken for one (nor the other way round: `d` is missing).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ListToken {
    /// Namespace.
    n: String,
    /// Key.
    k: String,
}

/// An opaque List page token for the cursor.
pub fn encode_list_token(c: &ListCursor) -> String {
    let token = ListToken {
        n: c.namespace.clone(),
        k: c.key.clone(),
    };
    // Serializing a struct of plain strings cannot fail.
    let json = serde_json::to_vec(&token).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

/// The cursor in a List page token; an empty token is the first page.
pub fn decode_list_token(s: &str) -> Result<Option<ListCursor>, InvalidField> {
    if s.is_empty() {
        return Ok(None);
    }
    let bad = || InvalidField::new("page_token", "is not a page token from List");
    let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
    let token: ListToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok(Some(ListCursor {
        namespace: token.n,
        key: token.k,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_tokens_round_trip_and_orphan_tokens_are_not_list_tokens() {
        let c = ListCursor {
            namespace: "ns".into(),
            key: "k/ü".into(),
        };
        assert_eq!(decode_list_token(&encode_list_token(&c)), Ok(Some(c)));
        assert_eq!(decode_list_token(""), Ok(None));
        let orphan = encode_page_token(&OrphanCursor {
            due_at: DateTime::from_timestamp_micros(1).unwrap(),
            namespace: "ns".into(),
            key: "k".into(),
        });
        assert_eq!(decode_list_token(&orphan).unwrap_err().field, "page_token");
        let list = encode_list_token(&ListCursor {
            namespace: "ns".into(),
            key: "k".into(),
        });
        assert_eq!(decode_page_token(&list).unwrap_err().field, "page_token");
        for bad in ["!!!", "bm90IGpzb24", "e30"] {
            assert_eq!(decode_list_token(bad).unwrap_err().field, "page_token");
        }
    }

    #[test]
    fn page_tokens_round_trip_and_garbage_is_rejected() {
        let c = OrphanCursor {
            due_at: DateTime::from_timestamp_micros(1_800_000_000_123_456).unwrap(),
            namespace: "ns".into(),
            key: "k/ü".into(),
        };
        assert_eq!(decode_page_token(&encode_page_token(&c)), Ok(Some(c)));
        assert_eq!(decode_page_token(""), Ok(None));
        for bad in ["!!!", "bm90IGpzb24", "e30"] {
            assert_eq!(decode_page_token(bad).unwrap_err().field, "page_token");
        }
    }
}
