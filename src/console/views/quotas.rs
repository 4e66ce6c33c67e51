//! The overview's quota table: the signed-in tenant's quotas on this claimd and what is
//! left of each now (docs/DESIGN.md §5.15). Shown only when the tenant has a quota.

use crate::api::quota::{BucketUsage, Usage};
use maud::{Markup, html};

/// A row per quota the tenant has: its key in the policy file, its limit, its use now.
pub fn quotas(usage: &Usage, claims_per_second: f64) -> Markup {
    html! {
        @if !usage.is_unlimited() {
            table #quotas {
                caption { "Your tenant's quotas on this claimd (each replica keeps its own \
                    buckets; receipts and stored bytes are counted in the store, for all \
                    replicas). Claims/s: this claimd's, over the last minute." }
                thead { tr {
                    th scope="col" { "Quota" } th scope="col" { "Limit" }
                    th scope="col" { "Now" }
                } }
                tbody {
                    @if let Some(b) = usage.claims {
                        tr data-quota="claims_per_second" {
                            th scope="row" { "claims_per_second" }
                            td { (number(b.per_second)) " a second, burst " (b.size) }
                            td { (number(claims_per_second)) " Claims/s; " (left(&b)) }
                        }
                    }
                    @if let Some(b) = usage.writes {
                        tr data-quota="writes_per_second" {
                            th scope="row" { "writes_per_second" }
                            td { (number(b.per_second)) " a second" }
                            td { (left(&b)) }
                        }
                    }
                    @if let Some((receipts, max)) = usage.receipts {
                        tr data-quota="max_receipts" {
                            th scope="row" { "max_receipts" }
                            td { (max) " receipts in the store" }
                            td { (receipts) " kept (all replicas)" }
                        }
                    }
                    @if let Some((bytes, max)) = usage.stored_bytes {
                        tr data-quota="max_stored_bytes" {
                            th scope="row" { "max_stored_bytes" }
                            td { (max) " bytes stored" }
                            td { (bytes) " bytes kept (all replicas)" }
                        }
                    }
                    @if let Some((parked, max)) = usage.waiting {
                        tr data-quota="max_waiting" {
                            th scope="row" { "max_waiting" }
                            td { (max) " Claims waiting at once" }
                            td { (parked) " waiting" }
                        }
                    }
                }
            }
        }
    }
}

/// "3 of 10 tokens left" (whole tokens: a call needs one).
fn left(b: &BucketUsage) -> String {
    format!("{} of {} tokens left", b.tokens.floor(), b.size)
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}
