//! Issue 27 §1, §2: what a request body may cost, through a real claimd on real loopback
//! sockets. A Connect call without a valid key is answered from its headers, before its
//! body is read, over HTTP/1.1 and HTTP/2; a body that never finishes is answered at the
//! body deadline (or the call's own, if sooner) and its HTTP/1.1 connection closed, on the
//! door and on gRPC; and the bytes bodies hold are refused past the budget of one source
//! and of all. Bodies are written by hand (`common::http1`, `common::http2`), so what goes
//! over the wire is exactly what the test says.

use crate::common::app::{Backend, TestApp};
use crate::common::{http1, http2};
use claimd::body_limit::KEPT_PER_BODY;
use std::net::IpAddr;
use std::time::Duration;
use tonic::Code;

/// How long anything claimd should do within a second or two may take at most.
const BOUND: Duration = Duration::from_secs(15);
/// What an unfinished Connect body declares; the tests send [`SENT`] bytes of it.
const DECLARED: usize = 1_000_000;
const SENT: &[u8] = b"{\"namespa";

async fn app(configure: impl FnOnce(&mut claimd::config::Config)) -> TestApp {
    TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(configure)
        .spawn()
        .await
}

/// A plaintext TCP connection to the app.
async fn tcp(app: &TestApp) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_call_without_a_valid_key_is_answered_before_its_body_is_read() {
    // The body deadline is far away: only the headers can decide these answers.
    let app = app(|c| c.bodies.read_timeout = Some(Duration::from_secs(3600))).await;
    let (_, key) = app.create_key("t1", None).await;
    let host = app.addr.to_string();
    let last = if key.ends_with('x') { "y" } else { "x" };
    let wrong = format!("Bearer {}{last}", &key[..key.len() - 1]);
    for credentials in [None, Some(wrong.as_str())] {
        let headers: Vec<(&str, &str)> = credentials
            .map(|c| ("Authorization", c))
            .into_iter()
            .collect();
        // HTTP/1.1: 10 bytes of a declared megabyte, and an `Expect: 100-continue` with none.
        let head = http1::head("Claim", &host, "application/json", DECLARED, &headers);
        let mut stream = tcp(&app).await;
        http1::send(&mut stream, &head, SENT).await;
        let answer = http1::answer(&mut stream, BOUND).await;
        let answer = answer.expect("answered and closed with the body unfinished");
        assert_eq!(
            (answer.status, answer.code()),
            (401, "unauthenticated".into())
        );
        let mut expecting = headers.clone();
        expecting.push(("Expect", "100-continue"));
        let head = http1::head("Claim", &host, "application/json", DECLARED, &expecting);
        let mut stream = tcp(&app).await;
        http1::send(&mut stream, &head, b"").await;
        let answer = http1::answer(&mut stream, BOUND).await.expect("answered");
        assert_eq!(
            answer.status, 401,
            "no 100 Continue: the body is never asked for"
        );
        // HTTP/2: the same, on a stream left open.
        let (mut send, _conn) = http2::handshake(tcp(&app).await).await;
        let request = http2::post(&host, "Claim", "application/json", &headers);
        let (response, _open) = http2::open(&mut send, request, SENT.to_vec(), false).await;
        let (status, body, _) = http2::answer(response, BOUND).await.expect("answered");
        let error: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(
            (status, error["code"].as_str()),
            (401, Some("unauthenticated"))
        );
    }
    assert_eq!(app.receipt_rows().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_is_answered_at_the_body_deadline_and_its_connection_closed() {
    let app = app(|c| c.bodies.read_timeout = Some(Duration::from_secs(1))).await;
    let (_, key) = app.create_key("t1", None).await;
    let bearer = format!("Bearer {key}");
    let keyed = [("Authorization", bearer.as_str())];
    let host = app.addr.to_string();
    // The door over HTTP/1.1: 408, and the connection closed.
    let head = http1::head("Claim", &host, "application/json", DECLARED, &keyed);
    let mut stream = tcp(&app).await;
    http1::send(&mut stream, &head, SENT).await;
    let answer = http1::answer(&mut stream, BOUND).await;
    let answer = answer.expect("answered and closed at the body deadline");
    assert_eq!(
        (answer.status, answer.code()),
        (408, "deadline_exceeded".into())
    );
    let message = answer.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("--body-read-timeout"), "{message}");
    // The door over HTTP/2: 408 on the stream.
    let (mut send, _conn) = http2::handshake(tcp(&app).await).await;
    let request = http2::post(&host, "Claim", "application/json", &keyed);
    let (response, _open) = http2::open(&mut send, request, SENT.to_vec(), false).await;
    let (status, _, _) = http2::answer(response, BOUND).await.expect("answered");
    assert_eq!(status, 408);
    // gRPC: half a message, DEADLINE_EXCEEDED; the connection serves on.
    let mut grpc = keyed.to_vec();
    grpc.push(("te", "trailers"));
    let request = http2::post(&host, "Claim", "application/grpc", &grpc);
    let (response, _open) = http2::open(&mut send, request, vec![0, 0, 0, 0, 40, 10], false).await;
    let (_, _, code) = http2::answer(response, BOUND).await.expect("answered");
    assert_eq!(code, Some(Code::DeadlineExceeded));
    let whole = br#"{"namespace":"a","key":"after"}"#;
    let request = http2::post(&host, "Claim", "application/json", &keyed);
    let (response, _done) = http2::open(&mut send, request, whole.to_vec(), true).await;
    let (status, body, _) = http2::answer(response, BOUND).await.expect("answered");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_timeout_ms_bounds_the_reading_of_the_body_too() {
    // The body deadline is far away: the call's own deadline must end the read.
    let app = app(|c| c.bodies.read_timeout = Some(Duration::from_secs(3600))).await;
    let timeout = [("Connect-Timeout-Ms", "500")];
    let head = http1::head(
        "Claim",
        &app.addr.to_string(),
        "application/json",
        DECLARED,
        &timeout,
    );
    let mut stream = tcp(&app).await;
    http1::send(&mut stream, &head, SENT).await;
    let answer = http1::answer(&mut stream, BOUND).await;
    let answer = answer.expect("answered at the call's deadline");
    assert_eq!(
        (answer.status, answer.code()),
        (504, "deadline_exceeded".into())
    );
}

/// A whole Connect Claim of `size` bytes (JSON padded with spaces) for `key`.
fn claim_of(size: usize, key: &str) -> Vec<u8> {
    let mut body = format!(r#"{{"namespace":"budget","key":"{key}"}}"#).into_bytes();
    body.resize(size, b' ');
    body
}

/// A connection from `source` with `n` Connect Claims open on it, each having sent
/// [`HELD`] bytes of a body that never finishes: claimd reads and holds them until they
/// are refused or the connection goes (dropped with the returned value).
async fn hold(app: &TestApp, source: &str, n: usize) -> (Vec<Answer>, impl Sized) {
    let ip: IpAddr = source.parse().expect("an address");
    let (mut send, conn) = http2::handshake(http2::tcp_from(ip, app.addr).await).await;
    let mut answers = Vec::new();
    let mut open = Vec::new();
    for _ in 0..n {
        let request = http2::post(&app.addr.to_string(), "Claim", "application/json", &[]);
        let (response, stream) = http2::open(&mut send, request, vec![b' '; HELD], false).await;
        answers.push(Box::pin(http2::answer(response, BOUND)) as Answer);
        open.push(stream);
    }
    struct Held(tokio::task::JoinHandle<()>);
    impl Drop for Held {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    (answers, (Held(conn), send, open))
}

/// What one held body gets: its answer, if it gets one within the bound.
type Answer = std::pin::Pin<
    Box<dyn std::future::Future<Output = Option<(u16, Vec<u8>, Option<Code>)>> + Send>,
>;

/// Bytes each held body sends.
const HELD: usize = 100_000;

/// The first answer any of `held` gets: its HTTP status and Connect error message; the
/// others stay open.
async fn first_answer(held: Vec<Answer>) -> (u16, String, Vec<Answer>) {
    let (answer, _, rest) = futures::future::select_all(held).await;
    let (status, body, _) = answer.expect("one of the held bodies is answered");
    let error = serde_json::from_slice::<serde_json::Value>(&body).ok();
    let message = error
        .as_ref()
        .and_then(|e| e["message"].as_str())
        .unwrap_or("")
        .to_owned();
    (status, message, rest)
}

/// A whole Connect Claim of `size` bytes from `source`: its HTTP status.
async fn claim(app: &TestApp, source: &str, size: usize, key: &str) -> u16 {
    let ip: IpAddr = source.parse().expect("an address");
    let (mut send, _conn) = http2::handshake(http2::tcp_from(ip, app.addr).await).await;
    let request = http2::post(&app.addr.to_string(), "Claim", "application/json", &[]);
    let (response, _done) = http2::open(&mut send, request, claim_of(size, key), true).await;
    http2::answer(response, BOUND).await.expect("answered").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_share_of_one_source_or_the_whole_budget_are_resource_exhausted() {
    // One source may hold two held bodies (not three), all sources four (not five).
    let app = app(|c| {
        c.bodies.max_buffered = 450_000;
        c.bodies.max_buffered_per_source = KEPT_PER_BODY;
    })
    .await;
    // Three bodies from one source: one is refused, naming the share.
    let (held, one) = hold(&app, "127.0.0.1", 3).await;
    let (status, refused, held) = first_answer(held).await;
    assert_eq!(status, 429, "{refused}");
    assert!(
        refused.contains("--max-buffered-body-bytes-per-source"),
        "{refused}"
    );
    // It is bytes that count, not calls: a small body from that source still fits (the two
    // left hold at most 200,000 bytes of the 262,149).
    assert_eq!(claim(&app, "127.0.0.1", 1_000, "small").await, 200);
    // Three other sources, two bodies each, within their shares (200,000 bytes of 262,149
    // at most, however their bytes interleave): one of all is refused, naming the whole
    // budget. The first source goes first, so its share cannot be what is named (its
    // bodies may still be arriving on a loaded machine).
    drop((held, one));
    let (two, held_two) = hold(&app, "127.0.0.2", 2).await;
    let (three, held_three) = hold(&app, "127.0.0.3", 2).await;
    let (four, held_four) = hold(&app, "127.0.0.4", 2).await;
    let all = two.into_iter().chain(three).chain(four).collect();
    let (status, refused, _rest) = first_answer(all).await;
    assert_eq!(status, 429, "{refused}");
    assert!(refused.contains("--max-buffered-body-bytes)"), "{refused}");
    // A body's bytes are given back when it goes.
    drop((held_two, held_three, held_four));
    let deadline = std::time::Instant::now() + BOUND;
    let mut n = 0;
    while claim(&app, "127.0.0.5", 200_000, &format!("after-{n}")).await != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the held bytes were never given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        n += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflection_stream_stays_open_while_it_asks_and_is_ended_once_it_stops() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    let timeout = Duration::from_secs(2);
    let app = app(|c| c.bodies.read_timeout = Some(timeout)).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", app.addr))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connects");
    let (asks, questions) = tokio::sync::mpsc::channel(1);
    let questions = tokio_stream::wrappers::ReceiverStream::new(questions);
    let ask = || ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    asks.send(ask()).await.expect("the stream is open");
    let mut client = ServerReflectionClient::new(channel);
    let mut answers = client
        .server_reflection_info(questions)
        .await
        .expect("the stream opens")
        .into_inner();
    // Asking every 300 ms for longer than the timeout: every question answered.
    let started = std::time::Instant::now();
    let mut answered = 0;
    while started.elapsed() < 2 * timeout {
        let answer = tokio::time::timeout(BOUND, answers.message()).await;
        assert!(
            answer
                .expect("answered in time")
                .expect("an answer")
                .is_some()
        );
        answered += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
        asks.send(ask()).await.expect("the stream is open");
    }
    assert!(answered > 4, "{answered}");
    let _ = tokio::time::timeout(BOUND, answers.message()).await;
    // Silent from now on: the stream is ended at the timeout, not held (the reflection
    // service ends its answers when its requests fail, without an error of its own).
    let ended = tokio::time::timeout(BOUND, answers.message()).await;
    let ended = ended.expect("ended in time");
    assert!(!matches!(ended, Ok(Some(_))), "{ended:?}");
}
