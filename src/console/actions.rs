//! What the console's forms do, each through the `ClaimService` call a gRPC caller would
//! make (so the same validation, store path and fencing), as the signed-in key's principal,
//! and logged with the key's id:
//!
//! - Redrive: the `Redrive` call;
//! - Quarantine an orphan: a `Claim` with the receipt's own fingerprint (which takes it
//!   over only if nobody holds a live lease: the Claim's fencing) and then `Quarantine` with
//!   that Claim's token and the operator's reason; any other answer to the Claim changes
//!   nothing and is shown;
//! - bulk Redrive: the namespace's dead letters, a page at a time, each by `Redrive`, at
//!   most as many as the confirmation stated.

use super::reads::named;
use super::routes::{Answer, Fields, redirect};
use super::session::Session;
use super::{Console, failure, views};
use crate::domain::State;
use crate::pb::{self, claim_service_server::ClaimService};
use crate::store::{DEFAULT_PAGE_BYTES, ListQuery};
use http::StatusCode;

/// The lease the console's Claim takes before it quarantines (it settles at once).
const QUARANTINE_LEASE_SECS: i64 = 30;
/// The longest reason the console passes on (Quarantine's own limit is 64 KiB).
const MAX_REASON: usize = 4096;

/// A call as the session's principal, as the authentication layer would make it.
fn call<T>(session: &Session, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(session.principal.clone());
    request
}

/// The receipt's page with a note of what was done.
fn back_to(namespace: &str, key: &str, done: &str) -> Answer {
    let query =
        serde_urlencoded::to_string([("namespace", namespace), ("key", key), ("done", done)])
            .unwrap_or_default();
    redirect(&format!("/receipt?{query}"))
}

/// `POST /receipt/redrive`: a dead letter gets a fresh budget and is due now.
pub async fn redrive(console: &Console, session: &Session, form: &Fields) -> Answer {
    let id = match named(session, form) {
        Ok(id) => id,
        Err(answer) => return *answer,
    };
    let request = pb::RedriveRequest {
        namespace: id.namespace.clone(),
        key: id.key.clone(),
    };
    match console.api.redrive(call(session, request)).await {
        Ok(_) => {
            tracing::info!(console.key_id = %session.key_id, namespace = %id.namespace,
                "console: dead letter redriven");
            back_to(&id.namespace, &id.key, "redriven")
        }
        Err(status) => failure(status, session),
    }
}

/// `POST /receipt/quarantine`: an orphan becomes a dead letter with the operator's reason.
pub async fn quarantine(console: &Console, session: &Session, form: &Fields) -> Answer {
    let id = match named(session, form) {
        Ok(id) => id,
        Err(answer) => return *answer,
    };
    let reason = form.get("reason").map(|r| r.trim()).unwrap_or("");
    if reason.is_empty() || reason.len() > MAX_REASON {
        let why = "reason: say why, in at most 4,096 bytes";
        return views::message(StatusCode::BAD_REQUEST, why, Some(session));
    }
    let tenant = &session.principal.tenant;
    let receipt = match console.api.store().get(tenant, &id).await {
        Ok(Some(receipt)) => receipt,
        Ok(None) => {
            return views::message(StatusCode::NOT_FOUND, "No such receipt.", Some(session));
        }
        Err(e) => return failure(e.into(), session),
    };
    let claim = pb::ClaimRequest {
        namespace: id.namespace.clone(),
        key: id.key.clone(),
        fingerprint: receipt.fingerprint.clone(),
        lease_ttl: Some(prost_types::Duration {
            seconds: QUARANTINE_LEASE_SECS,
            nanos: 0,
        }),
        ..Default::default()
    };
    let claimed = match console.api.claim(call(session, claim)).await {
        Ok(answer) => answer.into_inner(),
        Err(status) => return failure(status, session),
    };
    if claimed.decision != pb::Decision::Claimed as i32 {
        let decision =
            pb::Decision::try_from(claimed.decision).map_or("unknown", |d| d.as_str_name());
        let why = format!(
            "Not quarantined: it is not an orphan now (a Claim was answered {decision}). \
             Nothing changed."
        );
        return views::message(StatusCode::CONFLICT, &why, Some(session));
    }
    let request = pb::QuarantineRequest {
        namespace: id.namespace.clone(),
        key: id.key.clone(),
        claim_token: claimed.claim_token,
        error: reason.to_owned(),
    };
    match console.api.quarantine(call(session, request)).await {
        Ok(_) => {
            tracing::info!(console.key_id = %session.key_id, namespace = %id.namespace,
                "console: orphan quarantined");
            back_to(&id.namespace, &id.key, "quarantined")
        }
        Err(status) => failure(status, session),
    }
}

/// `POST /dead-letters/redrive`: up to the confirmed count of the namespace's dead letters.
pub async fn bulk_redrive(console: &Console, session: &Session, form: &Fields) -> Answer {
    let namespace = form.get("namespace").cloned().unwrap_or_default();
    if crate::domain::check_name(&namespace, crate::domain::MAX_NAMESPACE).is_err()
        || session.principal.check(Some(&namespace)).is_err()
    {
        let why = "namespace: not one your key may use";
        return views::message(StatusCode::BAD_REQUEST, why, Some(session));
    }
    let Some(confirmed) = form.get("count").and_then(|c| c.parse::<u64>().ok()) else {
        let why = "count: the confirmation's count is missing";
        return views::message(StatusCode::BAD_REQUEST, why, Some(session));
    };
    let store = console.api.store();
    let tenant = &session.principal.tenant;
    let (mut redriven, mut failed) = (0u64, 0u64);
    let mut after = None;
    'pages: while redriven + failed < confirmed {
        let query = ListQuery {
            namespace: Some(namespace.clone()),
            states: vec![State::Quarantined],
            limit: 500,
            max_bytes: DEFAULT_PAGE_BYTES,
            after: after.take(),
            key_prefix: None,
            updated_since: None,
        };
        let page = match store.list(tenant, &query).await {
            Ok(page) => page,
            Err(e) => return failure(e.into(), session),
        };
        for receipt in page.receipts {
            if redriven + failed >= confirmed {
                break 'pages;
            }
            let request = pb::RedriveRequest {
                namespace: receipt.id.namespace,
                key: receipt.id.key,
            };
            match console.api.redrive(call(session, request)).await {
                Ok(_) => redriven += 1,
                Err(_) => failed += 1,
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    tracing::info!(console.key_id = %session.key_id, %namespace, redriven, failed,
        "console: dead letters redriven");
    let left = match store.namespace_counts(tenant).await {
        Ok(counts) => counts
            .iter()
            .find(|c| c.namespace == namespace)
            .map_or(0, |c| c.quarantined),
        Err(e) => return failure(e.into(), session),
    };
    views::bulk_done(session, &namespace, redriven, failed, left)
}
