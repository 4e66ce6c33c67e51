//! The bounds of an HTTP/1.1 request head (issue 46 §8; docs/DESIGN.md §5.10) against the
//! real binary, on every request of a keep-alive connection, plaintext and TLS: a head over
//! 16 KiB is answered 431 and the connection closed (and one of 40 KiB to `/metrics`); a head that arrives slower than the
//! first-bytes timeout is closed; and the heads being read count against the per-source
//! body budget, so that one source's unfinished heads beyond it are closed while another
//! source is served.

use super::door::{Dialer, Io};
use super::{BOUND, Target};
use std::net::IpAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A whole Connect Claim of `key` with the target's API key, kept alive.
fn claim(target: &Target, key: &str) -> Vec<u8> {
    let body = format!(r#"{{"namespace":"hostile","key":"{key}"}}"#);
    let api_key = target.key.as_deref().expect("the target has a key");
    format!(
        "POST /claimd.v1.ClaimService/Claim HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nAuthorization: Bearer {api_key}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The start of a Connect Claim's head and a header of `pad` bytes; `end` ends the head.
fn padded_head(pad: usize, end: bool) -> Vec<u8> {
    let mut head = b"POST /claimd.v1.ClaimService/Claim HTTP/1.1\r\nHost: localhost\r\n\
                     Content-Type: application/json\r\nX-Pad: "
        .to_vec();
    head.extend(vec![b'a'; pad]);
    head.extend(b"\r\n");
    if end {
        head.extend(b"Content-Length: 2\r\n\r\n{}");
    }
    head
}

/// The next answer on a kept-alive `io`: its status and whether the server closed the
/// connection right after it; `None` if it closed (or did not answer within [`BOUND`])
/// without a whole answer.
async fn answer(io: &mut Box<dyn Io>) -> Option<(u16, bool)> {
    let read = async {
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let answer = crate::common::http1::parse(&raw)?;
                let length = answer.headers.iter().find(|(n, _)| n == "content-length");
                let length: usize = length.map_or(0, |(_, v)| v.parse().unwrap_or(0));
                if raw.len() >= end + 4 + length {
                    let closes = answer
                        .headers
                        .iter()
                        .any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close"));
                    return Some((answer.status, closes));
                }
            }
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(BOUND, read).await.ok().flatten()
}

/// Whether the server closes `io` within [`BOUND`], reading and dropping what it sends.
async fn closed(io: &mut Box<dyn Io>) -> bool {
    let drain = async {
        let mut buf = [0u8; 4096];
        while let Ok(1..) = io.read(&mut buf).await {}
    };
    tokio::time::timeout(BOUND, drain).await.is_ok()
}

/// A kept-alive connection that was served one Claim.
async fn served_once(target: &Target, dialer: &Dialer, key: &str) -> Box<dyn Io> {
    let mut io = dialer.dial_from(LOOPBACK, false).await.expect("connects");
    io.write_all(&claim(target, key)).await.expect("sends");
    assert_eq!(answer(&mut io).await, Some((200, false)), "the first Claim");
    io
}

async fn heads_over_16_kib(tls: bool) {
    let target = Target::start_keyed(&[], tls).await;
    let dialer = Dialer::new(&target);
    // The first request of a connection, and the second of a kept-alive one.
    let mut first = dialer.dial_from(LOOPBACK, false).await.expect("connects");
    let mut second = served_once(&target, &dialer, "before-431").await;
    for (which, io) in [("first", &mut first), ("second", &mut second)] {
        // The server may close before it read everything: a failed write is fine.
        let _ = io.write_all(&padded_head(17 * 1024, true)).await;
        let (status, _) = answer(io).await.unwrap_or((0, true));
        assert_eq!(status, 431, "the {which} request's 17 KiB head");
        assert!(
            closed(io).await,
            "the {which} request's connection is still open"
        );
    }
    if !tls {
        // The plaintext `/metrics` listener holds a head to about as much.
        let mut scrape = tokio::net::TcpStream::connect(target.metrics)
            .await
            .expect("connects to /metrics");
        let pad = "a".repeat(40 * 1024);
        let head = format!("GET /metrics HTTP/1.1\r\nHost: claimd\r\nX-Pad: {pad}\r\n\r\n");
        let _ = scrape.write_all(head.as_bytes()).await;
        let answer = crate::common::http1::answer(&mut scrape, BOUND).await;
        assert_eq!(
            answer.map(|a| a.status),
            Some(431),
            "a 40 KiB head to /metrics"
        );
    }
    target.assert_survived("17 KiB request heads").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_16_kib_is_answered_431_and_closed_on_every_request_in_plaintext() {
    heads_over_16_kib(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_over_16_kib_is_answered_431_and_closed_on_every_request_over_tls() {
    heads_over_16_kib(true).await;
}

/// Sends `bytes` one at a time, 250 ms apart, until the server closes `io` (a write fails)
/// or [`BOUND`] has passed; whether it closed.
async fn trickle(io: &mut Box<dyn Io>, bytes: &[u8]) -> bool {
    let slow = async {
        for byte in bytes.iter().cycle() {
            if io.write_all(&[*byte]).await.is_err() || io.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    tokio::time::timeout(BOUND, slow).await.is_ok()
}

async fn trickled_heads(tls: bool) {
    let target = Target::start_keyed(&["--first-bytes-timeout", "2s"], tls).await;
    let dialer = Dialer::new(&target);
    // The first head: its first 40 bytes at once (past the connection's first bytes), then
    // the rest a byte at a time.
    let mut first = dialer.dial_from(LOOPBACK, false).await.expect("connects");
    let head = padded_head(1024, true);
    first.write_all(&head[..40]).await.expect("sends");
    assert!(
        trickle(&mut first, &head[40..]).await,
        "a trickled first head"
    );
    // The second head of a kept-alive connection, a byte at a time.
    let mut second = served_once(&target, &dialer, "before-trickle").await;
    assert!(trickle(&mut second, &head).await, "a trickled second head");
    target.assert_survived("trickled request heads").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_trickled_slower_than_the_first_bytes_timeout_is_closed_in_plaintext() {
    trickled_heads(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_trickled_slower_than_the_first_bytes_timeout_is_closed_over_tls() {
    trickled_heads(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_heads_beyond_the_per_source_budget_are_closed_and_another_source_is_served() {
    // The smallest share a source may have (one largest body): 17 heads of 15 KiB fit.
    let args = [
        "--max-buffered-body-bytes-per-source",
        "262149",
        "--first-bytes-timeout",
        "60s",
    ];
    let target = Target::start_keyed(&args, false).await;
    let dialer = Dialer::new(&target);
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut io = dialer.dial_from(LOOPBACK, false).await.expect("connects");
        let _ = io.write_all(&padded_head(15 * 1024, false)).await;
        held.push(io);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut shut = 0;
    for io in &mut held {
        let mut buf = [0u8; 1024];
        let quick = tokio::time::timeout(Duration::from_millis(100), io.read(&mut buf)).await;
        match quick {
            // Closed without an answer: the head was cut off by the budget, not answered.
            Ok(Ok(0) | Err(_)) => shut += 1,
            Ok(Ok(n)) => panic!("an answer to an unfinished head: {:?}", &buf[..n]),
            Err(_) => {}
        }
    }
    assert!(shut >= 3, "{shut} of 20 unfinished 15 KiB heads closed");
    let other = target
        .claim_from(Some(IpAddr::from([127, 0, 0, 2])), None)
        .await;
    assert!(other.is_ok(), "another source: {other:?}");
    println!("20 unfinished 15 KiB heads from one source over a 256 KiB share: {shut} closed");
    drop(held);
    target
        .assert_survived("unfinished heads beyond a source's budget")
        .await;
}
