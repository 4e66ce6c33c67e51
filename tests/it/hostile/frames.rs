//! Garbage where HTTP/2 should be, written on raw sockets: bytes that are no preface, a
//! preface followed by frames that make no sense, a frame beyond `SETTINGS_MAX_FRAME_SIZE`,
//! headers just over the header-list limit (HTTP 431, the connection serves on) and a header
//! block far beyond it. Each bad connection is closed (with a GOAWAY naming the error where
//! there is a frame to name), and claimd goes on serving.

use super::{BOUND, Target};
use crate::limits::wire::{self, PREFACE, SETTINGS};
use std::net::SocketAddr;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Frame types and flags used here besides `wire`'s.
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
pub const END_HEADERS: u8 = 0x4;
/// HTTP/2 error codes (RFC 9113 §7).
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// Deterministic junk: `n` bytes of a fixed xorshift sequence.
pub fn junk(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

/// An HPACK string literal (no Huffman) of `s`, whose length fits the 7-bit prefix form.
pub fn literal(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = s.len();
    if n < 127 {
        out.push(n as u8);
    } else {
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push((n % 128) as u8 | 0x80);
            n /= 128;
        }
        out.push(n as u8);
    }
    out.extend(s);
    out
}

/// The HPACK block of a gRPC Claim call to `addr`: static-table `:method POST` and
/// `:scheme http`, literal `:path`, `:authority`, `content-type` and `te`.
pub fn claim_headers(addr: SocketAddr) -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    block.push(0x04); // literal without indexing, name `:path` (static index 4)
    block.extend(literal(b"/claimd.v1.ClaimService/Claim"));
    block.push(0x01); // `:authority` (static index 1)
    block.extend(literal(addr.to_string().as_bytes()));
    block.extend([0x0f, 0x10]); // `content-type` (static index 31)
    block.extend(literal(b"application/grpc"));
    block.push(0x00); // a new name
    block.extend(literal(b"te"));
    block.extend(literal(b"trailers"));
    block
}

/// A raw connection that sent the preface and an empty SETTINGS frame.
pub async fn h2_raw(addr: SocketAddr) -> TcpStream {
    let mut hello = PREFACE.to_vec();
    hello.extend(wire::frame(SETTINGS, 0, 0, &[]));
    wire::raw(addr, &hello).await
}

/// The error code of the GOAWAY the server sends before closing `stream`, or `None` if it
/// closes without one; panics if it does neither within [`BOUND`].
pub async fn goaway(stream: &mut TcpStream) -> Option<u32> {
    let read = async {
        while let Some((kind, _, payload)) = wire::read_frame(stream).await {
            if kind == GOAWAY && payload.len() >= 8 {
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                return Some(code);
            }
        }
        None
    };
    let code = tokio::time::timeout(BOUND, read).await;
    code.unwrap_or_else(|_| panic!("neither GOAWAY nor close within {BOUND:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_the_preface_is_closed_and_claimd_serves_on() {
    let target = Target::start(&[]).await;
    let firsts = [
        junk(64 * 1024),
        b"GET / HTTP/1.1\r\nHost: claimd\r\n\r\n".to_vec(),
        b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n".to_vec(),
        vec![0; 4096],
    ];
    for first in firsts {
        let mut stream = TcpStream::connect(target.addr).await.expect("connects");
        // The server may close before it read everything: a failed write is fine.
        let _ = stream.write_all(&first).await;
        assert!(
            wire::closed_within(&mut stream, BOUND).await,
            "a connection that sent garbage is still open"
        );
    }
    target
        .assert_survived("garbage instead of the preface")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_frames_after_the_preface_close_that_connection_only() {
    let target = Target::start(&[]).await;
    for seed_len in [9, 100, 16 * 1024, 256 * 1024] {
        let mut stream = h2_raw(target.addr).await;
        let _ = stream.write_all(&junk(seed_len)).await;
        // Junk ends in a frame error (GOAWAY) or an incomplete frame the server waits on.
        let _ = stream.shutdown().await;
        assert!(
            wire::closed_within(&mut stream, BOUND).await,
            "a connection that sent {seed_len} bytes of junk frames is still open"
        );
    }
    target
        .assert_survived("garbage frames after the preface")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_beyond_max_frame_size_is_a_frame_size_error() {
    let target = Target::start(&[]).await;
    let mut stream = h2_raw(target.addr).await;
    let mut frame = wire::frame(HEADERS, END_HEADERS, 1, &claim_headers(target.addr));
    // A DATA frame declaring 16 MiB - 1 (the most a header can say), 64 KiB of it sent.
    frame.extend([0xff, 0xff, 0xff, DATA, 0, 0, 0, 0, 1]);
    frame.extend(junk(64 * 1024));
    let _ = stream.write_all(&frame).await;
    assert_eq!(goaway(&mut stream).await, Some(FRAME_SIZE_ERROR));
    target
        .assert_survived("a frame beyond max frame size")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_beyond_the_header_list_limit_is_refused_unbuffered() {
    let target = Target::start(&[]).await;
    // 1 MiB of header block: HEADERS without END_HEADERS, then CONTINUATION frames of
    // 16 KiB, each a literal header of its own.
    let mut stream = h2_raw(target.addr).await;
    let mut frames = wire::frame(HEADERS, 0, 1, &claim_headers(target.addr));
    for i in 0..64 {
        let mut header = vec![0x00];
        header.extend(literal(format!("x-junk-{i}").as_bytes()));
        header.extend(literal(&vec![b'a'; 16 * 1024 - 64]));
        let flags = if i == 63 { END_HEADERS } else { 0 };
        frames.extend(wire::frame(CONTINUATION, flags, 1, &header));
    }
    let _ = stream.write_all(&frames).await;
    // The block is cut off once it passes the limit: the connection ends with a GOAWAY.
    let code = goaway(&mut stream).await;
    assert_eq!(
        code,
        Some(ENHANCE_YOUR_CALM),
        "the header block was not cut off"
    );
    target.assert_survived("a 1 MiB header block").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_list_just_over_the_limit_is_answered_431_and_the_connection_serves_on() {
    let target = Target::start(&[]).await;
    let (mut send, _conn) = wire::h2_connect(target.addr).await;
    // 20 KiB in one header: over the 16 KiB list, within what h2 buffers.
    let mut oversized = wire::request(target.addr, "Claim");
    let junk = http::HeaderValue::from_str(&"a".repeat(20 * 1024)).expect("ASCII");
    oversized.headers_mut().insert("x-junk", junk);
    let (answer, _body) = send
        .send_request(oversized, true)
        .expect("the stream opens");
    let answer = tokio::time::timeout(BOUND, answer)
        .await
        .expect("answered in time");
    let status = answer.expect("an HTTP answer").status();
    assert_eq!(status, http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    // The same connection still takes a normal call.
    let claim = wire::message(&claimd::pb::ClaimRequest {
        namespace: "hostile".into(),
        key: "after-431".into(),
        ..Default::default()
    });
    let (answer, mut body) = wire::open_call(&mut send, target.addr, "Claim", claim);
    body.send_data(bytes::Bytes::new(), true)
        .expect("the body ends");
    assert_eq!(wire::status(answer).await, tonic::Code::Ok);
    target.assert_survived("a 20 KiB header").await;
}
