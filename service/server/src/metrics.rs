//! Prometheus metrics, served as text on their own listener (`--metrics`). Tenant
//! labels are off unless asked for: with many tenants they multiply series.

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Bytes, service::service_fn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo},
    server::conn::auto,
};
use prometheus_client::{
    encoding::text::encode,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::backend::Backend;

type Labels = Vec<(&'static str, String)>;

/// The label of `rpc_duration_seconds`: a method's name, built without allocating.
type MethodLabel = [(&'static str, &'static str); 1];

/// The metrics of one node. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    tenant_labels: bool,
    asks: Family<Labels, Counter>,
    human_wait: Family<Labels, Histogram>,
    conflicts: Family<Labels, Counter>,
    auth_failures: Family<Labels, Counter>,
    rpc_duration: Family<MethodLabel, Histogram>,
    pending: Gauge,
    subscribers: Gauge,
    tasks: Gauge,
    mcp_sessions: Gauge,
    connections: Gauge,
    refused_connections: Counter,
    webhook_deliveries: Family<Labels, Counter>,
    notices: Family<Labels, Counter>,
    policy_decisions: Family<Labels, Counter>,
}

/// The metrics of asks and calls, registered first.
struct AskMetrics {
    asks: Family<Labels, Counter>,
    human_wait: Family<Labels, Histogram>,
    conflicts: Family<Labels, Counter>,
    auth_failures: Family<Labels, Counter>,
    rpc_duration: Family<MethodLabel, Histogram>,
}

impl AskMetrics {
    fn register(r: &mut Registry) -> Self {
        Self {
            asks: registered(r, "asks", "Asks by how they ended", Family::default()),
            // 1 s to about 9 hours.
            human_wait: registered(
                r,
                "human_wait_seconds",
                "Time from an ask's registration to a human's answer or cancel",
                Family::new_with_constructor(|| Histogram::new(exponential_buckets(1.0, 2.0, 16))),
            ),
            conflicts: registered(
                r,
                "answer_conflicts",
                "Answers and cancels that lost the race (NOT_PENDING)",
                Family::default(),
            ),
            auth_failures: registered(
                r,
                "auth_failures",
                "Refused credentials and calls, by reason",
                Family::default(),
            ),
            // 0.5 ms to about 4.6 hours (Ask waits for humans).
            rpc_duration: registered(
                r,
                "rpc_duration_seconds",
                "RPC handling time by method (Subscribe and Attach: until the stream opens)",
                Family::new_with_constructor(|| {
                    Histogram::new(exponential_buckets(0.0005, 4.0, 13))
                }),
            ),
        }
    }
}

/// `metric`, registered under `name` with `help`.
fn registered<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    pub fn new(tenant_labels: bool) -> Self {
        let mut r = Registry::with_prefix("askgate");
        let asks = AskMetrics::register(&mut r);
        let inner = Inner {
            asks: asks.asks,
            human_wait: asks.human_wait,
            conflicts: asks.conflicts,
            auth_failures: asks.auth_failures,
            rpc_duration: asks.rpc_duration,
            pending: registered(
                &mut r,
                "pending_asks",
                "Asks waiting for a human",
                Gauge::default(),
            ),
            subscribers: registered(
                &mut r,
                "subscribers",
                "Open subscriptions",
                Gauge::default(),
            ),
            tasks: registered(
                &mut r,
                "runtime_tasks",
                "Tasks alive in the node's async runtime (a steady load keeps it flat)",
                Gauge::default(),
            ),
            mcp_sessions: registered(
                &mut r,
                "mcp_sessions",
                "MCP sessions open on /mcp on this node",
                Gauge::default(),
            ),
            connections: registered(
                &mut r,
                "connections",
                "Client connections open on this node",
                Gauge::default(),
            ),
            refused_connections: registered(
                &mut r,
                "refused_connections",
                "Connections closed at once because the node held --max-connections",
                Counter::default(),
            ),
            webhook_deliveries: registered(
                &mut r,
                "webhook_deliveries",
                "Webhook delivery attempts and events by outcome: delivered, retried, failed \
                 (retries used up, or the endpoint was deleted), dropped (a tenant's queue was \
                 full, or the node's intake)",
                Family::default(),
            ),
            notices: registered(
                &mut r,
                "notices",
                "Reminders and escalations sent, by kind",
                Family::default(),
            ),
            policy_decisions: registered(
                &mut r,
                "policy_decisions",
                "Decisions of tenants' policies on asks with an action, by decision (allow, \
                 deny, ask, no_match, not_judged) and mode (enforce, shadow)",
                Family::default(),
            ),
            registry: r,
            tenant_labels,
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    fn labels(&self, tenant: &str, extra: Option<(&'static str, &str)>) -> Labels {
        let mut labels = Vec::with_capacity(2);
        if self.inner.tenant_labels {
            labels.push(("tenant", tenant.to_owned()));
        }
        if let Some((key, value)) = extra {
            labels.push((key, value.to_owned()));
        }
        labels
    }

    /// An ask ended with `outcome` (a resolution or an error reason) after `waited`.
    pub fn ask_finished(&self, tenant: &str, outcome: &str, waited: Option<Duration>) {
        self.inner
            .asks
            .get_or_create(&self.labels(tenant, Some(("outcome", outcome))))
            .inc();
        if let Some(waited) = waited {
            self.inner
                .human_wait
                .get_or_create(&self.labels(tenant, None))
                .observe(waited.as_secs_f64());
        }
    }

    pub fn answer_conflict(&self, tenant: &str) {
        self.inner
            .conflicts
            .get_or_create(&self.labels(tenant, None))
            .inc();
    }

    pub fn auth_failure(&self, reason: &str) {
        self.inner
            .auth_failures
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// Webhook deliveries that ended an attempt (or were dropped) with `outcome`.
    pub fn webhook_deliveries(&self, tenant: &str, outcome: &str, count: u64) {
        self.inner
            .webhook_deliveries
            .get_or_create(&self.labels(tenant, Some(("outcome", outcome))))
            .inc_by(count);
    }

    /// A reminder or an escalation (`kind`) was sent.
    pub fn notice(&self, tenant: &str, kind: &str) {
        self.inner
            .notices
            .get_or_create(&self.labels(tenant, Some(("kind", kind))))
            .inc();
    }

    /// A tenant's policy decided an ask (`decision`), in `mode`.
    pub fn policy_decided(&self, tenant: &str, decision: &str, mode: &str) {
        let mut labels = self.labels(tenant, Some(("decision", decision)));
        labels.push(("mode", mode.to_owned()));
        self.inner.policy_decisions.get_or_create(&labels).inc();
    }

    /// Times one RPC until the returned guard drops.
    pub fn rpc_timer(&self, method: &'static str) -> RpcTimer {
        RpcTimer {
            metrics: self.clone(),
            method,
            started: Instant::now(),
        }
    }

    /// MCP sessions open on this node (set by `/mcp`).
    pub fn mcp_sessions(&self) -> &Gauge {
        &self.inner.mcp_sessions
    }

    /// Client connections open on this node (set by the listener).
    pub fn connections(&self) -> &Gauge {
        &self.inner.connections
    }

    /// Connections refused at `--max-connections`.
    pub fn refused_connections(&self) -> &Counter {
        &self.inner.refused_connections
    }

    /// The text exposition, with the gauges read from `backend` now.
    pub async fn render(&self, backend: &dyn Backend) -> String {
        let stats = backend.stats().await;
        self.inner.pending.set(stats.pending as i64);
        self.inner.subscribers.set(stats.subscribers as i64);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let alive = runtime.metrics().num_alive_tasks();
            self.inner
                .tasks
                .set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        if let Err(e) = encode(&mut text, &self.inner.registry) {
            warn!("failed to encode metrics: {e}");
        }
        text
    }
}

/// Records an RPC's duration when dropped.
pub struct RpcTimer {
    metrics: Metrics,
    method: &'static str,
    started: Instant,
}

impl Drop for RpcTimer {
    fn drop(&mut self) {
        self.metrics
            .inner
            .rpc_duration
            .get_or_create(&[("method", self.method)])
            .observe(self.started.elapsed().as_secs_f64());
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
/// The bearer token scrapers must send, kept as its SHA-256 and compared in constant
/// time.
#[derive(Clone)]
pub struct ScrapeToken([u8; 32]);

impl ScrapeToken {
    pub fn new(token: &[u8]) -> Self {
        Self(Sha256::digest(token).into())
    }

    /// Whether the request carries `authorization: Bearer <token>`.
    fn admits(&self, request: &Request<hyper::body::Incoming>) -> bool {
        let presented = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        presented.is_some_and(|token| {
            let hash: [u8; 32] = Sha256::digest(token).into();
            bool::from(hash.ct_eq(&self.0))
        })
    }
}

/// Serves `/metrics` on `listener`; with `token`, only to requests that carry it.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    backend: Arc<dyn Backend>,
    token: Option<ScrapeToken>,
) {
    loop {
        let (stream, peer): (_, SocketAddr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!("metrics listener failed to accept: {e}");
                continue;
            }
        };
        let (metrics, backend, token) = (metrics.clone(), backend.clone(), token.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let (metrics, backend) = (metrics.clone(), backend.clone());
                let admitted = token.as_ref().is_none_or(|t| t.admits(&request));
                async move {
                    if !admitted {
                        metrics.auth_failure("metrics");
                        return Response::builder()
                            .status(StatusCode::UNAUTHORIZED)
                            .header(hyper::header::WWW_AUTHENTICATE, "Bearer")
                            .body(Full::new(Bytes::from_static(
                                b"send the metrics token as `authorization: Bearer <token>`\n",
                            )));
                    }
                    match request.uri().path() {
                        "/metrics" => Response::builder()
                            .header(
                                "content-type",
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            )
                            .body(Full::new(Bytes::from(metrics.render(&*backend).await))),
                        _ => Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::from_static(b"try /metrics\n"))),
                    }
                }
            });
            if let Err(e) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, "metrics connection ended: {e}");
            }
        });
    }
}
