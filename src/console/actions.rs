//! What the console's forms do, as the signed-in key's principal (its tenant, its
//! namespaces), each logged with the key's id:
//!
//! - Redrive: the `Redrive` call a gRPC caller would make (the same validation and store
//!   path);
//! - Quarantine an orphan: one write, the store's `quarantine_orphan` (a compare-and-set on
//!   the receipt the page showed — its life, state, attempt and last change, which the form
//!   carries back — that quarantines it with the operator's reason only while it is an
//!   orphan at the store's now). No claim is taken: no attempt is spent, no lease is left
//!   behind, and a missing receipt is never inserted. The page answers what happened: done,
//!   refused with nothing changed (saying what differs), or the store's failure and whether
//!   the receipt may have been quarantined all the same;
//! - bulk Redrive: the namespace's dead letters, a page at a time, each by `Redrive`, at
//!   most as many as the confirmation stated.

use super::reads::named;
use super::routes::{Answer, Fields, redirect};
use super::session::Session;
use super::{Console, console_status, failure, views};
use crate::domain::{Seen, State};
use crate::pb::{self, claim_service_server::ClaimService};
use crate::store::{DEFAULT_PAGE_BYTES, ListQuery, StoreError};
use http::StatusCode;

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

/// What the receipt page's form says the operator saw (`views::receipt` writes it): the
/// receipt's life (`created`), last change (`changed`, both in microseconds since the
/// epoch), `state` and `attempt`.
fn seen(form: &Fields) -> Option<Seen> {
    let micros = |name: &str| {
        let micros = form.get(name)?.parse::<i64>().ok()?;
        chrono::DateTime::from_timestamp_micros(micros)
    };
    Some(Seen {
        created_at: micros("created")?,
        updated_at: micros("changed")?,
        state: State::parse(form.get("state")?)?,
        attempt: form.get("attempt")?.parse().ok()?,
    })
}

/// `POST /receipt/quarantine`: the orphan the operator saw becomes a dead letter with the
/// operator's reason, in one compare-and-set write — or nothing changes, and the page says
/// why (it changed since, or is not an orphan now), or that the store failed and whether
/// the receipt may have been quarantined all the same.
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
    let Some(seen) = seen(form) else {
        let why = "The form does not say which receipt you saw: open its page again.";
        return views::message(StatusCode::BAD_REQUEST, why, Some(session));
    };
    let store = console.api.store();
    let tenant = &session.principal.tenant;
    let (status, why) = match store.quarantine_orphan(tenant, &id, &seen, reason).await {
        Ok(Ok(receipt)) => {
            tracing::info!(console.key_id = %session.key_id, namespace = %id.namespace,
                attempt = receipt.attempt, "console: orphan quarantined");
            return back_to(&id.namespace, &id.key, "quarantined");
        }
        Ok(Err(refused)) => (
            StatusCode::CONFLICT,
            format!("Not quarantined: {refused}. Nothing changed."),
        ),
        Err(StoreError::NotFound) => (
            StatusCode::NOT_FOUND,
            "Not quarantined: there is no such receipt now (pruned since you saw it?). \
             Nothing changed."
                .to_owned(),
        ),
        Err(e) => {
            // A write whose answer was lost is `Unsure`; any other UNAVAILABLE wrote nothing.
            let unsure = matches!(e, StoreError::Unsure(_));
            let status = tonic::Status::from(e);
            let message = status.message();
            let why = if unsure {
                format!("Perhaps quarantined: {message}. It may have been: its page tells.")
            } else if status.code() == tonic::Code::Unavailable {
                format!("Not quarantined: {message}. Nothing changed.")
            } else {
                format!("Quarantine failed: {message}. Its page tells whether it was.")
            };
            (console_status(&status), why)
        }
    };
    views::not_quarantined(session, status, &why, &id)
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
