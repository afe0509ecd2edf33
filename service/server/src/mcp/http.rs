//! MCP over streamable HTTP at `/mcp` on `askgate serve`'s own port: the same tools
//! as `askgate mcp`, asked in this server's process. Each request is admitted here,
//! before rmcp sees it: the bearer credential must hold the `agent` role (its tenant
//! is the tenant, as everywhere), and the `askgate-session` header names the session,
//! which the credential's session patterns must allow. A refusal is an HTTP error
//! with a JSON body saying what to send.
//!
//! Every MCP session belongs to who opened it: the tenant, the subject and the askgate
//! session of its `initialize`. A request naming it (`mcp-session-id`) with any other
//! credential or askgate session gets 404, as an unknown session does, so a leaked id
//! lets nobody else read its answers, resume its stream or delete it. Opening one takes
//! a unit of the tenant's MCP budget (`--max-mcp-sessions-per-tenant`, over every node)
//! and a place on this node (`--max-mcp-sessions`), refused with 429 past either. A
//! session is closed (and its units given back) when deleted, or after
//! [`MCP_SESSION_IDLE`] without a request or a byte sent on one of its streams.

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures_util::future::Either;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use parking_lot::Mutex;
use rmcp::transport::streamable_http_server::{
    SessionManager as _, StreamableHttpServerConfig, StreamableHttpService,
    session::local::LocalSessionManager,
};
use tower::{Layer, Service};

use super::{Asker, AskgateMcp, McpConfig, WaitingAsks};
use crate::{
    auth::{Action, Gate, Principal},
    backend::{Backend, Budget, BudgetHold},
    domain::validate,
};

/// Where MCP is served.
pub const MCP_PATH: &str = "/mcp";
/// The request header naming the askgate session a call asks in.
pub const SESSION_HEADER: &str = "askgate-session";

/// Who a request to `/mcp` asks as, and where: set by [`McpLayer`] in the request's
/// extensions, read by the handler through rmcp's request parts.
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub principal: Principal,
    pub session_id: String,
}

/// The header that names an MCP session (the streamable HTTP transport's).
const MCP_SESSION_HEADER: &str = "mcp-session-id";

/// How long an MCP session lives without a request or a byte sent on one of its
/// streams (rmcp's own idle limit; its SSE streams send a keep-alive every 15 s).
pub const MCP_SESSION_IDLE: Duration = Duration::from_secs(300);

/// How often idle sessions are looked for.
const IDLE_SWEEP: Duration = Duration::from_secs(15);

type McpService = StreamableHttpService<AskgateMcp, LocalSessionManager>;

/// How many MCP sessions may be open: per tenant over every node, and on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpBudget {
    pub per_tenant: usize,
    pub per_node: usize,
}

/// Who opened an MCP session, and what it holds.
struct Owner {
    tenant: Arc<str>,
    subject: String,
    session_id: String,
    /// When it was last used, in ms since [`Sessions::epoch`].
    last_active: Arc<AtomicU64>,
    _hold: BudgetHold,
}

