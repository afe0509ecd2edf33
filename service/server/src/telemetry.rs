//! Traces over OTLP (docs/operations.md, "Traces"): the spans of an ask's life, as
//! `tracing` spans of the target [`TARGET`] that the OpenTelemetry layer (installed only
//! with `--otlp-endpoint`) exports. With no layer, no subscriber is interested in that
//! target and a span costs the check of its callsite's interest: nothing is extracted,
//! recorded or stored.
//!
//! The agent's trace context arrives as W3C `traceparent`/`tracestate`: in gRPC (and
//! gRPC-Web) metadata, or in an MCP request's `params._meta`. The ask's span is a child
//! of it; the pending ask keeps the ask span's own `traceparent`, so that the span of
//! the call that answers or cancels it, on whichever node, links to it.

mod export;

use std::collections::HashMap;

use opentelemetry::{
    Context,
    propagation::{Extractor, TextMapPropagator},
    trace::{SpanContext, TraceContextExt},
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::{Span, field::Empty};
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub use export::{OtlpProtocol, TraceExport, Traces};

/// The `tracing` target of every span askgate exports, and of nothing else.
pub const TARGET: &str = askgate_core::TRACE_TARGET;

/// Longest `traceparent` or `tracestate` value taken from a caller (W3C asks for 512
/// bytes of `tracestate` to be kept; a `traceparent` is 55): a longer one is ignored.
const MAX_CONTEXT_VALUE_BYTES: usize = 512;

/// The trace context a caller's W3C headers carry, if any is valid.
fn extract(carrier: &dyn Extractor) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// The context gRPC metadata (or the HTTP headers of gRPC-Web) carries.
pub fn from_metadata(metadata: &tonic::metadata::MetadataMap) -> Option<Context> {
    struct Metadata<'a>(&'a tonic::metadata::MetadataMap);
    impl Extractor for Metadata<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            bounded(self.0.get(key)?.to_str().ok()?)
        }
        fn keys(&self) -> Vec<&str> {
            Vec::new()
        }
    }
    extract(&Metadata(metadata))
}

/// The context an MCP request's `params._meta` carries (`traceparent`, `tracestate`
/// as string members), as OpenTelemetry's MCP conventions place it.
pub fn from_json(meta: &serde_json::Map<String, serde_json::Value>) -> Option<Context> {
    struct Json<'a>(&'a serde_json::Map<String, serde_json::Value>);
    impl Extractor for Json<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            bounded(self.0.get(key)?.as_str()?)
        }
        fn keys(&self) -> Vec<&str> {
            Vec::new()
        }
    }
    extract(&Json(meta))
}

/// Whether askgate's spans are exported (the layer is installed).
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// The trace context a caller's metadata carries, when spans are exported.
pub fn caller(metadata: &tonic::metadata::MetadataMap) -> Option<Context> {
    enabled().then(|| from_metadata(metadata)).flatten()
}

/// `call` run in `parent` (the caller's trace context, [`caller`]), when there is
/// one: the spans it makes are the caller's children.
pub fn within<F: Future>(
    parent: Option<Context>,
    call: F,
) -> futures_util::future::Either<F, opentelemetry::context::WithContext<F>> {
    use futures_util::future::Either;
    use opentelemetry::context::FutureExt as _;
    match parent {
        Some(cx) => Either::Right(call.with_context(cx)),
        None => Either::Left(call),
    }
}

fn bounded(value: &str) -> Option<&str> {
    (value.len() <= MAX_CONTEXT_VALUE_BYTES).then_some(value)
}

/// The W3C headers of `span`'s context (empty when it is not exported): what a call
/// askgate makes for it carries.
pub fn headers(span: &Span) -> HashMap<String, String> {
    if span.is_disabled() {
        return HashMap::new();
    }
    let cx = span.context();
    match cx.span().span_context().is_sampled() {
        true => headers_of(&cx),
        false => HashMap::new(),
    }
}

/// The W3C headers that carry `cx`.
pub fn headers_of(cx: &Context) -> HashMap<String, String> {
    let mut headers = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut headers);
    headers
}

/// `span`'s own `traceparent`, empty when it is not exported: what a pending ask keeps
/// for the spans of the calls that resolve it to link to.
pub fn traceparent(span: &Span) -> String {
    headers(span).remove("traceparent").unwrap_or_default()
}

/// Links `span` to the span a `traceparent` names (one [`traceparent`] made).
pub fn link(span: &Span, traceparent: &str) {
    if let Some(cx) = context_of(span, traceparent) {
        span.add_link(SpanContext::clone(cx.span().span_context()));
    }
}

/// The context a stored `traceparent` names, when there is one and `span` is exported.
fn context_of(span: &Span, traceparent: &str) -> Option<Context> {
    if traceparent.is_empty() || span.is_disabled() {
        return None;
    }
    extract(&HashMap::from([(
        "traceparent".to_owned(),
        traceparent.to_owned(),
    )]))
}

