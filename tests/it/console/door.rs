//! The console's door against hostile callers (issue 31; docs/DESIGN.md §5.12), on SQLite
//! (the door is the same for both stores): a POST without a session is refused from its
//! head, its declared body never read; a sign-in form over its limit is refused; a head or
//! a form that never ends is given up at the read deadline; one source holds at most
//! `MAX_PER_SOURCE` connections while another is served; failed sign-ins from one address
//! are throttled. The flood against the real binary, with its memory, is
//! `hostile::console`.

use super::page::{addr, console_app, get, post, request, sign_in, text};
use crate::common::app::Backend;
use crate::common::http1;
use crate::common::http2::tcp_from;
use claimd::console::{MAX_PER_SOURCE, READ_TIMEOUT};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long past the read deadline a connection may take to be closed.
const SLACK: Duration = Duration::from_secs(5);

/// Whether the server closed `stream` (read end) within `bound`.
async fn closed_within(stream: &mut tokio::net::TcpStream, bound: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(bound, read).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_a_session_is_refused_before_its_body_is_read() {
    let app = console_app(Backend::Sqlite, |_| {}).await;
    let console = addr(&app);
    let head = format!(
        "POST /receipt/redrive HTTP/1.1\r\nHost: {console}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 50000000\r\n\r\n"
    );
    let started = Instant::now();
    // Only the head: 50 MB declared, none sent.
    let answer = request(console, head, b"").await;
    assert_eq!(answer.status, 403, "{}", text(&answer));
    assert!(
        started.elapsed() < READ_TIMEOUT,
        "answered from the head, not at a deadline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_form_over_its_limit_is_refused() {
    let app = console_app(Backend::Sqlite, |_| {}).await;
    let key = "k".repeat(64 * 1024);
    let answer = post(addr(&app), "/login", &[("key", &key)], None, &[]).await;
    assert_eq!(answer.status, 413, "{}", text(&answer));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_or_a_form_that_never_ends_is_given_up_at_the_read_deadline() {
    let app = console_app(Backend::Sqlite, |_| {}).await;
    let console = addr(&app);
    let mut head_only = tokio::net::TcpStream::connect(console).await.unwrap();
    head_only
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut form = tokio::net::TcpStream::connect(console).await.unwrap();
    let start = "POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nkey=ck_";
    form.write_all(start.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (a, b) = tokio::join!(
        closed_within(&mut head_only, READ_TIMEOUT + SLACK),
        http1::answer(&mut form, READ_TIMEOUT + SLACK),
    );
    assert!(a, "an unfinished head is closed");
    let answer = b.expect("an answer to the unfinished form");
    assert_eq!(answer.status, 408);
    assert!(started.elapsed() >= READ_TIMEOUT - Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_holds_at_most_its_share_of_connections_while_another_is_served() {
    let app = console_app(Backend::Sqlite, |_| {}).await;
    let console = addr(&app);
    let crowd = "127.0.0.1".parse().unwrap();
    let mut held = Vec::new();
    for _ in 0..MAX_PER_SOURCE {
        held.push(tcp_from(crowd, console).await);
    }
    // Give the server time to accept every one of them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut one_more = tcp_from(crowd, console).await;
    assert!(
        closed_within(&mut one_more, Duration::from_secs(3)).await,
        "the source's connection beyond its share is closed"
    );
    let mut other = tcp_from("127.0.0.2".parse().unwrap(), console).await;
    let head = format!("GET /login HTTP/1.1\r\nHost: {console}\r\nConnection: close\r\n\r\n");
    http1::send(&mut other, &head, b"").await;
    let answer = http1::answer(&mut other, Duration::from_secs(5)).await;
    assert_eq!(answer.expect("served").status, 200);
    drop(held);
    // Once they are closed the source is served again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(console, "/login", None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sign_ins_from_one_address_are_throttled_but_a_good_key_still_signs_in() {
    let app = console_app(Backend::Sqlite, |c| {
        c.auth_failure_limit = 3;
        c.auth_failure_window = Duration::from_secs(600);
    })
    .await;
    let (_, key) = app.create_key("acme", None).await;
    let console = addr(&app);
    let mut statuses = Vec::new();
    for i in 0..6 {
        let wrong = format!("ck_nope{i}.wrong");
        statuses.push(
            post(console, "/login", &[("key", &wrong)], None, &[])
                .await
                .status,
        );
    }
    assert!(statuses.ends_with(&[429, 429]), "{statuses:?}");
    // A stored key still works from the throttled address (auth's known-key path).
    let session = sign_in(console, &key).await;
    assert_eq!(get(console, "/", Some(&session)).await.status, 200);
}
