//! Issue 31's console door against the real binary with API keys on: a flood from twenty
//! loopback sources of unauthenticated callers — POSTs declaring 1 MiB forms and sending
//! ten bytes, heads that never end, connections beyond each source's share, and thousands
//! of sign-ins with wrong keys — costs no body memory and no slot another source needs:
//! the resident memory stays within [`RSS_BOUND_KIB`] of what it was, at its peak during
//! the flood and after; a good key signs in from another source during the flood, and the
//! gRPC port keeps serving.

use super::{RSS_BOUND_KIB, Target};
use crate::common::http1;
use crate::common::http2::tcp_from;
use crate::common::process::free_addr;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Sources holding connections and how many each tries to hold (beyond its share of
/// `claimd::console::MAX_PER_SOURCE`, the rest are closed at once).
const SOURCES: u8 = 20;
const PER_SOURCE: usize = 12;
/// Sign-ins with a wrong key, over all sources.
const WRONG_SIGN_INS: usize = 2000;

/// A source of held connections (127.0.0.10 …), or of wrong sign-ins (127.0.0.40 …).
fn source(i: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, 10 + i])
}

fn signer(i: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, 40 + i])
}

/// One held connection of the flood: an unauthenticated form that never finishes, or a
/// head that never ends.
async fn hold(from: IpAddr, console: SocketAddr, n: usize) -> Option<tokio::net::TcpStream> {
    let mut stream = tcp_from(from, console).await;
    let what = if n.is_multiple_of(2) {
        format!(
            "POST /receipt/redrive HTTP/1.1\r\nHost: {console}\r\nContent-Length: 1048576\r\n\r\nnamespace="
        )
    } else {
        format!("GET / HTTP/1.1\r\nHost: {console}\r\nX-Slow: ")
    };
    stream.write_all(what.as_bytes()).await.ok()?;
    Some(stream)
}

async fn wrong_sign_in(from: IpAddr, console: SocketAddr, i: usize) -> Option<u16> {
    let body = format!("key=ck_flood{i}.secret");
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {console}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tcp_from(from, console).await;
    // A connection the server closed at once (its source over its share) answers nothing.
    stream.write_all(head.as_bytes()).await.ok()?;
    stream.write_all(body.as_bytes()).await.ok()?;
    Some(
        http1::answer(&mut stream, Duration::from_secs(15))
            .await?
            .status,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_flood_of_the_console_holds_no_memory_and_no_other_sources_slot() {
    let console = free_addr();
    let target = Target::start_with_key(&["--console-listen", &console.to_string()]).await;
    let key = target.key.clone().expect("a keyed target");

    let mut held = Vec::new();
    for s in 0..SOURCES {
        for n in 0..PER_SOURCE {
            held.extend(hold(source(s), console, n).await);
        }
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    let mut peak = target.rss_kib();
    for chunk in (0..WRONG_SIGN_INS).collect::<Vec<_>>().chunks(100) {
        let calls = chunk
            .iter()
            .map(|&i| wrong_sign_in(signer((i % 20) as u8), console, i));
        for status in futures::future::join_all(calls).await.into_iter().flatten() {
            *statuses.entry(status).or_default() += 1;
        }
        peak = peak.max(target.rss_kib());
    }
    // Every wrong key was refused (401, or 429 once its address was over the limit): none
    // was let in, and the held connections of other sources did not keep them out.
    let refused: usize = statuses
        .iter()
        .filter(|(s, _)| [401, 429].contains(s))
        .map(|(_, n)| n)
        .sum();
    assert!(
        refused > 0 && statuses.keys().all(|s| [401, 429, 503].contains(s)),
        "{statuses:?}"
    );

    // During the flood a good key signs in from a source of its own.
    let body = format!("key={key}");
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {console}\r\nConnection: close\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut stream = tcp_from(IpAddr::from([127, 0, 0, 2]), console).await;
    http1::send(&mut stream, &head, body.as_bytes()).await;
    let answer = http1::answer(&mut stream, Duration::from_secs(15)).await;
    assert_eq!(answer.expect("an answer").status, 303, "{}", target.log());

    println!(
        "console flood: RSS {} KiB before, peak {peak} KiB ({:+} KiB), {} held connections, {statuses:?}",
        target.rss_before,
        i128::from(peak) - i128::from(target.rss_before),
        held.len()
    );
    assert!(
        peak < target.rss_before + RSS_BOUND_KIB,
        "RSS peaked at {peak} KiB from {} KiB",
        target.rss_before
    );
    drop(held);
    target.assert_survived("console flood").await;
}