/// The span of an ask's wait, from its registration to its resolution: a child of the
/// caller's span when `parent` gives one. Its attributes: docs/operations.md, "Traces".
pub fn ask_span(
    session_id: &str,
    questions: usize,
    parent: impl FnOnce() -> Option<Context>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "askgate.ask",
        otel.kind = "server",
        askgate.session_id = %crate::domain::bounded(session_id),
        askgate.tenant = Empty,
        askgate.question_count = i64::try_from(questions).unwrap_or(i64::MAX),
        askgate.rpc_id = Empty,
        askgate.resolution = Empty,
        askgate.channel = Empty,
        askgate.wait_ms = Empty,
        otel.status_code = Empty,
    );
    if !span.is_disabled()
        && let Some(parent) = parent()
    {
        let _ = span.set_parent(parent);
    }
    span
}

/// Records on an ask's span that the ask was refused before it was stored.
pub fn refused(span: &Span, error: &crate::domain::Error) {
    if span.is_disabled() {
        return;
    }
    span.record("askgate.resolution", error.reason());
    span.record("otel.status_code", "error");
}

/// The span of a call that resolves an ask (`askgate.answer` or `askgate.cancel`: the
/// `name` it is exported under), a child of the current context (the caller's, when
/// it sent one). Link it to the ask with [`link`] once the pending ask is known.
pub fn resolve_span(name: &'static str, session_id: &str, rpc_id: &str, channel: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "askgate.resolve",
        otel.name = name,
        otel.kind = "server",
        askgate.session_id = %crate::domain::bounded(session_id),
        askgate.rpc_id = %crate::domain::bounded(rpc_id),
        askgate.channel = channel,
        askgate.outcome = Empty,
    )
}

/// The span of one attempt of a delivery (a webhook's POST, a chat message), a child
/// of its ask's span.
pub fn delivery_span(delivery: &crate::backend::hooks::records::DeliveryRecord) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "askgate.deliver",
        otel.kind = "client",
        askgate.session_id = %crate::domain::bounded(&delivery.session_id),
        askgate.rpc_id = %delivery.rpc_id,
        askgate.event = delivery.event_type.as_str(),
        askgate.endpoint_id = %delivery.endpoint_id,
        askgate.attempt = i64::from(delivery.attempts),
        askgate.channel = Empty,
        askgate.outcome = Empty,
    );
    parent(&span, &delivery.traceparent);
    span
}

/// Makes `span` a child of the span a `traceparent` names.
fn parent(span: &Span, traceparent: &str) {
    if let Some(cx) = context_of(span, traceparent) {
        let _ = span.set_parent(cx);
    }
}

/// Records how a resolving call ended on its span: `ok`, or the refusal's reason
/// (`NOT_PENDING`, ...).
pub fn record_outcome<T>(span: &Span, result: &Result<T, crate::domain::Error>) {
    if span.is_disabled() {
        return;
    }
    let outcome = match result {
        Ok(_) => "ok",
        Err(e) => e.reason(),
    };
    span.record("askgate.outcome", outcome);
}

/// What the channels' delivery machinery reports, to this node's metrics and traces.
pub struct ChannelObserver {
    metrics: crate::metrics::Metrics,
}

impl ChannelObserver {
    pub fn new(metrics: crate::metrics::Metrics) -> Self {
        Self { metrics }
    }
}

impl askgate_channels::observe::Observer for ChannelObserver {
    fn deliveries(&self, tenant: &str, outcome: &str, count: u64) {
        self.metrics.webhook_deliveries(tenant, outcome, count);
    }

    fn notice(&self, tenant: &str, kind: &str) {
        self.metrics.notice(tenant, kind);
    }

    fn delivery_span(&self, delivery: &crate::backend::hooks::records::DeliveryRecord) -> Span {
        delivery_span(delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_traceparent_is_taken_and_a_bad_or_huge_one_is_not() {
        let mut metadata = tonic::metadata::MetadataMap::new();
        assert!(from_metadata(&metadata).is_none());
        metadata.insert(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
                .parse()
                .expect("ascii"),
        );
        let cx = from_metadata(&metadata).expect("a valid traceparent");
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        metadata.insert(
            "traceparent",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01"
                .parse()
                .expect("ascii"),
        );
        assert!(
            from_metadata(&metadata).is_none(),
            "an all-zero trace id is invalid"
        );

        let mut meta = serde_json::Map::new();
        meta.insert(
            "traceparent".into(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        );
        assert!(from_json(&meta).is_some());
        meta.insert(
            "traceparent".into(),
            format!("00-{}", "a".repeat(600)).into(),
        );
        assert!(from_json(&meta).is_none());
        meta.insert("traceparent".into(), 7.into());
        assert!(from_json(&meta).is_none());
    }

    #[test]
    fn without_the_layer_a_span_costs_nothing_and_carries_nothing() {
        let span = ask_span("s", 1, || {
            panic!("no parent is extracted without the layer")
        });
        assert!(span.is_disabled());
        assert_eq!(traceparent(&span), "");
        link(
            &span,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
    }
}