/// The MCP sessions open on this node, by their id.
struct Sessions {
    owners: Mutex<HashMap<String, Owner>>,
    epoch: Instant,
    manager: Arc<LocalSessionManager>,
    backend: Arc<dyn Backend>,
    budget: McpBudget,
    /// `askgate_mcp_sessions`.
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Sessions {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The session's activity clock when `caller` opened it; `None` for anyone else
    /// and for a session that does not exist (alike).
    fn owned_by(&self, id: &str, caller: &McpCaller) -> Option<Arc<AtomicU64>> {
        let owners = self.owners.lock();
        let owner = owners.get(id)?;
        let mine = *owner.tenant == *caller.principal.tenant
            && owner.subject == caller.principal.sub
            && owner.session_id == caller.session_id;
        mine.then(|| {
            owner.last_active.store(self.now_ms(), Ordering::Relaxed);
            owner.last_active.clone()
        })
    }

    /// A unit of the tenant's budget and a place on this node, for a new session.
    async fn admit(&self, caller: &McpCaller) -> Result<BudgetHold, Refusal> {
        if self.owners.lock().len() >= self.budget.per_node {
            return Err((
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "this node holds its most MCP sessions ({}, --max-mcp-sessions): \
                     close unused ones with DELETE, or retry later",
                    self.budget.per_node
                ),
            ));
        }
        self.backend
            .hold(
                &caller.principal.tenant,
                Budget::McpSessions,
                self.budget.per_tenant,
            )
            .await
            .map_err(|e| match e {
                crate::domain::Error::BackendUnavailable(_) => {
                    (StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                }
                e => (StatusCode::TOO_MANY_REQUESTS, e.to_string()),
            })
    }

    /// Records the session rmcp opened for `caller`.
    fn opened(&self, id: String, caller: &McpCaller, hold: BudgetHold) -> Arc<AtomicU64> {
        let last_active = Arc::new(AtomicU64::new(self.now_ms()));
        let mut owners = self.owners.lock();
        owners.insert(
            id,
            Owner {
                tenant: caller.principal.tenant.clone(),
                subject: caller.principal.sub.clone(),
                session_id: caller.session_id.clone(),
                last_active: last_active.clone(),
                _hold: hold,
            },
        );
        self.gauge.set(owners.len() as i64);
        last_active
    }

    fn forget(&self, id: &str) {
        let mut owners = self.owners.lock();
        owners.remove(id);
        self.gauge.set(owners.len() as i64);
    }

    /// Closes the sessions idle for [`MCP_SESSION_IDLE`], giving back what they held.
    async fn close_idle(&self) {
        let idle_ms = MCP_SESSION_IDLE.as_millis() as u64;
        let now = self.now_ms();
        let idle: Vec<String> = self
            .owners
            .lock()
            .iter()
            .filter(|(_, o)| now.saturating_sub(o.last_active.load(Ordering::Relaxed)) > idle_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            self.forget(&id);
            let _ = self.manager.close_session(&id.as_str().into()).await;
        }
    }
}

/// Serves `/mcp`; every other request goes on to the gRPC services.
#[derive(Clone)]
pub struct McpLayer {
    service: McpService,
    gate: Gate,
    sessions: Arc<Sessions>,
}

impl McpLayer {
    /// The node's Host/Origin policy ([`crate::origin`]) has admitted every request
    /// before it gets here, so rmcp's own Host check (loopback names only, blind to
    /// `--public-url`) is off.
    ///
    /// Spawns the task that closes idle sessions; it ends when the last clone of the
    /// layer is dropped.
    pub fn new(
        asker: Asker,
        settings: McpConfig,
        gate: Gate,
        max_body_bytes: usize,
        backend: Arc<dyn Backend>,
        budget: McpBudget,
        metrics: &crate::metrics::Metrics,
    ) -> Self {
        let settings = Arc::new(settings);
        let waiting = WaitingAsks::default();
        let config = StreamableHttpServerConfig::default()
            .with_max_request_body_bytes(max_body_bytes)
            .disable_allowed_hosts();
        let manager = Arc::new(LocalSessionManager::default());
        let sessions = Arc::new(Sessions {
            owners: Mutex::default(),
            epoch: Instant::now(),
            manager: manager.clone(),
            backend,
            budget,
            gauge: metrics.mcp_sessions().clone(),
        });
        let sweeping = Arc::downgrade(&sessions);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(IDLE_SWEEP);
            loop {
                ticks.tick().await;
                let Some(sessions) = sweeping.upgrade() else {
                    return;
                };
                sessions.close_idle().await;
            }
        });
        let service = StreamableHttpService::new(
            move || {
                Ok(AskgateMcp::new(
                    asker.clone(),
                    settings.clone(),
                    waiting.clone(),
                ))
            },
            manager,
            config,
        );
        Self {
            service,
            gate,
            sessions,
        }
    }

    /// The caller of a request to `/mcp`, or why it is refused.
    fn admit(&self, headers: &HeaderMap) -> Result<McpCaller, Refusal> {
        let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
        let principal = self
            .gate
            .principal_of(&metadata)
            .map_err(|status| (StatusCode::UNAUTHORIZED, status.message().to_owned()))?;
        let session_id = headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("send the askgate session to ask in as the `{SESSION_HEADER}` header"),
                )
            })?;
        validate::session_id(SESSION_HEADER, session_id)
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
        principal
            .authorize(Action::Ask, session_id)
            .map_err(|e| (StatusCode::FORBIDDEN, e.to_string()))?;
        Ok(McpCaller {
            principal,
            session_id: session_id.to_owned(),
        })
    }
}

