//! An OTLP collector for the tests: the `TraceService` of OpenTelemetry's protocol on a
//! local port, keeping every span it is sent (with its resource's attributes), and the
//! helpers that read them: a span's attributes and links, by trace and parent.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};

/// What the collector was sent.
#[derive(Clone, Default)]
pub struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
    resources: Arc<Mutex<Vec<KeyValue>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        for resource_spans in request.into_inner().resource_spans {
            if let Some(resource) = resource_spans.resource {
                self.resources.lock().unwrap().extend(resource.attributes);
            }
            for scope in resource_spans.scope_spans {
                self.spans.lock().unwrap().extend(scope.spans);
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// A collector on 127.0.0.1 at a free port, serving until the test ends.
    pub async fn start() -> (Receiver, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = Receiver::default();
        let service = TraceServiceServer::new(receiver.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        (receiver, addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Every resource attribute received so far.
    pub fn resource(&self) -> Vec<KeyValue> {
        self.resources.lock().unwrap().clone()
    }

    /// Waits (up to 20 s) until the spans received satisfy `done`; they, then.
    pub async fn wait_for(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within 20 s; received: {:#?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A value as text (strings as they are, numbers and booleans printed).
pub fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// The span's attribute `name`, as text.
pub fn attribute(span: &Span, name: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == name)
        .map(|kv| text(&kv.value))
}

/// Ids as lower-case hex, as `traceparent` writes them.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
