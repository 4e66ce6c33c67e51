//! The overview's quota table (issue 43, item 4) over real HTTP: a tenant under quotas sees
//! each of its quotas, the limit and what is left of it on this claimd, moving as its calls
//! take tokens; another tenant without quotas sees no table and none of the first's figures.

use super::page::{addr, console_app, get, sign_in, text};
use crate::common::app::Backend;
use crate::common::receipt_ops::claim_request;
use claimd::domain::{Quota, Rate, Storage};
use tonic::Request;

conformance!(
    the_overview_shows_a_tenants_quotas_and_the_tokens_its_calls_left,
    a_tenant_without_quotas_sees_no_quota_table,
    the_overview_shows_the_receipts_and_stored_bytes_the_store_counts_against_their_limits,
);

/// One token per thousand seconds: nothing refills while the test runs.
const SLOW: f64 = 0.001;

fn acme_quota() -> Quota {
    Quota {
        claims_per_second: Rate::new(SLOW),
        burst: Some(5),
        writes_per_second: Rate::new(3.0),
        max_waiting: Some(7),
        ..Quota::default()
    }
}

/// The `<tr data-quota=…>` row of `quota` in `page`, as text.
fn row<'a>(page: &'a str, quota: &str) -> &'a str {
    let start = page
        .find(&format!("data-quota=\"{quota}\""))
        .unwrap_or_else(|| panic!("a {quota} row in {page}"));
    let end = page[start..].find("</tr>").expect("the row ends") + start;
    &page[start..end]
}

async fn the_overview_shows_a_tenants_quotas_and_the_tokens_its_calls_left(backend: Backend) {
    let app = console_app(backend, |c| {
        c.policies
            .quotas
            .tenants
            .insert("acme".into(), acme_quota());
    })
    .await;
    let (_, key) = app.create_key("acme", None).await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;

    let before = text(&get(console, "/", Some(&session)).await);
    assert!(
        row(&before, "claims_per_second").contains("5 of 5 tokens left"),
        "{before}"
    );
    assert!(
        row(&before, "writes_per_second").contains("3 of 3 tokens left"),
        "{before}"
    );
    let waiting = row(&before, "max_waiting");
    assert!(waiting.contains("7 Claims waiting at once") && waiting.contains("0 waiting"));

    let mut client = app.new_client().await;
    for n in 0..2 {
        let mut request = Request::new(claim_request(&format!("Ev{n}"), b"fp"));
        let bearer = format!("Bearer {key}").parse().expect("ASCII key");
        request.metadata_mut().insert("authorization", bearer);
        client
            .claim(request)
            .await
            .expect("a Claim within the burst");
    }
    let after = text(&get(console, "/", Some(&session)).await);
    let claims = row(&after, "claims_per_second");
    assert!(claims.contains("3 of 5 tokens left"), "{claims}");
    assert!(claims.contains("0.001 a second, burst 5"), "{claims}");
    app.shutdown().await;
}

async fn a_tenant_without_quotas_sees_no_quota_table(backend: Backend) {
    let app = console_app(backend, |c| {
        c.policies
            .quotas
            .tenants
            .insert("acme".into(), acme_quota());
    })
    .await;
    let (_, key) = app.create_key("globex", None).await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let page = text(&get(console, "/", Some(&session)).await);
    assert!(page.contains("id=\"live\""), "the overview: {page}");
    assert!(!page.contains("id=\"quotas\""), "{page}");
    assert!(!page.contains("tokens left"), "{page}");
    app.shutdown().await;
}

async fn the_overview_shows_the_receipts_and_stored_bytes_the_store_counts_against_their_limits(
    backend: Backend,
) {
    let storage = Quota {
        storage: Storage {
            max_receipts: Some(40),
            max_stored_bytes: Some(9000),
        },
        ..Quota::default()
    };
    let app = console_app(backend, move |c| {
        c.policies.quotas.tenants.insert("acme".into(), storage);
    })
    .await;
    let (_, key) = app.create_key("acme", None).await;
    let console = addr(&app);
    let session = sign_in(console, &key).await;
    let before = text(&get(console, "/", Some(&session)).await);
    let receipts = row(&before, "max_receipts");
    assert!(
        receipts.contains("40 receipts") && receipts.contains("0 kept"),
        "{receipts}"
    );
    assert!(
        row(&before, "max_stored_bytes").contains("0 bytes kept"),
        "{before}"
    );

    let mut client = app.new_client().await;
    for n in 0..3 {
        let mut request = Request::new(claim_request(&format!("Ev{n}"), b"fp"));
        request.get_mut().recovery_payload = vec![1; 100];
        let bearer = format!("Bearer {key}").parse().expect("ASCII key");
        request.metadata_mut().insert("authorization", bearer);
        client.claim(request).await.expect("within the limits");
    }
    let after = text(&get(console, "/", Some(&session)).await);
    assert!(row(&after, "max_receipts").contains("3 kept"), "{after}");
    let bytes = row(&after, "max_stored_bytes");
    let kept: i64 = bytes
        .split(" bytes kept")
        .next()
        .and_then(|b| b.rsplit('>').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("a byte count in {bytes}"));
    // Three sealed payloads of 100 bytes, each with what sealing adds.
    assert!((300..1000).contains(&kept), "{bytes}");
    app.shutdown().await;
}