/// Why a request to `/mcp` is refused: its HTTP status and what to do about it.
type Refusal = (StatusCode, String);

/// An HTTP refusal with a JSON body: `{"error": "..."}`; a 401 also says `Bearer`.
fn refusal((status, message): Refusal) -> Response<tonic::body::Body> {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(tonic::body::Body::new(http_body_util::Full::new(
        bytes::Bytes::from(body),
    )));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

impl<S> Layer<S> for McpLayer {
    type Service = McpRoute<S>;

    fn layer(&self, inner: S) -> McpRoute<S> {
        McpRoute {
            mcp: Arc::new(self.clone()),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct McpRoute<S> {
    /// Shared: the service stack is cloned for every request.
    mcp: Arc<McpLayer>,
    inner: S,
}

type McpFuture<E> = Pin<Box<dyn Future<Output = Result<Response<tonic::body::Body>, E>> + Send>>;

impl<S, B> Service<Request<B>> for McpRoute<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Error: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Either<McpFuture<S::Error>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if request.uri().path() != MCP_PATH {
            return Either::Right(self.inner.call(request));
        }
        let caller = match self.mcp.admit(request.headers()) {
            Ok(caller) => caller,
            Err(refused) => {
                return Either::Left(Box::pin(std::future::ready(Ok(refusal(refused)))));
            }
        };
        let named = request
            .headers()
            .get(MCP_SESSION_HEADER)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let sessions = self.mcp.sessions.clone();
        // One session's requests are served in its creator's name alone.
        let active = match &named {
            Some(id) => match sessions.owned_by(id, &caller) {
                Some(active) => Some(active),
                None => {
                    let unknown = (StatusCode::NOT_FOUND, "no such MCP session".to_owned());
                    return Either::Left(Box::pin(std::future::ready(Ok(refusal(unknown)))));
                }
            },
            None => None,
        };
        let deleting = request.method() == Method::DELETE;
        let mut service = self.mcp.service.clone();
        request.extensions_mut().insert(caller.clone());
        Either::Left(Box::pin(async move {
            let (active, hold) = match active {
                Some(active) => (active, None),
                // No session named: an `initialize` opens one, within the budgets.
                None => match sessions.admit(&caller).await {
                    Ok(hold) => (Arc::new(AtomicU64::new(0)), Some(hold)),
                    Err(refused) => return Ok(refusal(refused)),
                },
            };
            let mut response = service
                .call(request)
                .await
                .unwrap_or_else(|never: Infallible| match never {});
            // rmcp accepts a session's DELETE with 202; the MCP SDKs take 200 (or 204)
            // as done and warn "Session termination failed" on anything else.
            if deleting && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::OK;
            }
            let active = match (named, hold) {
                (None, Some(hold)) => match response.headers().get(MCP_SESSION_HEADER) {
                    Some(id) => sessions.opened(
                        String::from_utf8_lossy(id.as_bytes()).into(),
                        &caller,
                        hold,
                    ),
                    // Refused, or answered without a session: the unit goes back.
                    None => active,
                },
                (Some(id), _) => {
                    let gone = response.status() == StatusCode::NOT_FOUND;
                    if gone || (deleting && response.status().is_success()) {
                        sessions.forget(&id);
                    }
                    active
                }
                (None, None) => active,
            };
            let epoch = sessions.epoch;
            Ok(response.map(|body| {
                tonic::body::Body::new(Touching {
                    body,
                    active,
                    epoch,
                })
            }))
        }))
    }
}

/// A response body that marks its session active whenever it sends something (an SSE
/// stream's events and keep-alives), so a long wait is not taken for idleness.
struct Touching<B> {
    body: B,
    active: Arc<AtomicU64>,
    epoch: Instant,
}

impl<B: http_body::Body + Unpin> http_body::Body for Touching<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let frame = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(_))) = &frame {
            this.active
                .store(this.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
