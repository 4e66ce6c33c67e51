//! Helpers for the dead-letter tests: receipts claimed and quarantined through the server,
//! and List requests followed across every page.

use super::app::{TestApp, secs};
use claimd::pb::{ClaimRequest, ListRequest, ListResponse, QuarantineRequest, Receipt, State};

/// Claims `ns`/`key` with a recovery payload; returns the claim token.
pub async fn claimed(app: &TestApp, ns: &str, key: &str) -> String {
    let request = ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        lease_ttl: secs(30, 0),
        recovery_payload: format!("body of {key}").into_bytes(),
        ..Default::default()
    };
    let response = app.client.clone().claim(request).await.expect("Claim");
    response.into_inner().claim_token
}

/// A dead letter: claimed, then quarantined by its holder as poison.
pub async fn dead_letter(app: &TestApp, ns: &str, key: &str) {
    let claim_token = claimed(app, ns, key).await;
    let (namespace, key, error) = (ns.into(), key.into(), "poison".into());
    let request = QuarantineRequest {
        namespace,
        key,
        claim_token,
        error,
    };
    app.client
        .clone()
        .quarantine(request)
        .await
        .expect("Quarantine");
}

/// A List request for `ns` (empty: every namespace) and `states` (empty: every state).
pub fn list_request(ns: &str, states: &[State], page_size: i32) -> ListRequest {
    ListRequest {
        namespace: ns.into(),
        states: states.iter().map(|s| *s as i32).collect(),
        page_size,
        page_token: String::new(),
    }
}

/// One List page; must succeed.
pub async fn list(app: &TestApp, request: ListRequest) -> ListResponse {
    app.client
        .clone()
        .list(request)
        .await
        .expect("List")
        .into_inner()
}

/// Every page, following next_page_token until it is empty.
pub async fn pages(app: &TestApp, mut request: ListRequest) -> Vec<Vec<Receipt>> {
    let mut pages = Vec::new();
    loop {
        let page = list(app, request.clone()).await;
        pages.push(page.receipts);
        if page.next_page_token.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "pagination does not end");
        request.page_token = page.next_page_token;
    }
}

/// (namespace, key) of each receipt, in listed order.
pub fn ids(receipts: &[Receipt]) -> Vec<(&str, &str)> {
    receipts
        .iter()
        .map(|r| (r.namespace.as_str(), r.key.as_str()))
        .collect()
}
