//! `roundtrip --traces`: an OTLP/gRPC sink in this process (the collector's service,
//! from the official protos) that the nodes export every span to, counting them.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};

/// The sink: where it listens, and the spans it received.
pub struct Sink {
    addr: SocketAddr,
    spans: Arc<AtomicUsize>,
}

struct Counting(Arc<AtomicUsize>);

#[tonic::async_trait]
impl TraceService for Counting {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(spans, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Sink {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let spans = Arc::new(AtomicUsize::new(0));
        let service = TraceServiceServer::new(Counting(spans.clone()));
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        Ok(Self { addr, spans })
    }

    /// The flags that make a node export to it, every trace sampled.
    pub fn node_args(&self) -> Vec<String> {
        vec![
            "--otlp-endpoint".into(),
            format!("http://{}", self.addr),
            "--otlp-sampling".into(),
            "1".into(),
        ]
    }

    /// Spans received so far.
    pub fn spans(&self) -> usize {
        self.spans.load(Ordering::Relaxed)
    }
}
