//! The Rust client when claimd closes connections with a graceful GOAWAY: many callers share
//! one channel to a claimd whose connections reach their maximum age every few
//! milliseconds, so calls keep meeting a connection claimd has just told GOAWAY. tonic
//! itself fails a call started in that instant INTERNAL ("h2 protocol error"), and one
//! queued on a connection that closed before it was sent CANCELLED; the client answers
//! both UNAVAILABLE, saying nothing was done, and the receipts show that is so.

use crate::common::app::{Backend, TestApp};
use claimd_client::{Claims, Error};
use std::error::Error as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::Channel;

/// Callers sharing the channel.
const CALLERS: usize = 32;
/// Calls that met a GOAWAY before the run may stop.
const ENOUGH: usize = 3;
/// The longest the run goes on looking for them.
const LONGEST: Duration = Duration::from_secs(30);

/// What the callers met: the keys of calls the client said the connection never carried
/// to claimd (a GOAWAY's, and unsent ones), and every other failure.
#[derive(Default)]
struct Met {
    gone_away: Vec<String>,
    unsent: Vec<String>,
    others: Vec<Error>,
}

/// Claims fresh keys until [`ENOUGH`] calls met a GOAWAY (or [`LONGEST`] passed).
async fn claim_until_gone_away(claims: Claims) -> Met {
    let seen = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..CALLERS {
        let (claims, seen) = (claims.clone(), seen.clone());
        callers.spawn(async move {
            let mut met = Met::default();
            let mut n = 0;
            while seen.load(Ordering::SeqCst) < ENOUGH && started.elapsed() < LONGEST {
                n += 1;
                let key = format!("c{caller}-{n}");
                let Err(e) = claims
                    .claim("hooks", &key, b"fp", Duration::from_secs(30))
                    .await
                else {
                    continue;
                };
                let message = e.status().message();
                if e.code() == Code::Unavailable && message.contains("GOAWAY") {
                    met.gone_away.push(key);
                    seen.fetch_add(1, Ordering::SeqCst);
                } else if e.code() == Code::Unavailable
                    && message.contains("before this call was sent")
                {
                    met.unsent.push(key);
                } else {
                    met.others.push(e);
                }
            }
            met
        });
    }
    let mut all = Met::default();
    while let Some(joined) = callers.join_next().await {
        let met = joined.expect("a caller ran");
        all.gone_away.extend(met.gone_away);
        all.unsent.extend(met.unsent);
        all.others.extend(met.others);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_a_goaway_kept_from_claimd_is_unavailable_and_did_nothing() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            c.connections.max_connection_age = Some(Duration::from_millis(20));
            c.connections.max_connection_age_grace = Duration::from_secs(5);
        })
        .spawn()
        .await;
    let channel = Channel::from_shared(format!("http://{}", app.addr)).expect("a valid URI");
    let claims = Claims::new(channel.connect().await.expect("claimd listens"), None);
    let met = claim_until_gone_away(claims).await;
    // Shown with --nocapture.
    println!(
        "{} calls met a GOAWAY, {} were not sent; other failures: {:?}",
        met.gone_away.len(),
        met.unsent.len(),
        met.others
    );
    assert!(
        met.gone_away.len() >= ENOUGH,
        "only {} calls met a GOAWAY in {LONGEST:?}: the test did not exercise it",
        met.gone_away.len()
    );
    // Never INTERNAL, UNKNOWN or CANCELLED: no other failure at all.
    assert!(
        met.others.is_empty(),
        "calls failed otherwise: {:?}",
        met.others
    );
    for key in met.gone_away.iter().chain(&met.unsent) {
        assert_eq!(get(&app, key).await, Code::NotFound, "{key} was written");
    }
}

/// A Get of `key`'s receipt through tonic, called again while its connection (aged like
/// every other) keeps it from claimd: the code claimd answered.
async fn get(app: &TestApp, key: &str) -> Code {
    for _ in 0..100 {
        match app.get("hooks", key).await {
            Ok(_) => return Code::Ok,
            Err(s)
                if matches!(s.code(), Code::Cancelled | Code::Internal) && s.source().is_some() => {
            }
            Err(s) => return s.code(),
        }
    }
    panic!("{key}: no Get reached claimd in 100 calls");
}
