//! claimd on Citus (issue 45; docs/DESIGN.md §4.6): a coordinator and two workers started
//! by the test (`citus/cluster.rs`), claimd migrating and serving through the coordinator.
//! Where Citus is not installed these tests fail naming `../shared/citus/build.sh`.
//! Besides the tests here: the decision contract (`contract`), the kill test under
//! the history workload (`kill`), node restarts under a waiting Claim (`restarts`), and the
//! console, `claimd reseal` and the HTTP door on the distributed table (`surfaces`).

mod cluster;
mod contract;
mod kill;
mod restarts;
mod surfaces;

use crate::common::app::TestApp;
use cluster::CitusCluster;
use sqlx::{Connection, PgConnection};
use std::time::Duration;

/// A claimd on `url` whose default policy allows [`contract::MAX_ATTEMPTS`] attempts and
/// which notices a lost worker within a second.
async fn claimd_on(url: &str) -> TestApp {
    TestApp::builder()
        .database_url(url)
        .configure(|c| {
            c.policies.default.max_attempts = contract::MAX_ATTEMPTS;
            c.health_interval = Duration::from_millis(200);
            c.store.acquire_timeout = Duration::from_secs(2);
        })
        .spawn()
        .await
}

async fn query_rows(url: &str, sql: &'static str) -> Vec<(String, String)> {
    let mut conn = PgConnection::connect(url).await.expect("connect");
    let rows = sqlx::query_as(sql).fetch_all(&mut conn).await;
    rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

const DISTRIBUTION: &str = "SELECT logicalrelid::text, partmethod::text FROM pg_dist_partition
    ORDER BY 1";

#[tokio::test(flavor = "multi_thread")]
async fn migrate_on_a_citus_coordinator_distributes_receipts_by_tenant_and_makes_api_keys_a_reference_table_once()
 {
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let tables = query_rows(&url, DISTRIBUTION).await;
    let expected = [("api_keys", "n"), ("receipts", "h"), ("tenant_usage", "h")]
        .map(|(t, m)| (t.to_owned(), m.to_owned()));
    assert_eq!(
        tables, expected,
        "receipts and tenant_usage hash-distributed, api_keys a reference table"
    );
    let column = query_rows(
        &url,
        "SELECT logicalrelid::text, column_to_column_name(logicalrelid, partkey)
         FROM pg_dist_partition WHERE partmethod = 'h' ORDER BY 1",
    )
    .await;
    let by_tenant = ["receipts", "tenant_usage"].map(|t| (t.to_owned(), "tenant_id".to_owned()));
    assert_eq!(column, by_tenant);
    let colocated = query_rows(
        &url,
        "SELECT count(DISTINCT colocationid)::text, count(*)::text FROM pg_dist_partition
         WHERE partmethod = 'h'",
    )
    .await;
    assert_eq!(colocated, [("1".to_owned(), "2".to_owned())], "colocated");
    // A second claimd migrates again at its start: nothing changes.
    let second = claimd_on(&url).await;
    assert_eq!(query_rows(&url, DISTRIBUTION).await, expected);
    second.shutdown().await;
    app.shutdown().await;

    // Storage quotas are not kept on Citus yet: a write they would check is refused
    // FAILED_PRECONDITION, saying so, and nothing is written.
    let limited = TestApp::builder()
        .database_url(&url)
        .configure(|c| c.policies.quotas.default.storage.max_receipts = Some(100))
        .spawn()
        .await;
    let (_, key) = limited.create_key("acme", None).await;
    let mut request = tonic::Request::new(crate::common::receipt_ops::claim_request("Ev1", b"fp"));
    let bearer = format!("Bearer {key}").parse().expect("ASCII key");
    request.metadata_mut().insert("authorization", bearer);
    let refused = limited.new_client().await.claim(request).await.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("not supported on Citus"),
        "{refused:?}"
    );
    assert_eq!(limited.receipt_rows().await, 0);
    limited.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_decision_contract_holds_on_citus_for_a_tenant_on_each_worker() {
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let tenants = citus.tenants_on_both(&url, 2).await;
    assert_eq!(
        tenants.iter().map(|(_, w)| *w).collect::<Vec<_>>(),
        [0, 1],
        "one tenant on each worker: {tenants:?}"
    );
    for (tenant, worker) in &tenants {
        let (_, key) = app.create_key(tenant, None).await;
        contract::plays(&app, &key, &format!("w{worker}")).await;
    }
    citus.assert_routed();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn twelve_tenants_receipts_land_on_both_workers_each_on_its_tenants_shard() {
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let mut calls = Vec::new();
    for n in 0..12 {
        let (_, key) = app.create_key(&format!("tenant-{n}"), None).await;
        let client = app.client.clone();
        calls.push(tokio::spawn(async move {
            for k in 0..5 {
                let request = claimd::pb::ClaimRequest {
                    namespace: "spread".into(),
                    key: format!("event-{k}"),
                    fingerprint: b"fp".to_vec(),
                    ..Default::default()
                };
                let answer = client
                    .clone()
                    .claim(contract::with_key(request, &key))
                    .await;
                answer.unwrap_or_else(|s| panic!("tenant-{n} event-{k}: {s:?}"));
            }
        }));
    }
    for call in calls {
        call.await.expect("the tenant's calls");
    }
    // Each shard placement's rows, by worker port and tenant.
    let placed = query_rows(
        &url,
        "SELECT nodeport::text, result FROM run_command_on_placements('receipts',
           $$SELECT coalesce(string_agg(DISTINCT tenant_id, ',' ORDER BY tenant_id), '') FROM %s$$)
         WHERE result <> ''",
    )
    .await;
    let mut workers = std::collections::BTreeSet::new();
    let mut tenants = 0;
    for (port, on_shard) in &placed {
        for tenant in on_shard.split(',') {
            let worker = citus.worker_of(&url, tenant).await;
            assert_eq!(
                citus.workers[worker].tcp_addr().port().to_string(),
                *port,
                "{tenant}"
            );
            workers.insert(port.clone());
            tenants += 1;
        }
    }
    assert_eq!(
        tenants, 12,
        "every tenant's receipts on exactly one placement: {placed:?}"
    );
    assert_eq!(workers.len(), 2, "receipts on both workers: {placed:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_that_is_down_makes_its_tenants_calls_unavailable_while_the_other_workers_tenants_go_on()
 {
    let mut citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let tenants = citus.tenants_on_both(&url, 2).await;
    let (_, down) = app.create_key(&tenants[0].0, None).await;
    let (_, up) = app.create_key(&tenants[1].0, None).await;
    let request = |key: &str| claimd::pb::ClaimRequest {
        namespace: "outage".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    };
    let mut client = app.client.clone();
    client
        .claim(contract::with_key(request("before"), &down))
        .await
        .expect("before");
    citus.workers[0].kill_9();
    for n in 0..5 {
        let key = format!("during-{n}");
        let lost = client.claim(contract::with_key(request(&key), &down)).await;
        let status = lost.expect_err("its worker is down");
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        let fine = client.claim(contract::with_key(request(&key), &up)).await;
        fine.unwrap_or_else(|s| panic!("the other worker's tenant: {s:?}"));
    }
    let _citus = tokio::task::spawn_blocking(move || {
        citus.workers[0].restart();
        citus
    })
    .await
    .expect("the worker restarts");
    let mut back = None;
    for _ in 0..50 {
        match client
            .claim(contract::with_key(request("after"), &down))
            .await
        {
            Ok(answer) => {
                back = Some(answer);
                break;
            }
            Err(s) => assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        back.is_some(),
        "the tenant is served again once its worker is back"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_janitor_on_citus_strips_and_deletes_tenant_by_tenant_across_both_workers() {
    use claimd::janitor::Pass;
    let citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = TestApp::builder()
        .database_url(&url)
        .configure(|c| {
            c.policies.default.retention = chrono::TimeDelta::days(2);
            c.policies.default.response_retention = chrono::TimeDelta::days(1);
            c.janitor.interval = Duration::ZERO;
            // Smaller than a tenant's rows: one statement's budget spans tenants.
            c.janitor.batch = 2;
        })
        .spawn()
        .await;
    for (tenant, _) in citus.tenants_on_both(&url, 3).await {
        let (_, key) = app.create_key(&tenant, None).await;
        for n in 0..3 {
            let request = claimd::pb::ClaimRequest {
                namespace: "old".into(),
                key: format!("event-{n}"),
                fingerprint: b"fp".to_vec(),
                ..Default::default()
            };
            let mut client = app.client.clone();
            let claimed = client.claim(contract::with_key(request, &key)).await;
            let token = claimed.expect("Claim").into_inner().claim_token;
            let done = claimd::pb::CompleteRequest {
                namespace: "old".into(),
                key: format!("event-{n}"),
                claim_token: token,
                response: b"done".to_vec(),
            };
            client
                .complete(contract::with_key(done, &key))
                .await
                .expect("Complete");
        }
    }
    let pass = || async {
        match app.janitor.run_once().await.expect("a janitor pass") {
            Pass::Ran(report) => report,
            Pass::Skipped => panic!("the only janitor was refused its lock"),
        }
    };
    app.advance(Duration::from_secs(36 * 3600));
    let stripped = pass().await;
    assert_eq!(
        (stripped.stripped, stripped.deleted),
        (9, 0),
        "{stripped:?}"
    );
    assert_eq!(app.receipt_rows().await, 9);
    app.advance(Duration::from_secs(24 * 3600));
    let deleted = pass().await;
    assert_eq!(deleted.deleted, 9, "{deleted:?}");
    assert!(deleted.largest_statement <= 2, "{deleted:?}");
    assert_eq!(app.receipt_rows().await, 0);
    citus.assert_routed();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn health_follows_the_coordinator_and_not_a_worker() {
    use crate::common::probe::{check, plaintext_channel, wait_for};
    use tonic_health::pb::health_check_response::ServingStatus;
    const SERVICE: &str = "claimd.v1.ClaimService";
    let mut citus = CitusCluster::start().await;
    let url = citus.create_database().await;
    let app = claimd_on(&url).await;
    let channel = plaintext_channel(app.addr).await.expect("connect");
    wait_for(&channel, SERVICE, ServingStatus::Serving).await;

    // A worker down: its tenants' calls fail, but claimd as a whole still serves.
    tokio::task::block_in_place(|| citus.workers[0].kill_9());
    for _ in 0..10 {
        // The health loop runs every 200 ms here: 2 s is ten of its probes.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let status = check(channel.clone(), SERVICE).await;
        assert_eq!(status, Ok(ServingStatus::Serving), "with a worker down");
    }
    tokio::task::block_in_place(|| citus.workers[0].restart());

    // The coordinator down: claimd reports it cannot serve, and serves again once it is back.
    tokio::task::block_in_place(|| citus.coordinator.kill_9());
    wait_for(&channel, SERVICE, ServingStatus::NotServing).await;
    tokio::task::block_in_place(|| citus.coordinator.restart());
    wait_for(&channel, SERVICE, ServingStatus::Serving).await;
    app.shutdown().await;
}
