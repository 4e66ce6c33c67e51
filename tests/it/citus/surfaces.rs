//! The surfaces besides gRPC, on the distributed table: the operator's console (sign-in
//! with a key, the overview, a receipt's page, the Quarantine of an orphan), `claimd
//! reseal` (key rotation, run while claimd serves) and the HTTP door (Connect JSON). Each
//! plays the same test as on plain PostgreSQL and SQLite (`console::quarantine`,
//! `sealing_keys`, `connect`), on a database of a Citus coordinator.

use super::cluster::CitusCluster;
use crate::common::app::TestApp;
use crate::console::operator::{NS, policies};
use crate::console::page::{self, get, receipt_path, sign_in, text};
use std::net::SocketAddr;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn the_console_signs_in_shows_the_overview_and_a_receipt_and_quarantines_an_orphan_on_citus()
{
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = TestApp::builder()
        .database_url(&url)
        .configure(|c| {
            c.console_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            c.key_cache_ttl = Duration::from_millis(200);
            c.policies = policies();
            c.janitor.interval = Duration::ZERO;
        })
        .spawn()
        .await;
    // Signs in as `acme`, quarantines a budget-spent orphan through its page's form.
    crate::console::quarantine::budget_spent_orphan_quarantined_on(&app).await;
    let (_, key) = app.create_key("acme", None).await;
    let console = page::addr(&app);
    let session = sign_in(console, &key).await;
    let overview = get(console, "/", Some(&session)).await;
    let body = text(&overview);
    assert_eq!(overview.status, 200, "{body}");
    assert!(body.contains("acme"), "{body}");
    assert!(body.contains(&format!("data-namespace=\"{NS}\"")), "{body}");
    let receipt = get(console, &receipt_path(NS, "ev-1"), Some(&session)).await;
    let body = text(&receipt);
    assert_eq!(receipt.status, 200, "{body}");
    assert!(body.contains("ev-1"), "{body}");
    assert!(body.to_lowercase().contains("quarantined"), "{body}");
    citus.assert_routed();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn key_rotation_and_claimd_reseal_move_every_row_to_the_new_key_on_citus() {
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    crate::sealing_keys::rotation_and_reseal_on(&url).await;
    citus.assert_routed();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_complete_and_replay_work_through_the_http_door_on_citus() {
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = TestApp::builder().database_url(&url).spawn().await;
    crate::connect::claim_complete_and_replay_in_json(&app).await;
    citus.assert_routed();
    app.shutdown().await;
}
