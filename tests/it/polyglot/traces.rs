//! Issue 32's clients: a call the Python package (`clients/python`) or the Node package
//! (`clients/node`) makes inside the caller's OpenTelemetry span arrives at claimd with the
//! caller's trace — claimd's SERVER span is a child of that span — with only the
//! OpenTelemetry API installed in the caller's process (Node: with the W3C propagator and a
//! context manager registered, as any Node SDK setup does).

use super::tools;
use crate::traces::receiver::{Receiver, hex};
use crate::traces::traced;
use std::process::Command;

const PYTHON: &str = r#"
import os, claimd
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
parent = SpanContext(trace_id=int(os.environ["TRACE"], 16), span_id=int(os.environ["SPAN"], 16),
                     is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
with trace.use_span(NonRecordingSpan(parent)):
    with claimd.Claims(os.environ["CLAIMD_TARGET"]) as claims:
        print(claims.claim("traced-py", "ev-py", b"fp").decision)
"#;

const NODE: &str = r#"
const api = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const { Claims } = require('./index.js');
const parent = { traceId: process.env.TRACE, spanId: process.env.SPAN,
                 traceFlags: api.TraceFlags.SAMPLED, isRemote: false };
api.context.with(api.trace.setSpanContext(api.context.active(), parent), async () => {
  const claims = new Claims(process.env.CLAIMD_TARGET);
  const outcome = await claims.claim('traced-node', 'ev-node', Buffer.from('fp'));
  console.log(outcome.decision);
  claims.close();
});
"#;

/// Runs `cmd` with the parent's ids; then waits for claimd's span under that parent.
async fn arrives_with_the_callers_trace(mut cmd: Command, what: &str, n: u8) {
    let (collector, at) = Receiver::start().await;
    let claimd = traced(at, &[], &[]).await;
    let trace = format!("{:032x}", 0x5eed_0000_u128 + u128::from(n));
    let span = format!("{:016x}", 0x0bad_cafe_u64 + u64::from(n));
    cmd.env("TRACE", &trace)
        .env("SPAN", &span)
        .env("CLAIMD_TARGET", claimd.addr.to_string());
    let output = tokio::task::spawn_blocking(move || tools::run(&mut cmd, "the traced call"));
    let output = output.await.expect("the script ran");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("CLAIMED"), "{what}: {printed}");
    collector
        .wait_for(&format!("{what}'s call in the caller's trace"), |spans| {
            spans
                .iter()
                .any(|s| hex(&s.trace_id) == trace && hex(&s.parent_span_id) == span)
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_call_inside_the_callers_span_arrives_in_its_trace() {
    let mut cmd = Command::new(tools::python());
    cmd.args(["-c", PYTHON])
        .env("PYTHONPATH", tools::repo().join("clients/python/src"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    arrives_with_the_callers_trace(cmd, "the Python package", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_call_inside_the_callers_span_arrives_in_its_trace() {
    let package = tools::npm_ci("clients/node");
    let mut cmd = Command::new("node");
    cmd.args(["-e", NODE]).current_dir(package);
    arrives_with_the_callers_trace(cmd, "the Node package", 2).await;
}
