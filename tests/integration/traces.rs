//! Traces over OTLP: real `askgate serve` processes export to a real OTLP receiver (the
//! collector's gRPC and HTTP services, from the official protos, served here). The
//! agent's span, the ask's wait and the answer form one trace, on one node and across
//! Redis nodes; no question or answer text leaves in a span.

use std::{net::SocketAddr, sync::Arc};

use askgate_client::{Ask, answer, question};
use askgate_proto::v1::{
    AnswerRequest, CreateEndpointRequest, DeliveryStatus, ListDeliveriesRequest,
    user_questions_client::UserQuestionsClient,
};
use askgate_testing::RedisServer;
use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::{AnyValue, any_value::Value},
    trace::v1::{Span, span::SpanKind},
};
use parking_lot::Mutex;
use prost::Message as _;
use tokio::net::TcpListener;

use crate::support::{
    ServeProcess, TempDir, eventually, next_requested, subscribed, web_client_at, within,
};

/// The agent's span, as the agent's tracer made it: the ask's parent.
const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";
/// The answering UI's span.
const UI_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const UI_SPAN: &str = "b7ad6b7169203331";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// A span as received, with its node's `service.instance.id`.
#[derive(Debug, Clone)]
struct Received {
    span: Span,
    instance: String,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<String> {
        let value = self.span.attributes.iter().find(|kv| kv.key == key)?;
        Some(shown(value.value.as_ref()?))
    }

    /// An attribute that must be an integer (OTLP's `intValue`, as backends chart it).
    fn int_attribute(&self, key: &str) -> Option<i64> {
        let value = self.span.attributes.iter().find(|kv| kv.key == key)?;
        match value.value.as_ref()?.value {
            Some(Value::IntValue(i)) => Some(i),
            _ => None,
        }
    }

    fn trace_id(&self) -> String {
        hex::encode(&self.span.trace_id)
    }

    fn span_id(&self) -> String {
        hex::encode(&self.span.span_id)
    }

    fn parent_span_id(&self) -> String {
        hex::encode(&self.span.parent_span_id)
    }

    fn links(&self) -> Vec<(String, String)> {
        self.span
            .links
            .iter()
            .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
            .collect()
    }
}

fn shown(value: &AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// What an OTLP receiver got.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Received>>>);

impl Spans {
    fn take(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock();
        for resource in request.resource_spans {
            let instance = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.instance.id")
                .and_then(|kv| kv.value.as_ref())
                .map(shown)
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(Received {
                        span,
                        instance: instance.clone(),
                    });
                }
            }
        }
    }

    fn named(&self, name: &str) -> Vec<Received> {
        self.0
            .lock()
            .iter()
            .filter(|r| r.span.name == name)
            .cloned()
            .collect()
    }

    fn one(&self, name: &str) -> Received {
        let named = self.named(name);
        assert_eq!(named.len(), 1, "one {name} span: {:#?}", self.0.lock());
        named.into_iter().next().expect("one")
    }

    /// No span holds `text` in a name or attribute.
    fn assert_nowhere(&self, text: &str) {
        for received in self.0.lock().iter() {
            let all = format!("{:?}", received.span);
            assert!(!all.contains(text), "{text:?} leaked into {all}");
        }
    }
}

#[tonic::async_trait]
impl TraceService for Spans {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.take(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// OTLP/gRPC on 127.0.0.1: its address and what it receives.
async fn grpc_receiver() -> (SocketAddr, Spans) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let spans = Spans::default();
    let service = TraceServiceServer::new(spans.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (addr, spans)
}

/// OTLP/HTTP (protobuf bodies POSTed to /v1/traces) on 127.0.0.1, refusing as a
/// collector does any other method or content type (405, 415) and a body that is no
/// export request (400); it answers 200 to a request at any other path (a webhook).
async fn http_receiver() -> (SocketAddr, Spans) {
    use http_body_util::BodyExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let spans = Spans::default();
    let sink = spans.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let sink = sink.clone();
            let service =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let sink = sink.clone();
                    async move {
                        // Anything else is a webhook the test's endpoint receives.
                        if request.uri().path() != "/v1/traces" {
                            return http::Response::builder()
                                .status(200)
                                .body(http_body_util::Full::new(bytes::Bytes::new()))
                                .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> {
                                    Box::new(e)
                                });
                        }
                        let posted = request.method() == http::Method::POST;
                        let typed = request
                            .headers()
                            .get("content-type")
                            .is_some_and(|t| t == "application/x-protobuf");
                        let body = request.into_body().collect().await?.to_bytes();
                        let status = match (posted, typed, ExportTraceServiceRequest::decode(body))
                        {
                            (false, _, _) => 405,
                            (_, false, _) => 415,
                            (_, _, Err(_)) => 400,
                            (true, true, Ok(export)) => {
                                sink.take(export);
                                200
                            }
                        };
                        let response = ExportTraceServiceResponse::default().encode_to_vec();
                        http::Response::builder()
                            .status(status)
                            .header("content-type", "application/x-protobuf")
                            .body(http_body_util::Full::new(bytes::Bytes::from(response)))
                            .map_err(|e| -> Box<dyn std::error::Error + Send + Sync> {
                                Box::new(e)
                            })
                    }
                });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    (addr, spans)
}

