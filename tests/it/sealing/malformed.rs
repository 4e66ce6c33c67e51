//! Issue 46 §11, on both stores through the real server: an orphan whose stored last error
//! opens (its tag verifies: it is sealed under the configured key, for its own row and
//! life) but is not UTF-8 does not fail the ListOrphaned page. It is quarantined in place
//! as damaged data is (docs/DESIGN.md §3.6.4), with a last error saying why, its other
//! fields left as they are; the other orphans are listed, page after page.

use super::{PAYLOAD, RETRY_ERROR, orphan_keys, retry_with};
use crate::common::app::{Backend, TestApp, decision};
use crate::common::raw;
use crate::common::receipt_ops::{FP, NS, claim, claim_request, claimed, get, secs};
use claimd::pb::{self, Decision, State};
use claimd::seal::{Binding, Field};
use std::time::Duration;

/// Bytes that are no UTF-8 (a lone continuation byte, then an invalid lead byte).
const NOT_TEXT: &[u8] = b"\x80 CANARY \xff";

async fn an_orphan_whose_last_error_opens_but_is_not_utf8_is_quarantined_and_the_others_are_listed(
    backend: Backend,
) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let url = app.database_url.clone();
    for (key, lease) in [("Ev-1", 1), ("Ev-2", 2), ("Ev-3", 3)] {
        let request = pb::ClaimRequest {
            lease_ttl: secs(lease),
            ..claim_request(key, FP)
        };
        assert_eq!(decision(&claim(&app, request).await), Decision::Claimed);
    }
    let (token, _) = claimed(&app, "Ev-4", PAYLOAD).await;
    retry_with(&app, "Ev-4", &token, RETRY_ERROR).await;
    // Sealed exactly as claimd seals a last error, for Ev-4's row and life.
    let life = raw::life(&url, NS, "Ev-4").await;
    let tenant = raw::row(&url, NS, "Ev-4").await.tenant;
    let at = Binding {
        tenant: &tenant,
        namespace: NS,
        key: "Ev-4",
        life: life.as_deref().unwrap_or_default(),
    };
    let sealed = app.seal.seal(at, Field::LastError, NOT_TEXT);
    raw::write(&url, NS, "Ev-4", "last_error", Some(&sealed)).await;
    app.advance(Duration::from_secs(60));

    let mut listed: Vec<String> = orphan_keys(&app, 2).await.concat();
    listed.sort();
    assert_eq!(listed, ["Ev-1", "Ev-2", "Ev-3"]);
    assert_eq!(raw::row(&url, NS, "Ev-4").await.state, "quarantined");
    let mut again: Vec<String> = orphan_keys(&app, 10).await.concat();
    again.sort();
    assert_eq!(again, listed);

    // A dead letter now, which says why; its payload is still there, and no byte of the
    // value that was not text came back.
    let r = get(&app, "Ev-4").await;
    assert_eq!(r.state(), State::Quarantined);
    assert!(r.last_error.contains("not UTF-8"), "{}", r.last_error);
    assert!(!r.last_error.contains("CANARY"), "{}", r.last_error);
    assert_eq!(r.recovery_payload, PAYLOAD);
    app.shutdown().await;
}

conformance!(
    an_orphan_whose_last_error_opens_but_is_not_utf8_is_quarantined_and_the_others_are_listed,
);
