//! The console's pages: what a GET shows. Every read is the signed-in key's tenant's only,
//! and of a namespace the key may use (`Principal::check`), through the store's own reads
//! (the ones `Get`, `List` and `ListOrphaned` use).

use super::routes::{Answer, Fields};
use super::session::Session;
use super::views::{self, Filter, Listed};
use super::{Console, failure};
use crate::domain::{ReceiptKey, State};
use crate::store::{DEFAULT_PAGE_BYTES, ListQuery, OrphanQuery};
use chrono::TimeDelta;
use http::StatusCode;

/// Receipts on one page of the list.
pub const PAGE_SIZE: u32 = 50;

/// `GET /`: the tenant's namespaces by state, orphans, dead letters and this process's
/// claims/s and duplicates/s.
pub async fn overview(console: &Console, session: &Session) -> Answer {
    let tenant = &session.principal.tenant;
    let counts = match console.api.store().namespace_counts(tenant).await {
        Ok(counts) => counts,
        Err(e) => return failure(e.into(), session),
    };
    let visible = counts
        .into_iter()
        .filter(|c| session.principal.check(Some(&c.namespace)).is_ok())
        .collect::<Vec<_>>();
    let activity = console.api.activity();
    let usage = console.api.quota_usage(tenant);
    // The storage limits' figures are the store's: read only for a tenant that has one.
    let storage = console.api.storage_quota(tenant);
    let usage = match storage.is_unlimited() {
        true => usage,
        false => match console.api.store().tenant_usage(tenant).await {
            Ok(figures) => usage.stored(storage, figures),
            Err(e) => return failure(e.into(), session),
        },
    };
    views::overview(
        session,
        &visible,
        &activity.rates(tenant),
        activity.full(),
        &usage,
    )
}

/// The list's filter from the query string; `Err` names the field that is wrong.
fn filter(session: &Session, query: &Fields) -> Result<Filter, String> {
    let text = |name: &str| query.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let namespace = match text("namespace") {
        Some(ns) => {
            crate::domain::check_name(ns, crate::domain::MAX_NAMESPACE)
                .map_err(|e| format!("namespace: {e}"))?;
            Some(ns.to_owned())
        }
        // A key limited to namespaces lists its first one unless told otherwise.
        None => session
            .principal
            .namespaces
            .as_ref()
            .and_then(|n| n.first().cloned()),
    };
    if session.principal.check(namespace.as_deref()).is_err() {
        return Err("namespace: your key may not use it".to_owned());
    }
    let state = text("state").unwrap_or("").to_owned();
    if ![
        "",
        "orphaned",
        "processing",
        "retry_wait",
        "completed",
        "quarantined",
    ]
    .contains(&state.as_str())
    {
        return Err("state: not a state".to_owned());
    }
    let prefix = text("prefix").map(str::to_owned);
    if prefix
        .as_ref()
        .is_some_and(|p| p.len() > crate::api::MAX_KEY)
    {
        return Err("prefix: longer than a key may be".to_owned());
    }
    let since = text("since").unwrap_or("").to_owned();
    let window = match since.as_str() {
        "" => None,
        "15m" => Some(TimeDelta::minutes(15)),
        "1h" => Some(TimeDelta::hours(1)),
        "24h" => Some(TimeDelta::hours(24)),
        "7d" => Some(TimeDelta::days(7)),
        _ => return Err("since: not one of the offered windows".to_owned()),
    };
    let after = crate::api::decode_list_token(text("page").unwrap_or(""))
        .map_err(|_| "page: not a page token of this list".to_owned())?;
    Ok(Filter {
        namespace,
        state,
        prefix,
        since,
        window,
        after,
    })
}