/// Stops a node the way an operator does (SIGTERM): it sends what it buffered first.
async fn stop(mut node: ServeProcess) {
    node.signal("TERM");
    assert_eq!(node.exit_code().await, Some(0), "a clean exit");
}

/// How the UI answers.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    Grpc,
    /// gRPC-Web, as the console does: the trace context in its HTTP headers.
    GrpcWeb,
}

/// An ask of the agent's trace on `asker`, answered on `answerer` by a UI of its own
/// trace: the rpc_id.
async fn ask_and_answer(asker: &ServeProcess, answerer: &ServeProcess, via: Via) -> String {
    let mut ui = answerer.client().await;
    let mut events = subscribed(&mut ui, "s").await;
    let mut agent = asker.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(
                Ask::new("s")
                    .question(question("q", "Deploy the secret plan?").choice("Yes, ship it"))
                    .trace_context(&traceparent(AGENT_TRACE, AGENT_SPAN), "vendor=1"),
            )
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    let mut request = tonic::Request::new(AnswerRequest {
        session_id: "s".into(),
        rpc_id: rpc_id.clone(),
        answers: vec![answer::select("q", ["Yes, ship it"])],
        grant: None,
    });
    request.metadata_mut().insert(
        "traceparent",
        traceparent(UI_TRACE, UI_SPAN).parse().expect("ascii"),
    );
    match via {
        Via::Grpc => {
            let mut raw = UserQuestionsClient::connect(answerer.url.clone())
                .await
                .expect("connect");
            raw.answer(request).await.expect("answered");
        }
        Via::GrpcWeb => {
            web_client_at(&answerer.url)
                .answer(request)
                .await
                .expect("answered");
        }
    }
    within("the ask", call)
        .await
        .expect("join")
        .expect("answered");
    rpc_id
}

/// The ask's span is the agent's child, holds the ask's facts and none of its text;
/// the answer's span is the UI's child and links to the ask's.
fn assert_one_trace(spans: &Spans, rpc_id: &str, channel: &str) -> (String, String) {
    let ask = spans.one("askgate.ask");
    assert_eq!(
        ask.trace_id(),
        AGENT_TRACE,
        "the ask joins the agent's trace"
    );
    assert_eq!(
        ask.parent_span_id(),
        AGENT_SPAN,
        "as the agent's span's child"
    );
    assert_eq!(ask.span.kind, SpanKind::Server as i32);
    assert_eq!(ask.attribute("askgate.rpc_id").as_deref(), Some(rpc_id));
    assert_eq!(ask.attribute("askgate.session_id").as_deref(), Some("s"));
    assert_eq!(
        ask.attribute("askgate.resolution").as_deref(),
        Some("ANSWERED")
    );
    assert_eq!(ask.attribute("askgate.channel").as_deref(), Some(channel));
    assert_eq!(ask.int_attribute("askgate.question_count"), Some(1));
    assert!(ask.int_attribute("askgate.wait_ms").is_some(), "{ask:?}");
    assert_eq!(
        ask.span.trace_state, "vendor=1",
        "the caller's tracestate goes on"
    );

    let answer = spans.one("askgate.answer");
    assert_eq!(answer.trace_id(), UI_TRACE, "the answer is the UI's");
    assert_eq!(answer.parent_span_id(), UI_SPAN);
    assert_eq!(
        answer.links(),
        [(AGENT_TRACE.to_owned(), ask.span_id())],
        "the answer links to the human's wait"
    );
    assert_eq!(answer.attribute("askgate.outcome").as_deref(), Some("ok"));
    assert_eq!(
        answer.attribute("askgate.channel").as_deref(),
        Some(channel)
    );
    spans.assert_nowhere("secret plan");
    spans.assert_nowhere("ship it");
    (ask.instance, answer.instance)
}

