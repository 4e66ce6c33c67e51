//! The receipts list (its filter form, a page, the next page's link) and one receipt's
//! page, with the forms its state allows: Redrive for a dead letter, Quarantine for an
//! orphan (its form carries what the page showed — the receipt's life, last change, state
//! and attempt — for the compare-and-set write); and what a refused or failed Quarantine
//! says. Payloads are shown only for namespaces `--console-show-payloads` names, as text
//! (escaped like everything else); otherwise only their sizes.

use super::{layout, page};
use crate::console::routes::Answer;
use crate::console::session::Session;
use crate::domain::{Receipt, ReceiptKey, State, Timestamp};
use crate::store::ListCursor;
use chrono::TimeDelta;
use http::StatusCode;
use maud::{Markup, html};

/// The list's filter, as the query string gave it.
#[derive(Debug, Clone)]
pub struct Filter {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// `""`, `orphaned`, or a state's stored name.
    pub state: String,
    /// Only keys starting with this.
    pub prefix: Option<String>,
    /// `""` or the window's name (`15m`, `1h`, `24h`, `7d`).
    pub since: String,
    /// The window itself.
    pub window: Option<TimeDelta>,
    /// Where this page starts.
    pub after: Option<ListCursor>,
}

/// One page of the list.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its receipts.
    pub receipts: Vec<Receipt>,
    /// The next page's token, if there is one.
    pub next: Option<String>,
}

fn time(t: Option<Timestamp>) -> String {
    t.map_or("—".to_owned(), |t| {
        t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    })
}

fn size(bytes: Option<&Vec<u8>>) -> String {
    bytes.map_or("—".to_owned(), |b| format!("{} bytes", b.len()))
}

fn receipt_link(r: &Receipt) -> String {
    let query = serde_urlencoded::to_string([("namespace", &r.id.namespace), ("key", &r.id.key)]);
    format!("/receipt?{}", query.unwrap_or_default())
}

const STATES: [(&str, &str); 6] = [
    ("", "Every state"),
    ("processing", "Processing"),
    ("retry_wait", "Retry wait"),
    ("completed", "Completed"),
    ("quarantined", "Dead letters"),
    ("orphaned", "Orphans (oldest due first)"),
];

const WINDOWS: [(&str, &str); 5] = [
    ("", "Any time"),
    ("15m", "Last 15 minutes"),
    ("1h", "Last hour"),
    ("24h", "Last 24 hours"),
    ("7d", "Last 7 days"),
];

fn filter_form(filter: &Filter) -> Markup {
    html! {
        form.filters method="get" action="/receipts" role="search" {
            label { "Namespace " input name="namespace" value=[filter.namespace.as_deref()]
                pattern="[A-Za-z0-9._:\\/\\-]{1,128}"; }
            label { "State " select name="state" { @for (value, name) in STATES {
                option value=(value) selected[filter.state == value] { (name) }
            } } }
            label { "Key prefix " input name="prefix" value=[filter.prefix.as_deref()]; }
            label { "Changed " select name="since" { @for (value, name) in WINDOWS {
                option value=(value) selected[filter.since == value] { (name) }
            } } }
            button #filter type="submit" { "Filter" }
        }
    }
}

