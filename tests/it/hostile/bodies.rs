//! Hostile request bodies and a connection flood, against the real binary: protobuf nested
//! far beyond prost's recursion limit inside a ClaimRequest, a string field that is not
//! UTF-8 (both INVALID_ARGUMENT, not INTERNAL: the caller is at fault), and more connections
//! than `--max-connections` opened at once. A message over the request limit is
//! RESOURCE_EXHAUSTED (`limits/streams.rs`).

use super::{BOUND, Target};
use crate::limits::wire;
use claimd::pb::ClaimRequest;
use claimd::pb::claim_service_client::ClaimServiceClient;
use prost::Message;
use tonic::{Code, Status};

/// Calls Claim with `body` as the raw protobuf message and returns the call's status.
async fn claim_raw(target: &Target, body: &[u8]) -> Status {
    let mut frame = vec![0];
    frame.extend(
        u32::try_from(body.len())
            .expect("a small body")
            .to_be_bytes(),
    );
    frame.extend(body);
    let (mut send, _conn) = wire::h2_connect(target.addr).await;
    let call = async {
        let (response, mut stream) = send
            .send_request(wire::request(target.addr, "Claim"), false)
            .expect("the stream opens");
        stream
            .send_data(frame.into(), true)
            .expect("the body is sent");
        let response = response.await.expect("an answer");
        if let Some(status) = Status::from_header_map(response.headers()) {
            return status;
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("the answer's body");
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await.expect("trailers").expect("trailers");
        Status::from_header_map(&trailers).expect("a grpc-status")
    };
    tokio::time::timeout(BOUND, call)
        .await
        .expect("answered in time")
}

/// A valid ClaimRequest's encoding.
fn valid_claim() -> Vec<u8> {
    ClaimRequest {
        namespace: "hostile".into(),
        key: "nested".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_nested_beyond_the_recursion_limit_is_invalid_argument() {
    let target = Target::start(&[]).await;
    for depth in [101, 100_000] {
        // Unknown field 15 as a group (start tag 0x7b, end tag 0x7c), `depth` levels deep.
        let mut body = valid_claim();
        body.extend(std::iter::repeat_n(0x7b, depth));
        body.extend(std::iter::repeat_n(0x7c, depth));
        let status = claim_raw(&target, &body).await;
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "depth {depth}: {status:?}"
        );
    }
    target.assert_survived("protobuf nested 100,000 deep").await;
    assert_eq!(
        crate::common::app::decision(&claim_ok(&target).await) as i32,
        1
    );
}

/// The nested Claim's key, claimed for real: the rejected bodies wrote nothing.
async fn claim_ok(target: &Target) -> claimd::pb::ClaimResponse {
    let mut client = ClaimServiceClient::connect(format!("http://{}", target.addr))
        .await
        .expect("connects");
    let request = ClaimRequest::decode(valid_claim().as_slice()).expect("valid");
    client.claim(request).await.expect("Claim").into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_field_that_is_not_utf8_is_invalid_argument_naming_the_field() {
    use tonic_types::StatusExt;
    let target = Target::start(&[]).await;
    // Field 2 (`key`), length-delimited, 3 bytes that are not UTF-8.
    let mut body = valid_claim();
    body.extend([0x12, 3, 0xff, 0xfe, 0x00]);
    let status = claim_raw(&target, &body).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let details = status
        .get_details_bad_request()
        .expect("BadRequest details");
    let fields: Vec<_> = details.field_violations.iter().map(|v| &v.field).collect();
    assert_eq!(fields, ["key"]);
    target.assert_survived("a key that is not UTF-8").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_beyond_the_cap_leaves_connected_clients_served() {
    const CAP: usize = 32;
    let target = Target::start(&["--max-connections", "32"]).await;
    let mut client = ClaimServiceClient::connect(format!("http://{}", target.addr))
        .await
        .expect("connects");
    let mut flood = Vec::new();
    for _ in 0..CAP * 16 {
        // Beyond the cap, a connect may succeed and be closed at once, or fail: both fine.
        if let Ok(stream) = tokio::net::TcpStream::connect(target.addr).await {
            flood.push(stream);
        }
    }
    // The client connected before the flood is served during it.
    let request = ClaimRequest {
        namespace: "hostile".into(),
        key: "during-the-flood".into(),
        ..Default::default()
    };
    let during = tokio::time::timeout(BOUND, client.claim(request)).await;
    during
        .expect("answered in time")
        .expect("served during the flood");
    // Those beyond the cap were closed; the rest close when the flood lets go.
    let mut closed = 0;
    for stream in &mut flood {
        let timeout = std::time::Duration::from_millis(20);
        if wire::closed_within(stream, timeout).await {
            closed += 1;
        }
    }
    assert!(
        closed >= flood.len() - CAP,
        "{closed} of {} closed",
        flood.len()
    );
    drop(flood);
    // Once claimd has seen the flood's connections end, a new client gets a slot.
    let deadline = std::time::Instant::now() + BOUND;
    while ClaimServiceClient::connect(format!("http://{}", target.addr))
        .await
        .is_err()
    {
        assert!(std::time::Instant::now() < deadline, "no slot freed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    target.assert_survived("a connection flood").await;
}
