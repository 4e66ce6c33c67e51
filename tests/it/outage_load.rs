//! A PostgreSQL outage under load: callers keep claiming and completing while the database
//! is stopped and started again. Every call either succeeds or fails with UNAVAILABLE,
//! every acknowledged receipt survives, and claimd recovers by itself (no restart).

use crate::common::app::decision;
use crate::common::pg::PrivateCluster;
use claimd::pb::{ClaimRequest, CompleteRequest, Decision, State};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Code;

/// What callers were told: keys claimed (and not completed) and keys completed.
#[derive(Default)]
struct Acknowledged {
    claimed: Vec<String>,
    completed: Vec<String>,
    refused: usize,
}

async fn caller(
    app_addr: std::net::SocketAddr,
    worker: usize,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Acknowledged>>,
) {
    let mut client = crate::common::app::connect(app_addr).await;
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let key = format!("w{worker}-{n}");
        let claim = ClaimRequest {
            namespace: "load".into(),
            key: key.clone(),
            ..Default::default()
        };
        let claimed = match client.claim(claim).await {
            Ok(r) => r.into_inner(),
            Err(status) => {
                assert_eq!(
                    status.code(),
                    Code::Unavailable,
                    "Claim failed with {status:?}"
                );
                log.lock().unwrap().refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        assert_eq!(decision(&claimed), Decision::Claimed);
        log.lock().unwrap().claimed.push(key.clone());
        let complete = CompleteRequest {
            namespace: "load".into(),
            key: key.clone(),
            claim_token: claimed.claim_token,
            response: key.as_bytes().to_vec(),
        };
        match client.complete(complete).await {
            Ok(_) => {
                let mut log = log.lock().unwrap();
                log.claimed.retain(|k| k != &key);
                log.completed.push(key);
            }
            Err(status) => {
                assert_eq!(
                    status.code(),
                    Code::Unavailable,
                    "Complete failed with {status:?}"
                );
                log.lock().unwrap().refused += 1;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outage_under_load_loses_no_acknowledged_receipt_and_heals_itself() {
    // The private cluster is stopped and started without disturbing other tests.
    let (mut cluster, app) = PrivateCluster::with_app().await;
    let stop = Arc::new(AtomicBool::new(false));
    let log = Arc::new(Mutex::new(Acknowledged::default()));
    let callers: Vec<_> = (0..4)
        .map(|w| tokio::spawn(caller(app.addr, w, stop.clone(), log.clone())))
        .collect();

    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster = tokio::task::spawn_blocking(move || {
        cluster.stop();
        cluster
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .unwrap();
    // Keep the load on until calls succeed again without a restart of claimd.
    let completed_at_restart = log.lock().unwrap().completed.len();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while log.lock().unwrap().completed.len() < completed_at_restart + 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "claimd did not recover after the database returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for c in callers {
        c.await
            .expect("no caller saw anything but success or UNAVAILABLE");
    }

    let log = Arc::try_unwrap(log).ok().unwrap().into_inner().unwrap();
    assert!(
        log.refused > 0,
        "the outage was never noticed: the test proved nothing"
    );
    for key in &log.completed {
        let receipt = app
            .get("load", key)
            .await
            .expect("an acknowledged completion survives");
        assert_eq!(receipt.state(), State::Completed, "{key}");
        assert_eq!(receipt.response, key.as_bytes());
    }
    for key in &log.claimed {
        let receipt = app
            .get("load", key)
            .await
            .expect("an acknowledged claim survives");
        assert!(
            matches!(receipt.state(), State::Processing | State::Completed),
            "{key}"
        );
    }
    drop(cluster);
}
