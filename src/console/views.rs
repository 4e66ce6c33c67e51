//! The console's HTML, written with maud: every value interpolated into a page is escaped,
//! so a key, a namespace or a last error is always text, never markup. One layout (a skip
//! link, the navigation, `<main>`), light and dark by `prefers-color-scheme`; the stylesheet
//! and the script are embedded in the binary ([`CSS`], [`JS`]) and the script only adds live
//! updates of the overview: every page and form works without it.

mod quotas;
mod receipts;

pub use receipts::{Filter, Listed, not_quarantined, receipt, receipts};

use super::routes::Answer;
use super::session::Session;
use crate::store::NamespaceCounts;
use crate::telemetry::activity::{Rates, WINDOW_SECS};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use maud::{DOCTYPE, Markup, html};
use std::collections::HashMap;

/// The stylesheet, served at `/assets/console.css`.
pub const CSS: &str = include_str!("assets/console.css");
/// The script, served at `/assets/console.js`.
pub const JS: &str = include_str!("assets/console.js");

/// An embedded asset.
pub fn asset(content_type: &'static str, body: &'static str) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    let headers = answer.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    answer
}

/// A page as an answer.
pub fn page(status: StatusCode, markup: Markup) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(markup.into_string())));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    answer
}

/// The layout around `content`; the navigation and sign-out only for a session.
pub fn layout(title: &str, session: Option<&Session>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · claimd console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header {
                    span.brand { "claimd console" }
                    @if let Some(session) = session {
                        nav aria-label="Main" {
                            a href="/" { "Overview" }
                            a href="/receipts" { "Receipts" }
                            a href="/receipts?state=quarantined" { "Dead letters" }
                            a href="/receipts?state=orphaned" { "Orphans" }
                        }
                        span.who { "Tenant " strong #tenant { (session.principal.tenant) } }
                        form.inline method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(session.csrf);
                            button #sign-out type="submit" { "Sign out" }
                        }
                    }
                }
                main #main tabindex="-1" { h1 { (title) } (content) }
            }
        }
    }
}

/// A page that only says something (an error, a refusal), with `status`.
pub fn message(status: StatusCode, text: &str, session: Option<&Session>) -> Answer {
    let title = status.canonical_reason().unwrap_or("Error");
    page(
        status,
        layout(title, session, html! { p #message role="alert" { (text) } }),
    )
}

/// The sign-in page, with why the last attempt failed.
pub fn sign_in(problem: Option<&str>, status: StatusCode) -> Answer {
    let content = html! {
        @if let Some(problem) = problem { p #message role="alert" { (problem) } }
        form.card method="post" action="/login" {
            label for="key" { "API key" }
            input #key name="key" type="password" autocomplete="off" required autofocus;
            p.hint { "A key from " code { "claimd keys create --tenant NAME" } ". You see its \
                tenant's receipts only (and only its namespaces, if it is limited to some)." }
            button #sign-in type="submit" { "Sign in" }
        }
    };
    page(status, layout("Sign in", None, content))
}

fn rate(value: f64) -> String {
    if value == 0.0 {
        "0".to_owned()
    } else if value < 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.0}")
    }
}

/// A link to the list of `namespace`'s receipts in `state`.
fn list_link(namespace: &str, state: &str) -> String {
    let query = serde_urlencoded::to_string([("namespace", namespace), ("state", state)]);
    format!("/receipts?{}", query.unwrap_or_default())
}

/// `GET /`: a row per namespace.
pub fn overview(
    session: &Session,
    counts: &[NamespaceCounts],
    rates: &HashMap<String, Rates>,
    untracked: bool,
    usage: &crate::api::quota::Usage,
) -> Answer {
    let claims: f64 = rates.values().map(|r| r.claims).sum();
    let content = html! {
        div #live data-refresh="5" {
            (quotas::quotas(usage, claims))
            @if counts.is_empty() {
                p #empty { "No receipts yet." }
            } @else {
                table #overview {
                    caption { "Receipts by namespace. Claims/s and duplicates/s: this claimd's, \
                        over the last " (WINDOW_SECS) " s." }
                    thead { tr {
                        th scope="col" { "Namespace" } th scope="col" { "Processing" }
                        th scope="col" { "Retry wait" } th scope="col" { "Completed" }
                        th scope="col" { "Dead letters" } th scope="col" { "Orphans" }
                        th scope="col" { "Claims/s" } th scope="col" { "Duplicates/s" }
                        th scope="col" { span.sr { "Actions" } }
                    } }
                    tbody { @for c in counts {
                        @let r = rates.get(&c.namespace).copied().unwrap_or_default();
                        tr data-namespace=(c.namespace) {
                            th scope="row" { a href=(list_link(&c.namespace, "")) { (c.namespace) } }
                            td { a href=(list_link(&c.namespace, "processing")) { (c.processing) } }
                            td { a href=(list_link(&c.namespace, "retry_wait")) { (c.retry_wait) } }
                            td { a href=(list_link(&c.namespace, "completed")) { (c.completed) } }
                            td.dead { a href=(list_link(&c.namespace, "quarantined")) { (c.quarantined) } }
                            td.orphans { a href=(list_link(&c.namespace, "orphaned")) { (c.orphans) } }
                            td { (rate(r.claims)) } td { (rate(r.duplicates)) }
                            td { @if c.quarantined > 0 {
                                a.button href={ "/dead-letters/redrive?" (serde_urlencoded::to_string([("namespace", &c.namespace)]).unwrap_or_default()) } {
                                    "Redrive all…"
                                }
                            } }
                        }
                    } }
                }
            }
            @if untracked { p.hint { "Some namespaces' rates are not tracked: this claimd \
                tracks at most 4,096 tenants' namespaces." } }
        }
    };
    page(StatusCode::OK, layout("Overview", Some(session), content))
}

/// `GET /dead-letters/redrive`: the confirmation, stating the count.
pub fn confirm_bulk(session: &Session, namespace: &str, count: u64) -> Answer {
    let content = html! {
        @if count == 0 {
            p #message { "There are no dead letters in " strong { (namespace) } "." }
        } @else {
            form.card method="post" action="/dead-letters/redrive" {
                p #confirm { "Redrive " strong #count { (count) } " dead letter"
                    @if count != 1 { "s" } " of " strong { (namespace) } "? Each gets a fresh \
                    attempt budget and is due at once." }
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="namespace" value=(namespace);
                input type="hidden" name="count" value=(count);
                button #redrive-all type="submit" { "Redrive " (count) }
                " " a href="/" { "Cancel" }
            }
        }
    };
    page(
        StatusCode::OK,
        layout("Redrive dead letters", Some(session), content),
    )
}

/// After a bulk Redrive: what it did and what is left.
pub fn bulk_done(session: &Session, namespace: &str, done: u64, failed: u64, left: u64) -> Answer {
    let content = html! {
        p #message role="status" { "Redrove " strong #redriven { (done) } " dead letter"
            @if done != 1 { "s" } " of " (namespace) "."
            @if failed > 0 { " " (failed) " could not be redriven (changed meanwhile?)." }
            " Dead letters left: " (left) "." }
        p { a href=(list_link(namespace, "retry_wait")) { "See them waiting to be claimed" } }
    };
    page(
        StatusCode::OK,
        layout("Dead letters redriven", Some(session), content),
    )
}