/// `GET /receipts`.
pub fn receipts(session: &Session, filter: &Filter, listed: &Listed) -> Answer {
    let next = listed.next.as_ref().map(|token| {
        let mut query = vec![("state", filter.state.as_str()), ("since", &filter.since)];
        if let Some(ns) = &filter.namespace {
            query.push(("namespace", ns));
        }
        if let Some(prefix) = &filter.prefix {
            query.push(("prefix", prefix));
        }
        query.push(("page", token));
        format!(
            "/receipts?{}",
            serde_urlencoded::to_string(query).unwrap_or_default()
        )
    });
    let content = html! {
        (filter_form(filter))
        @if filter.state == "orphaned" && (filter.prefix.is_some() || filter.window.is_some()) {
            p.hint { "Orphans are listed oldest due first; the key and time filters do not apply." }
        }
        @if listed.receipts.is_empty() {
            p #empty { "No receipts match." }
        } @else {
            table #receipts {
                thead { tr {
                    th scope="col" { "Namespace" } th scope="col" { "Key" }
                    th scope="col" { "State" } th scope="col" { "Attempt" }
                    th scope="col" { "Changed" } th scope="col" { "Last error" }
                } }
                tbody { @for r in &listed.receipts {
                    tr.receipt {
                        td { (r.id.namespace) }
                        td { a.key href=(receipt_link(r)) { (r.id.key) } }
                        td.state { (r.state.as_str()) }
                        td { (r.attempt) }
                        td { (time(Some(r.updated_at))) }
                        td.error { (r.last_error.as_deref().unwrap_or("")) }
                    }
                } }
            }
        }
        @if let Some(next) = next { p { a #next rel="next" href=(next) { "Next page" } } }
    };
    page(StatusCode::OK, layout("Receipts", Some(session), content))
}

fn payload(name: &str, bytes: Option<&Vec<u8>>, shown: bool) -> Markup {
    html! {
        dt { (name) }
        dd { (size(bytes))
            @if let (true, Some(b)) = (shown, bytes) {
                pre.payload { (String::from_utf8_lossy(b)) }
            }
        }
    }
}

/// `GET /receipt`: `done` says what an action just did.
pub fn receipt(
    session: &Session,
    r: &Receipt,
    now: Timestamp,
    shown: bool,
    done: Option<&str>,
) -> Answer {
    let content = html! {
        @if let Some(done) = done.filter(|d| ["redriven", "quarantined"].contains(d)) {
            p #message role="status" { "Done: " (done) "." }
        }
        dl #receipt {
            dt { "Namespace" } dd #namespace { (r.id.namespace) }
            dt { "Key" } dd #key { (r.id.key) }
            dt { "State" } dd #state { (r.state.as_str())
                @if r.orphaned_at(now) { " " span.badge #orphan { "orphan" } } }
            dt { "Attempt" } dd #attempt { (r.attempt) }
            dt { "Lease ends" } dd { (time(r.lease_expires_at)) }
            dt { "Next attempt" } dd { (time(r.next_attempt_at)) }
            dt { "Last error" } dd { pre #last-error { (r.last_error.as_deref().unwrap_or("—")) } }
            (payload("Checkpoint", r.checkpoint.as_ref(), shown))
            (payload("Response", r.response.as_ref(), shown))
            (payload("Recovery payload", r.recovery_payload.as_ref(), shown))
            dt { "Created" } dd { (time(Some(r.created_at))) }
            dt { "Changed" } dd { (time(Some(r.updated_at))) }
            dt { "Completed" } dd { (time(r.completed_at)) }
        }
        @if r.state == State::Quarantined {
            form.card method="post" action="/receipt/redrive" {
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="namespace" value=(r.id.namespace);
                input type="hidden" name="key" value=(r.id.key);
                p { "A fresh attempt budget; due at once." }
                button #redrive type="submit" { "Redrive" }
            }
        }
        @if r.orphaned_at(now) {
            form.card method="post" action="/receipt/quarantine" {
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="namespace" value=(r.id.namespace);
                input type="hidden" name="key" value=(r.id.key);
                // What this page shows: the write quarantines only this life and version.
                input type="hidden" name="created" value=(r.created_at.timestamp_micros());
                input type="hidden" name="changed" value=(r.updated_at.timestamp_micros());
                input type="hidden" name="state" value=(r.state.as_str());
                input type="hidden" name="attempt" value=(r.attempt);
                label for="reason" { "Reason" }
                input #reason name="reason" required maxlength="4096";
                button #quarantine type="submit" { "Quarantine" }
            }
        }
    };
    page(StatusCode::OK, layout("Receipt", Some(session), content))
}

/// After a Quarantine that was refused or failed: why, and a link to the receipt as it is
/// now (which tells what, if anything, changed).
pub fn not_quarantined(
    session: &Session,
    status: StatusCode,
    why: &str,
    id: &ReceiptKey,
) -> Answer {
    let query = serde_urlencoded::to_string([("namespace", &id.namespace), ("key", &id.key)]);
    let content = html! {
        p #message role="alert" { (why) }
        p { a #receipt-now href={ "/receipt?" (query.unwrap_or_default()) } {
            "See the receipt as it is now" } }
    };
    page(status, layout("Quarantine", Some(session), content))
}
