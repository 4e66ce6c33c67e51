//! Stream-reset floods: the rapid reset of CVE-2023-44487 (a client opens streams and
//! resets them at once, thousands at a time) and its mirror, a client that makes claimd
//! reset streams (a window overflow on each, RUSTSEC-2024-0003). Both end in a GOAWAY
//! (ENHANCE_YOUR_CALM) for that connection, and claimd serves everyone else during and after.

use super::frames::{
    END_HEADERS, ENHANCE_YOUR_CALM, HEADERS, RST_STREAM, WINDOW_UPDATE, claim_headers, goaway,
    h2_raw,
};
use super::{BOUND, Target};
use crate::limits::wire;
use tokio::io::AsyncWriteExt;

/// Streams each flood opens.
const STREAMS: u32 = 5000;

/// `STREAMS` streams of a Claim, each followed at once by `then(stream id)`, as one write.
fn flood(target: &Target, then: impl Fn(u32) -> Vec<u8>) -> Vec<u8> {
    let headers = claim_headers(target.addr);
    let mut out = Vec::new();
    for i in 0..STREAMS {
        let id = 2 * i + 1;
        out.extend(wire::frame(HEADERS, END_HEADERS, id, &headers));
        out.extend(then(id));
    }
    out
}

/// Floods one connection with `frames` while a second client keeps claiming; returns the
/// flooded connection's GOAWAY code.
async fn flood_while_serving(target: &Target, frames: Vec<u8>) -> Option<u32> {
    let mut stream = h2_raw(target.addr).await;
    let writer = tokio::spawn(async move {
        // The server may close the connection before it has read the whole flood.
        let _ = stream.write_all(&frames).await;
        stream
    });
    // Served during the flood.
    target.assert_serves().await;
    let mut stream = tokio::time::timeout(BOUND, writer)
        .await
        .expect("the flood is written or refused within the bound")
        .expect("the writer task");
    goaway(&mut stream).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rapid_reset_flood_gets_goaway_and_other_clients_are_served() {
    let target = Target::start(&[]).await;
    let cancel = |id| wire::frame(RST_STREAM, 0, id, &0x8u32.to_be_bytes());
    let code = flood_while_serving(&target, flood(&target, cancel)).await;
    assert_eq!(code, Some(ENHANCE_YOUR_CALM), "the flood was not stopped");
    target.assert_survived("rapid reset flood").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_claimd_must_reset_are_bounded_by_a_goaway() {
    let target = Target::start(&[]).await;
    // A stream's send window is 65,535; adding 2^31 - 1 overflows it: claimd resets it.
    let overflow = |id| wire::frame(WINDOW_UPDATE, 0, id, &0x7fff_ffffu32.to_be_bytes());
    let code = flood_while_serving(&target, flood(&target, overflow)).await;
    assert_eq!(
        code,
        Some(ENHANCE_YOUR_CALM),
        "claimd reset {STREAMS} streams without closing the connection"
    );
    target.assert_survived("local-error reset flood").await;
}
