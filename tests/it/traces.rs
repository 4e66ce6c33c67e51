//! Traces through the real binary (issue 32; docs/DESIGN.md §5.13): claimd on a fresh
//! PostgreSQL database with one group-commit lane, exporting over OTLP/gRPC to a collector
//! the test starts (`receiver`). A Claim carrying a `traceparent` is a SERVER span of that
//! trace with the RPC conventions' attributes; two calls that share a batch are linked to
//! one batch span both ways; the HTTP door continues the caller's trace too; an unsampled
//! parent exports nothing; no key, token, payload or API key is in any exported attribute;
//! JSON logs carry the call's trace id; an unreachable collector changes no answer; a
//! collector that never answers is logged and holds up no exit (`traces/shutdown.rs`); the
//! duplicates of a hot key in one batch share one row's read (`traces/hot_read.rs`).

mod hot_read;
pub(crate) mod receiver;
mod shutdown;

use crate::common::blocker::Blocker;
use crate::common::process::{Claimd, claimd, free_addr};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, CompleteRequest, Decision, HeartbeatRequest};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use receiver::{Receiver, attribute, hex};
use std::net::SocketAddr;
use std::time::Duration;
use tonic::Request;
use tonic::transport::Channel;

/// A claimd exporting to `collector` (an address nobody may listen on, too), serving a
/// fresh PostgreSQL database with one lane; `extra` flags and environment added.
pub(crate) struct Traced {
    pub claimd: Claimd,
    pub addr: SocketAddr,
    pub(crate) database_url: String,
}

pub(crate) async fn traced(collector: SocketAddr, flags: &[&str], env: &[(&str, &str)]) -> Traced {
    let database_url = crate::common::pg::fresh_database().await;
    let addr = free_addr();
    let mut cmd = claimd();
    cmd.args([
        "serve",
        "--listen",
        &addr.to_string(),
        "--database-url",
        &database_url,
    ])
    .args(["--group-commit-lanes", "1", "--metrics-listen", "off"])
    .args(flags)
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))
    .env("OTEL_BSP_SCHEDULE_DELAY", "100")
    .env("OTEL_SERVICE_NAME", "claimd-under-test")
    .env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let claimd = Claimd::start(cmd, addr).await;
    Traced {
        claimd,
        addr,
        database_url,
    }
}

impl Traced {
    pub(crate) async fn client(&self) -> ClaimServiceClient<Channel> {
        ClaimServiceClient::connect(format!("http://{}", self.addr))
            .await
            .expect("connects")
    }
}

/// A sampled W3C parent: trace id, parent span id, the header.
fn parent(n: u8) -> (String, String, String) {
    let trace = format!("{:032x}", 0xa1b2_c3d4_0000_0000_u128 + u128::from(n));
    let span = format!("{:016x}", 0x00f0_0000_0000_0000_u64 + u64::from(n));
    let header = format!("00-{trace}-{span}-01");
    (trace, span, header)
}

fn with_parent<T>(message: T, traceparent: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().expect("a header value"));
    request
}

pub(crate) fn claim(key: &str) -> ClaimRequest {
    ClaimRequest {
        namespace: "traced".into(),
        key: key.into(),
        fingerprint: b"fp".to_vec(),
        ..Default::default()
    }
}