/// `GET /receipts`: one page of the filtered list (orphans: the oldest due first).
pub async fn receipts(console: &Console, session: &Session, query: &Fields) -> Answer {
    let filter = match filter(session, query) {
        Ok(filter) => filter,
        Err(why) => return views::message(StatusCode::BAD_REQUEST, &why, Some(session)),
    };
    let store = console.api.store();
    let tenant = &session.principal.tenant;
    let listed = if filter.state == "orphaned" {
        let query = OrphanQuery {
            namespace: filter.namespace.clone(),
            limit: PAGE_SIZE,
            max_bytes: DEFAULT_PAGE_BYTES,
            after: None,
            overdue_by: TimeDelta::zero(),
        };
        store
            .list_orphaned(tenant, &query)
            .await
            .map(|page| Listed {
                receipts: page.orphans,
                next: None,
            })
    } else {
        let since = filter.window.map(|w| store.clock_estimate() - w);
        let states = match filter.state.as_str() {
            "" => Vec::new(),
            name => State::parse(name).into_iter().collect(),
        };
        let query = ListQuery {
            namespace: filter.namespace.clone(),
            states,
            limit: PAGE_SIZE,
            max_bytes: DEFAULT_PAGE_BYTES,
            after: filter.after.clone(),
            key_prefix: filter.prefix.clone(),
            updated_since: since,
        };
        store.list(tenant, &query).await.map(|page| Listed {
            receipts: page.receipts,
            next: page.next.as_ref().map(crate::api::encode_list_token),
        })
    };
    match listed {
        Ok(listed) => views::receipts(session, &filter, &listed),
        Err(e) => failure(e.into(), session),
    }
}

/// The receipt a query or form names, if the key may see it: `Err` with the answer.
pub fn named(session: &Session, fields: &Fields) -> Result<ReceiptKey, Box<Answer>> {
    let namespace = fields.get("namespace").cloned().unwrap_or_default();
    let key = fields.get("key").cloned().unwrap_or_default();
    let bad = |why: String| Box::new(views::message(StatusCode::BAD_REQUEST, &why, Some(session)));
    crate::domain::check_name(&namespace, crate::domain::MAX_NAMESPACE)
        .map_err(|e| bad(format!("namespace: {e}")))?;
    if key.is_empty() || key.len() > crate::api::MAX_KEY || key.contains('\0') {
        return Err(bad("key: 1 to 512 bytes, no NUL".to_owned()));
    }
    if session.principal.check(Some(&namespace)).is_err() {
        let why = "Your key may not use this namespace.";
        return Err(Box::new(views::message(
            StatusCode::FORBIDDEN,
            why,
            Some(session),
        )));
    }
    Ok(ReceiptKey { namespace, key })
}

/// `GET /receipt`: one receipt, with the actions its state allows.
pub async fn receipt(console: &Console, session: &Session, query: &Fields) -> Answer {
    let id = match named(session, query) {
        Ok(id) => id,
        Err(answer) => return *answer,
    };
    let store = console.api.store();
    match store.get(&session.principal.tenant, &id).await {
        Ok(Some(receipt)) => {
            let now = store.clock_estimate();
            let shown = console.shows_payloads(&id.namespace);
            let done = query.get("done").map(String::as_str);
            views::receipt(session, &receipt, now, shown, done)
        }
        Ok(None) => views::message(StatusCode::NOT_FOUND, "No such receipt.", Some(session)),
        Err(e) => failure(e.into(), session),
    }
}

/// `GET /dead-letters/redrive`: the confirmation, stating how many dead letters there are.
pub async fn confirm_bulk(console: &Console, session: &Session, query: &Fields) -> Answer {
    let namespace = query.get("namespace").cloned().unwrap_or_default();
    if crate::domain::check_name(&namespace, crate::domain::MAX_NAMESPACE).is_err()
        || session.principal.check(Some(&namespace)).is_err()
    {
        let why = "namespace: not one your key may use";
        return views::message(StatusCode::BAD_REQUEST, why, Some(session));
    }
    let tenant = &session.principal.tenant;
    match console.api.store().namespace_counts(tenant).await {
        Ok(counts) => {
            let dead = counts
                .iter()
                .find(|c| c.namespace == namespace)
                .map_or(0, |c| c.quarantined);
            views::confirm_bulk(session, &namespace, dead)
        }
        Err(e) => failure(e.into(), session),
    }
}