/// One node exporting over `protocol` to `receiver`: an ask answered `via`, in one
/// trace whose answer came from `channel`.
async fn one_node_trace(receiver: (SocketAddr, Spans), protocol: &str, via: Via, channel: &str) {
    let (receiver, spans) = receiver;
    let endpoint = format!("http://{receiver}");
    let node =
        ServeProcess::start_with(&["--otlp-endpoint", &endpoint, "--otlp-protocol", protocol])
            .await;
    let rpc_id = ask_and_answer(&node, &node, via).await;
    stop(node).await;
    assert_one_trace(&spans, &rpc_id, channel);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_span_the_asks_wait_and_the_answer_form_one_trace() {
    one_node_trace(grpc_receiver().await, "grpc", Via::Grpc, "grpc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consoles_answer_over_grpc_web_joins_the_trace() {
    one_node_trace(grpc_receiver().await, "grpc", Via::GrpcWeb, "console").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_go_over_otlp_http_too() {
    one_node_trace(http_receiver().await, "http", Via::Grpc, "grpc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trace_crosses_redis_nodes() {
    let (receiver, spans) = grpc_receiver().await;
    let endpoint = format!("http://{receiver}");
    let redis = RedisServer::start().await;
    let args = ["--otlp-endpoint", &endpoint, "--otlp-backend-calls"];
    let mut nodes = ServeProcess::redis_nodes(&redis.url, false, 3, &args).await;
    let rpc_id = ask_and_answer(&nodes[0], &nodes[2], Via::Grpc).await;
    while let Some(node) = nodes.pop() {
        stop(node).await;
    }
    let (asked_on, answered_on) = assert_one_trace(&spans, &rpc_id, "grpc");
    assert_ne!(
        asked_on, answered_on,
        "asked on one node, answered on another"
    );
    assert_backend_calls(
        &spans,
        "askgate.redis",
        "redis",
        &["askgate.ask", "askgate.answer"],
    );
}

/// With --otlp-backend-calls, the calls to the store of the spans `parents` names are
/// their children.
fn assert_backend_calls(spans: &Spans, name: &str, system: &str, parents: &[&str]) {
    let calls = spans.named(name);
    for parent in parents.iter().map(|name| spans.one(name)) {
        assert!(
            calls
                .iter()
                .any(|call| call.parent_span_id() == parent.span_id()
                    && call.attribute("db.system.name").as_deref() == Some(system)),
            "a {name} span under {}: {calls:#?}",
            parent.span.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_commits_are_spans_when_backend_calls_are_traced() {
    let (receiver, spans) = grpc_receiver().await;
    let endpoint = format!("http://{receiver}");
    let dir = TempDir::new();
    let data = dir.0.join("data");
    let node = ServeProcess::start_with(&[
        "--backend",
        "sqlite",
        "--data-dir",
        data.to_str().expect("utf-8"),
        "--otlp-endpoint",
        &endpoint,
        "--otlp-backend-calls",
    ])
    .await;
    let rpc_id = ask_and_answer(&node, &node, Via::Grpc).await;
    stop(node).await;
    assert_one_trace(&spans, &rpc_id, "grpc");
    // A registration is announced once durable, without waiting: only the answer
    // waits for its commit.
    assert_backend_calls(&spans, "askgate.sqlite", "sqlite", &["askgate.answer"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_ask_and_an_unsampled_caller() {
    let (receiver, spans) = grpc_receiver().await;
    let endpoint = format!("http://{receiver}");
    let node = ServeProcess::start_with(&["--otlp-endpoint", &endpoint]).await;
    let mut agent = node.client().await;
    // Nobody follows the session and the ask may not wait: refused, in the agent's
    // trace.
    let refused = agent
        .ask(
            Ask::new("nobody")
                .question(question("q", "Anyone?").choice("yes"))
                .trace_context(&traceparent(AGENT_TRACE, AGENT_SPAN), ""),
        )
        .await
        .expect_err("refused");
    // A caller whose trace is not sampled: nothing of it is exported.
    let unsampled = format!("00-{}-{AGENT_SPAN}-00", "1".repeat(32));
    let _ = agent
        .ask(
            Ask::new("nobody")
                .question(question("q", "Anyone?").choice("yes"))
                .trace_context(&unsampled, ""),
        )
        .await
        .expect_err("refused");
    stop(node).await;
    let ask = spans.one("askgate.ask");
    assert_eq!(ask.trace_id(), AGENT_TRACE);
    assert_eq!(
        ask.attribute("askgate.resolution").as_deref(),
        Some(refused.reason().as_str_name())
    );
    assert_eq!(
        ask.span.status.as_ref().map(|s| s.code),
        Some(2),
        "an error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_delivery_is_a_child_of_the_asks_wait() {
    let (receiver, spans) = grpc_receiver().await;
    let (hooks, _) = http_receiver().await;
    let endpoint = format!("http://{receiver}");
    let node =
        ServeProcess::start_with(&["--otlp-endpoint", &endpoint, "--webhook-allow-private"]).await;
    let mut admin = node.client().await;
    let hook = admin
        .create_endpoint(CreateEndpointRequest {
            url: format!("http://{hooks}/hook"),
            events: vec!["ask.requested".into()],
            ..Default::default()
        })
        .await
        .expect("an endpoint");
    let rpc_id = ask_and_answer(&node, &node, Via::Grpc).await;
    eventually("the delivery", || {
        let mut admin = admin.clone();
        let id = hook.id.clone();
        async move {
            let listed = admin
                .list_deliveries(ListDeliveriesRequest {
                    endpoint_id: id,
                    ..Default::default()
                })
                .await
                .ok()?;
            (listed.first()?.status() == DeliveryStatus::Delivered).then_some(())
        }
    })
    .await;
    stop(node).await;
    let ask = spans.one("askgate.ask");
    let delivery = spans.one("askgate.deliver");
    assert_eq!(delivery.trace_id(), AGENT_TRACE);
    assert_eq!(delivery.parent_span_id(), ask.span_id(), "the ask's child");
    assert_eq!(delivery.span.kind, SpanKind::Client as i32);
    assert_eq!(
        delivery.attribute("askgate.rpc_id").as_deref(),
        Some(&*rpc_id)
    );
    assert_eq!(
        delivery.attribute("askgate.channel").as_deref(),
        Some("webhook")
    );
    assert_eq!(
        delivery.attribute("askgate.event").as_deref(),
        Some("ask.requested")
    );
    assert_eq!(
        delivery.attribute("askgate.outcome").as_deref(),
        Some("delivered")
    );
    assert_eq!(delivery.int_attribute("askgate.attempt"), Some(1));
    spans.assert_nowhere("secret plan");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_goes_away_leaves_its_span_dropped() {
    let (receiver, spans) = grpc_receiver().await;
    let endpoint = format!("http://{receiver}");
    let node = ServeProcess::start_with(&["--otlp-endpoint", &endpoint]).await;
    let mut ui = node.client().await;
    let mut events = subscribed(&mut ui, "d").await;
    let mut agent = node.client().await;
    let call = tokio::spawn(async move {
        agent
            .ask(
                Ask::new("d")
                    .question(question("q", "Still there?").choice("yes"))
                    .reattach_grace(std::time::Duration::ZERO)
                    .trace_context(&traceparent(AGENT_TRACE, AGENT_SPAN), ""),
            )
            .await
    });
    let rpc_id = next_requested(&mut events).await;
    call.abort();
    // The server saw the call go: with no reattach grace, the ask is aborted at once.
    match crate::support::next_event(&mut events).await {
        askgate_client::Event::Resolved { resolved, .. } => assert_eq!(resolved.rpc_id, rpc_id),
        other => panic!("expected the ask resolved, got {other:?}"),
    }
    stop(node).await;
    let ask = spans.one("askgate.ask");
    assert_eq!(
        ask.attribute("askgate.resolution").as_deref(),
        Some("DROPPED")
    );
    assert_eq!(ask.attribute("askgate.rpc_id").as_deref(), Some(&*rpc_id));
}