/// The SERVER span of trace `trace` whose parent is `parent`.
fn server_span<'a>(spans: &'a [Span], trace: &str, parent: &str) -> Option<&'a Span> {
    spans.iter().find(|s| {
        hex(&s.trace_id) == trace
            && hex(&s.parent_span_id) == parent
            && s.kind == SpanKind::Server as i32
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_traceparent_is_a_server_span_of_that_trace_with_the_rpc_attributes() {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let (trace, parent_id, header) = parent(1);
    let answer = claimd
        .client()
        .await
        .claim(with_parent(claim("ev-1"), &header))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.decision(), Decision::Claimed);
    let spans = collector
        .wait_for("the Claim's server span", |s| {
            server_span(s, &trace, &parent_id).is_some()
        })
        .await;
    let span = server_span(&spans, &trace, &parent_id).unwrap();
    assert_eq!(span.name, "claimd.v1.ClaimService/Claim");
    for (name, value) in [
        ("rpc.system", "grpc"),
        ("rpc.service", "claimd.v1.ClaimService"),
        ("rpc.method", "Claim"),
        ("rpc.grpc.status_code", "0"),
        ("claimd.decision", "CLAIMED"),
        ("claimd.namespace", "traced"),
    ] {
        assert_eq!(
            attribute(span, name).as_deref(),
            Some(value),
            "{name}: {span:#?}"
        );
    }
    let service = collector
        .resource()
        .into_iter()
        .find(|kv| kv.key == "service.name");
    let service = service.map(|kv| receiver::text(&kv.value));
    assert_eq!(service.as_deref(), Some("claimd-under-test"));
    // The call's wait in the group-commit queue is its child.
    let span_id = hex(&span.span_id);
    assert!(
        spans
            .iter()
            .any(|s| s.name == "group_commit.wait" && hex(&s.parent_span_id) == span_id),
        "{spans:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_that_share_a_batch_are_linked_to_one_batch_span_both_ways() {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let mut client = claimd.client().await;
    // The one lane held: a Heartbeat of `busy` waits behind the test's lock on its row.
    let busy = client
        .claim(claim("busy"))
        .await
        .unwrap()
        .into_inner()
        .claim_token;
    let mut blocker = Blocker::hold(&claimd.database_url, "busy").await;
    let heartbeat = HeartbeatRequest {
        namespace: "traced".into(),
        key: "busy".into(),
        claim_token: busy,
        ..Default::default()
    };
    let first = {
        let mut client = client.clone();
        tokio::spawn(async move { client.heartbeat(heartbeat).await })
    };
    blocker.wait_for_waiter().await;
    let calls: Vec<_> = [2u8, 3]
        .into_iter()
        .map(|n| {
            let (mut client, (_, _, header)) = (client.clone(), parent(n));
            let request = with_parent(claim(&format!("ev-{n}")), &header);
            tokio::spawn(async move { client.claim(request).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    blocker.release().await;
    first.await.unwrap().expect("the Heartbeat that waited");
    for call in calls {
        assert_eq!(
            call.await.unwrap().unwrap().into_inner().decision(),
            Decision::Claimed
        );
    }
    let (two, three) = (parent(2), parent(3));
    let calls = |spans: &[Span]| -> Vec<Span> {
        [&two, &three]
            .iter()
            .filter_map(|(trace, parent_id, _)| server_span(spans, trace, parent_id).cloned())
            .collect()
    };
    let links_all = |batch: &Span, calls: &[Span]| {
        batch.name == "group_commit.batch"
            && calls
                .iter()
                .all(|c| batch.links.iter().any(|l| l.span_id == c.span_id))
    };
    let spans = collector
        .wait_for("both calls and their batch", |spans| {
            let calls = calls(spans);
            calls.len() == 2 && spans.iter().any(|b| links_all(b, &calls))
        })
        .await;
    let calls = calls(&spans);
    let batch = spans.iter().find(|b| links_all(b, &calls)).unwrap();
    assert!(
        batch.parent_span_id.is_empty(),
        "a batch is a root of its own"
    );
    assert_eq!(
        attribute(batch, "db.system.name").as_deref(),
        Some("postgresql")
    );
    let size: usize = attribute(batch, "db.operation.batch.size")
        .unwrap()
        .parse()
        .unwrap();
    assert!(size >= 2, "the batch served both calls: {size}");
    for call in &calls {
        assert!(
            call.links.iter().any(|l| l.span_id == batch.span_id),
            "each call's span records the batch it rode: {call:#?}"
        );
        let waited = spans
            .iter()
            .any(|w| w.name == "group_commit.wait" && w.parent_span_id == call.span_id);
        assert!(waited, "the call's wait in the queue is its child");
    }
    // The batch's statements are its children.
    assert!(
        spans
            .iter()
            .any(|s| s.name == "db.write" && s.parent_span_id == batch.span_id)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_door_continues_the_callers_trace() {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let (trace, parent_id, header) = parent(4);
    let body = r#"{"namespace":"traced","key":"ev-4","fingerprint":"ZnA="}"#;
    let head = format!(
        "POST /claimd.v1.ClaimService/Claim HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\ntraceparent: {header}\r\n\r\n",
        claimd.addr,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(claimd.addr).await.unwrap();
    crate::common::http1::send(&mut stream, &head, body.as_bytes()).await;
    let answer = crate::common::http1::answer(&mut stream, Duration::from_secs(10)).await;
    assert_eq!(answer.expect("an answer").status, 200);
    let spans = collector
        .wait_for("the Connect call's server span", |s| {
            server_span(s, &trace, &parent_id).is_some()
        })
        .await;
    let span = server_span(&spans, &trace, &parent_id).unwrap();
    assert_eq!(attribute(span, "rpc.method").as_deref(), Some("Claim"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsampled_parent_exports_no_span_of_its_trace() {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let (unsampled_trace, _, header) = parent(5);
    let header = header.replace("-01", "-00");
    let mut client = claimd.client().await;
    client
        .claim(with_parent(claim("ev-5"), &header))
        .await
        .unwrap();
    // A sampled call after it: once its span arrives, the unsampled one would have too.
    let (trace, parent_id, sampled) = parent(6);
    client
        .claim(with_parent(claim("ev-6"), &sampled))
        .await
        .unwrap();
    let spans = collector
        .wait_for("the sampled call", |s| {
            server_span(s, &trace, &parent_id).is_some()
        })
        .await;
    assert!(
        !spans.iter().any(|s| hex(&s.trace_id) == unsampled_trace),
        "the caller's decision not to sample holds"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_token_payload_or_api_key_is_in_any_exported_attribute() {
    const PAYLOAD: &str = "CANARY-payload-trace";
    const RESPONSE: &str = "CANARY-response-trace";
    let (collector, at) = Receiver::start().await;
    let claimd = traced(
        at,
        &["--log-format", "json"],
        &[("RUST_LOG", "claimd=debug")],
    )
    .await;
    let key = "CANARY-key-4e8a";
    let (trace, parent_id, header) = parent(7);
    let mut client = claimd.client().await;
    let mut request = claim(key);
    request.recovery_payload = PAYLOAD.as_bytes().to_vec();
    let token = client
        .claim(with_parent(request, &header))
        .await
        .unwrap()
        .into_inner()
        .claim_token;
    let complete = CompleteRequest {
        namespace: "traced".into(),
        key: key.into(),
        claim_token: token.clone(),
        response: RESPONSE.as_bytes().to_vec(),
    };
    client
        .complete(with_parent(complete, &header))
        .await
        .unwrap();
    // A wrong API key too: refused, and not exported either.
    let mut refused = with_parent(claim("ev-8"), &header);
    let api_key = "ck_CANARYid.CANARYsecret";
    refused.metadata_mut().insert(
        "authorization",
        format!("Bearer {api_key}").parse().unwrap(),
    );
    let _ = client.claim(refused).await;
    let spans = collector
        .wait_for("both calls", |s| {
            s.iter()
                .filter(|s| hex(&s.trace_id) == trace && hex(&s.parent_span_id) == parent_id)
                .count()
                >= 2
        })
        .await;
    let mut exported: Vec<String> = collector
        .resource()
        .iter()
        .map(|kv| receiver::text(&kv.value))
        .collect();
    for span in &spans {
        exported.push(span.name.clone());
        exported.extend(
            span.attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, receiver::text(&kv.value))),
        );
        for event in &span.events {
            exported.push(event.name.clone());
            exported.extend(event.attributes.iter().map(|kv| receiver::text(&kv.value)));
        }
    }
    let all = exported.join("\n");
    assert!(
        all.contains("claimd.namespace=traced"),
        "the capture works: {all}"
    );
    for secret in [
        key,
        token.as_str(),
        PAYLOAD,
        RESPONSE,
        api_key,
        "CANARYsecret",
    ] {
        assert!(!all.contains(secret), "{secret} was exported:\n{all}");
    }
    // JSON logs carry the call's trace id (and never the secrets: `tests/secrets.rs`).
    let log = claimd.claimd.log();
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("\"trace_id\":\"{trace}\""))),
        "a JSON log line with the call's trace id:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_changes_no_answer() {
    // Nobody listens there: every export fails, in the exporter's thread.
    let nowhere = free_addr();
    let claimd = traced(nowhere, &[], &[]).await;
    let mut client = claimd.client().await;
    for n in 0..50 {
        let (_, _, header) = parent(100 + n);
        let request = with_parent(claim(&format!("nowhere-{n}")), &header);
        let answer = client.claim(request).await.expect("answered").into_inner();
        assert_eq!(answer.decision(), Decision::Claimed);
        let again = client
            .claim(claim(&format!("nowhere-{n}")))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(again.decision(), Decision::InFlight);
    }
    assert!(!claimd.claimd.log().contains("panicked"));
}
