//! docs/DESIGN.md §2.8 and §5.2, connection limits: through a real claimd on real loopback
//! sockets, connections that send nothing (or only the HTTP/2 preface) are closed at the
//! first-bytes timeout, keepalive PINGs close a peer that stops answering, a connection
//! beyond the cap is closed at once, and an old connection is told GOAWAY, finishes its
//! call in flight and is closed after the grace. Streams, calls per connection and message
//! sizes are in `limits/streams.rs`, page sizes in `limits/pages.rs`. Every timeout is set
//! short here; a bound is only ever "within a generous time".

mod pages;
mod streams;
pub(crate) mod wire;

use crate::common::app::{Backend, TestApp, connect};
use claimd::pb::GetRequest;
use std::time::{Duration, Instant};
use tonic::Code;

/// How long anything the server should do within a second or two may take at most.
const BOUND: Duration = Duration::from_secs(15);

/// A Get of a receipt that does not exist, on a fresh connection: NOT_FOUND means served.
async fn served_on_a_new_connection(app: &TestApp) -> Code {
    let request = GetRequest {
        namespace: "ns".into(),
        key: "absent".into(),
    };
    let mut client = connect(app.addr).await;
    match client.get(request).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_nothing_or_only_the_preface_are_closed_at_the_first_bytes_timeout() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            c.connections.first_bytes_timeout = Some(Duration::from_secs(1));
            // Only the first-bytes timeout may close them here.
            c.connections.keepalive_interval = None;
        })
        .spawn()
        .await;
    let mut idle = Vec::new();
    for i in 0..8 {
        let first: &[u8] = if i % 2 == 0 { b"" } else { wire::PREFACE };
        idle.push(wire::raw(app.addr, first).await);
    }
    for (i, stream) in idle.iter_mut().enumerate() {
        let sent = if i % 2 == 0 {
            "nothing"
        } else {
            "only the preface"
        };
        assert!(
            wire::closed_within(stream, BOUND).await,
            "a connection that sent {sent} is still open"
        );
    }
    assert_eq!(served_on_a_new_connection(&app).await, Code::NotFound);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_pings_a_quiet_connection_and_closes_it_when_pings_go_unanswered() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            c.connections.keepalive_interval = Some(Duration::from_millis(300));
            c.connections.keepalive_timeout = Duration::from_millis(300);
        })
        .spawn()
        .await;
    // A real HTTP/2 start (so the first-bytes timeout is met), and a PING of our own.
    let mut hello = wire::PREFACE.to_vec();
    hello.extend(wire::frame(wire::SETTINGS, 0, 0, &[]));
    hello.extend(wire::frame(wire::PING, 0, 0, b"claimd!!"));
    let mut stream = wire::raw(app.addr, &hello).await;
    let (mut answered, mut pinged) = (false, false);
    let seen = tokio::time::timeout(BOUND, async {
        while !(answered && pinged) {
            let Some((kind, flags, payload)) = wire::read_frame(&mut stream).await else {
                return;
            };
            if kind == wire::PING && flags & wire::ACK != 0 && payload == b"claimd!!" {
                answered = true;
            }
            if kind == wire::PING && flags & wire::ACK == 0 {
                pinged = true;
            }
        }
    })
    .await;
    assert!(seen.is_ok(), "no PING from the server within {BOUND:?}");
    assert!(answered, "the server did not answer the client's PING");
    assert!(pinged, "the server never pinged a quiet connection");
    // This client never answers the server's PINGs.
    assert!(
        wire::closed_within(&mut stream, BOUND).await,
        "a peer that does not answer PINGs is still connected"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_the_cap_is_closed_at_once_and_a_freed_slot_takes_a_new_one() {
    const CAP: usize = 4;
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            c.connections.max_connections = CAP;
            // The holders stay until the test lets them go.
            c.connections.first_bytes_timeout = None;
        })
        .spawn()
        .await;
    // The app's own client holds one slot; these hold the rest.
    let mut holders = Vec::new();
    for _ in 1..CAP {
        let mut hello = wire::PREFACE.to_vec();
        hello.extend(wire::frame(wire::SETTINGS, 0, 0, &[]));
        holders.push(wire::raw(app.addr, &hello).await);
    }
    let mut over = wire::raw(app.addr, b"").await;
    assert!(
        wire::closed_within(&mut over, BOUND).await,
        "connection {} stayed open with a cap of {CAP}",
        CAP + 1
    );
    // The connections within the cap are served as ever.
    let held = app.get("ns", "absent").await.unwrap_err();
    assert_eq!(held.code(), Code::NotFound);
    // One holder goes; the next client gets its slot (once the server saw it go).
    drop(holders.pop());
    let deadline = Instant::now() + BOUND;
    loop {
        let code = served_on_a_new_connection_or_closed(&app).await;
        if code == Some(Code::NotFound) {
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed: {code:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.shutdown().await;
}

/// Like [`served_on_a_new_connection`], `None` when the server closes the connection first.
async fn served_on_a_new_connection_or_closed(app: &TestApp) -> Option<Code> {
    let endpoint = format!("http://{}", app.addr);
    let mut client = claimd::pb::claim_service_client::ClaimServiceClient::connect(endpoint)
        .await
        .ok()?;
    let request = GetRequest {
        namespace: "ns".into(),
        key: "absent".into(),
    };
    Some(client.get(request).await.err()?.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_connection_gets_goaway_finishes_its_call_and_is_closed_after_the_grace() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|c| {
            c.connections.max_connection_age = Some(Duration::from_secs(1));
            c.connections.max_connection_age_grace = Duration::from_secs(2);
        })
        .spawn()
        .await;
    let get = wire::message(&GetRequest {
        namespace: "ns".into(),
        key: "absent".into(),
    });
    let (head, tail) = get.split_at(3);
    // Two connections, each with a Get in flight (its body unfinished).
    let (mut finishing, finishing_conn) = wire::h2_connect(app.addr).await;
    let (answer, mut body) = wire::open_call(&mut finishing, app.addr, "Get", head.to_vec());
    let (mut stuck, stuck_conn) = wire::h2_connect(app.addr).await;
    let (stuck_answer, _stuck_body) = wire::open_call(&mut stuck, app.addr, "Get", head.to_vec());
    // GOAWAY: the connection takes no new call.
    let deadline = Instant::now() + BOUND;
    loop {
        match finishing.send_request(wire::request(app.addr, "Get"), true) {
            Err(e) if e.is_go_away() => break,
            other => drop(other),
        }
        assert!(Instant::now() < deadline, "no GOAWAY within {BOUND:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The call in flight still finishes.
    body.send_data(tail.to_vec().into(), true).unwrap();
    assert_eq!(wire::status(answer).await, Code::NotFound);
    let closed = tokio::time::timeout(BOUND, finishing_conn).await;
    assert!(closed.is_ok(), "the drained connection stayed open");
    // A call that never finishes is cut off when the grace is over.
    let cut = tokio::time::timeout(BOUND, stuck_conn).await;
    assert!(cut.is_ok(), "the connection outlived its age and grace");
    assert!(
        stuck_answer.await.is_err(),
        "the unfinished call was answered"
    );
    app.shutdown().await;
}
