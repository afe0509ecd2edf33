//! The OTLP exporter: the SDK's batch span processor sending to `--otlp-endpoint` over
//! gRPC (tonic) or HTTP (protobuf, through the webhooks' [`Sender`]), and the `tracing`
//! layer that turns the spans of [`super::TARGET`] into OpenTelemetry spans.

use std::{fmt, time::Duration};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use opentelemetry::{KeyValue, trace::TracerProvider as _};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::{
    Resource,
    trace::{Sampler, SdkTracerProvider},
};
use tracing::{Level, Subscriber};
use tracing_subscriber::{Layer, filter::Targets, registry::LookupSpan};

use crate::egress::send::{Sender, Target};

/// How long one export may take before it is given up (the batch is then dropped: a
/// trace is not worth holding the node's memory for).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// `--otlp-protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (the collector's port 4317).
    #[default]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (port 4318), to `{endpoint}/v1/traces`.
    Http,
}

/// Where and what to export.
#[derive(Debug, Clone)]
pub struct TraceExport {
    /// The collector's base URL (`http://collector:4317`).
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// The share of traces started here that are kept (0 to 1); a caller's sampled
    /// flag decides for the traces it started.
    pub sampling: f64,
    /// Also the spans of each backend call (Redis, SQLite): many per ask.
    pub backend_calls: bool,
    /// `service.instance.id`: this node's name.
    pub instance: String,
}

/// The running exporter. [`Traces::shutdown`] sends what is still buffered.
pub struct Traces {
    provider: SdkTracerProvider,
    backend_calls: bool,
}

impl fmt::Debug for Traces {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Traces").finish_non_exhaustive()
    }
}

impl Traces {
    /// Starts the exporter. Call within the Tokio runtime the node runs on: the
    /// exporter's connections live there.
    pub fn start(export: &TraceExport) -> anyhow::Result<Self> {
        if !(0.0..=1.0).contains(&export.sampling) {
            bail!(
                "--otlp-sampling must be between 0 and 1, not {}",
                export.sampling
            );
        }
        let endpoint = export.endpoint.trim_end_matches('/');
        let exporter = match export.protocol {
            OtlpProtocol::Grpc => {
                let mut builder = opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(endpoint)
                    .with_timeout(EXPORT_TIMEOUT);
                if endpoint.starts_with("https://") {
                    builder = builder.with_tls_config(
                        tonic::transport::ClientTlsConfig::new().with_webpki_roots(),
                    );
                }
                builder.build()
            }
            OtlpProtocol::Http => {
                let url = format!("{endpoint}/v1/traces");
                Target::parse(&url)
                    .map_err(|e| anyhow::anyhow!("--otlp-endpoint {endpoint}: {e}"))?;
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url)
                    .with_timeout(EXPORT_TIMEOUT)
                    .with_http_client(OnRuntime::new())
                    .build()
            }
        }
        .with_context(|| format!("--otlp-endpoint {endpoint}"))?;
        let resource = Resource::builder()
            .with_service_name("askgate")
            .with_attributes([
                KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
                KeyValue::new("service.instance.id", export.instance.clone()),
            ])
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                export.sampling,
            ))))
            .with_resource(resource)
            .build();
        Ok(Self {
            provider,
            backend_calls: export.backend_calls,
        })
    }

    /// The `tracing` layer exporting askgate's spans, and only those.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let level = match self.backend_calls {
            true => Level::DEBUG,
            false => Level::INFO,
        };
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("askgate"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(Targets::new().with_target(super::TARGET, level))
    }

    /// Sends the spans still buffered and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("exporting the last traces failed: {e}");
        }
    }
}

/// OTLP/HTTP's client: the webhooks' [`Sender`] (HTTP/1.1, rustls), run on the Tokio
/// runtime the exporter was made on, whatever thread the batch processor exports from.
#[derive(Clone)]
struct OnRuntime {
    sender: Sender,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    fn new() -> Self {
        Self {
            // The collector is the operator's, often on a private address.
            sender: Sender::new(true, EXPORT_TIMEOUT).with_max_response(64 * 1024),
            runtime: tokio::runtime::Handle::current(),
        }
    }
}

impl fmt::Debug for OnRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRuntime")
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let target = Target::parse(&request.uri().to_string())?;
        let (parts, body) = request.into_parts();
        let sender = self.sender.clone();
        let (status, body) = self
            .runtime
            .spawn(async move { sender.post_headers(&target, parts.headers, body).await })
            .await??;
        Ok(Response::builder().status(status).body(body)?)
    }
}
