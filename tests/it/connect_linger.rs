//! A call refused from its headers over HTTP/2 while its client is still sending the body
//! (`body_limit::linger`): the stream carries the answer and then takes the rest of the
//! body and ends cleanly, instead of being reset under a client that has not finished —
//! which made Debian's curl report a framing error instead of the 401. A body declaring
//! more than the linger reads is still reset at once.

use crate::common::app::{Backend, TestApp};
use crate::common::http2;
use std::time::Duration;

/// How long anything claimd should do within a second may take at most.
const BOUND: Duration = Duration::from_secs(15);

async fn refused_stream(
    app: &TestApp,
    length: usize,
) -> (h2::SendStream<bytes::Bytes>, u16, impl Sized) {
    let tcp = tokio::net::TcpStream::connect(app.addr)
        .await
        .expect("connects");
    let (mut send, connection) = http2::handshake(tcp).await;
    let length = length.to_string();
    let headers = [("content-length", length.as_str())];
    let request = http2::post(&app.addr.to_string(), "Claim", "application/json", &headers);
    let (response, stream) = http2::open(&mut send, request, Vec::new(), false).await;
    let (status, _, _) = http2::answer(response, BOUND).await.expect("answered");
    (stream, status, (send, connection))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_http2_call_takes_the_rest_of_a_small_body_after_its_answer() {
    let app = TestApp::builder().backend(Backend::Sqlite).spawn().await;
    app.create_key("t1", None).await;
    let body = br#"{"namespace":"door","key":"late","fingerprint":"ZnA="}"#;
    let (mut stream, status, _open) = refused_stream(&app, body.len()).await;
    assert_eq!(status, 401, "no key: refused from the headers");
    // Long enough for a reset sent after the answer to have arrived.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stream
        .send_data(bytes::Bytes::from_static(body), true)
        .expect("the stream still takes the body its answer came before");
    let reset = tokio::time::timeout(
        Duration::from_millis(500),
        std::future::poll_fn(|cx| stream.poll_reset(cx)),
    )
    .await;
    assert!(
        !matches!(reset, Ok(Ok(_))),
        "the stream ended without a reset: {reset:?}"
    );
    assert_eq!(app.receipt_rows().await, 0, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_http2_call_declaring_a_large_body_is_reset_after_its_answer() {
    let app = TestApp::builder().backend(Backend::Sqlite).spawn().await;
    app.create_key("t1", None).await;
    let declared = claimd::body_limit::LINGER_BYTES as usize + 1;
    let (mut stream, status, _open) = refused_stream(&app, declared).await;
    assert_eq!(status, 401);
    let reset = tokio::time::timeout(BOUND, std::future::poll_fn(|cx| stream.poll_reset(cx)))
        .await
        .expect("reset without waiting for the body");
    assert!(reset.is_ok(), "{reset:?}");
}
