//! An OTLP/gRPC collector that keeps nothing: it accepts every span and prints, each
//! second, how many it received. For measuring what tracing costs claimd
//! (docs/PERFORMANCE.md, "What tracing costs"), where a real collector would run on
//! another host: `cargo run --release --example otlp_sink -- 127.0.0.1:4317`.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tonic::{Request, Response, Status};

#[derive(Clone, Default)]
struct Sink {
    spans: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let spans = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len() as u64)
            .sum::<u64>();
        self.spans.fetch_add(spans, Ordering::Relaxed);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4317".to_owned())
        .parse()?;
    let sink = Sink::default();
    let count = sink.spans.clone();
    tokio::spawn(async move {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = count.load(Ordering::Relaxed);
            println!("{} spans/s, {now} in all", now - last);
            last = now;
        }
    });
    println!("OTLP sink on {addr}");
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(sink))
        .serve(addr)
        .await?;
    Ok(())
}
