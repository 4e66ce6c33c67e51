//! docs/DESIGN.md §2.8 and §4.5, pages capped by bytes: List and ListOrphaned over receipts
//! whose payloads add up to more than `--list-page-bytes` answer a shorter page with a page
//! token, never an empty one, and paging on lists every receipt exactly once — on both
//! stores.

use crate::common::app::{Backend, TestApp, secs};
use crate::common::dead_letters::{list_request, pages};
use claimd::pb::{ClaimRequest, ListOrphanedRequest, Receipt};
use std::time::Duration;

const KIB_64: usize = 64 * 1024;

/// Claims `count` receipts in namespace `big`, each with a `payload`-byte recovery payload
/// and a one-second lease.
async fn claim_many(app: &TestApp, count: usize, payload: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for i in 0..count {
        let key = format!("k{i:03}");
        let request = ClaimRequest {
            namespace: "big".into(),
            key: key.clone(),
            fingerprint: b"fp".to_vec(),
            lease_ttl: secs(1, 0),
            recovery_payload: vec![i as u8; payload],
            ..Default::default()
        };
        app.client.clone().claim(request).await.expect("Claim");
        keys.push(key);
    }
    keys
}

/// Every ListOrphaned page of namespace `big`, 1000 per page at most.
async fn orphan_pages(app: &TestApp) -> Vec<Vec<Receipt>> {
    let mut request = ListOrphanedRequest {
        namespace: "big".into(),
        page_size: 1000,
        ..Default::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = app.client.clone().list_orphaned(request.clone()).await;
        let page = page.expect("ListOrphaned").into_inner();
        let receipts = page.orphans.into_iter().filter_map(|o| o.receipt);
        pages.push(receipts.collect());
        if page.next_page_token.is_empty() {
            return pages;
        }
        assert!(pages.len() < 100, "pagination does not end");
        request.page_token = page.next_page_token;
    }
}

fn keys(pages: &[Vec<Receipt>]) -> Vec<String> {
    pages.iter().flatten().map(|r| r.key.clone()).collect()
}

fn payload_bytes(page: &[Receipt]) -> usize {
    page.iter().map(|r| r.recovery_payload.len()).sum()
}

async fn pages_stop_at_the_default_byte_cap_and_list_every_receipt_once(backend: Backend) {
    let app = TestApp::builder().backend(backend).spawn().await;
    let cap = claimd::config::defaults::LIST_PAGE_BYTES as usize;
    // 80 payloads of 64 KiB: 5 MiB, more than the 4 MiB of a page.
    let expected = claim_many(&app, 80, KIB_64).await;
    let listed = pages(&app, list_request("big", &[], 1000)).await;
    app.advance(Duration::from_secs(5));
    let orphaned = orphan_pages(&app).await;
    for (rpc, pages) in [("List", &listed), ("ListOrphaned", &orphaned)] {
        assert!(pages.len() > 1, "{rpc}: one page for {} bytes", 80 * KIB_64);
        for page in pages.iter() {
            assert!(!page.is_empty(), "{rpc}: an empty page");
            assert!(payload_bytes(page) <= cap, "{rpc}: a page over {cap} bytes");
            assert!(page.iter().all(|r| r.recovery_payload.len() == KIB_64));
        }
        assert_eq!(keys(pages), expected, "{rpc}: every receipt once, in order");
    }
    app.shutdown().await;
}

async fn a_receipt_larger_than_the_cap_still_makes_a_page_of_one(backend: Backend) {
    let app = TestApp::builder()
        .backend(backend)
        .configure(|c| c.list_page_bytes = 1)
        .spawn()
        .await;
    let expected = claim_many(&app, 3, 100).await;
    let listed = pages(&app, list_request("big", &[], 1000)).await;
    app.advance(Duration::from_secs(5));
    let orphaned = orphan_pages(&app).await;
    for (rpc, pages) in [("List", &listed), ("ListOrphaned", &orphaned)] {
        let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 1, 1], "{rpc}: one receipt per page");
        assert_eq!(keys(pages), expected, "{rpc}: every receipt once, in order");
    }
    app.shutdown().await;
}

conformance!(
    pages_stop_at_the_default_byte_cap_and_list_every_receipt_once,
    a_receipt_larger_than_the_cap_still_makes_a_page_of_one,
);
