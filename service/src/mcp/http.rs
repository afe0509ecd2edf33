//! MCP over streamable HTTP at `/mcp` on `askgate serve`'s own port: the same tools
//! as `askgate mcp`, asked in this server's process. Each request is admitted here,
//! before rmcp sees it: the bearer credential must hold the `agent` role (its tenant
//! is the tenant, as everywhere), and the `askgate-session` header names the session,
//! which the credential's session patterns must allow. A refusal is an HTTP error
//! with a JSON body saying what to send.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::Either;
use http::{HeaderMap, Request, Response, StatusCode, header};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tower::{Layer, Service};

use super::{Asker, AskgateMcp, McpSettings, WaitingAsks};
use crate::{
    api::Gate,
    auth::{Action, Principal},
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

type McpService = StreamableHttpService<AskgateMcp, LocalSessionManager>;

/// Serves `/mcp`; every other request goes on to the gRPC services.
#[derive(Clone)]
pub struct McpLayer {
    service: McpService,
    gate: Gate,
}

impl McpLayer {
    /// The node's Host/Origin policy ([`crate::origin`]) has admitted every request
    /// before it gets here, so rmcp's own Host check (loopback names only, blind to
    /// `--public-url`) is off.
    pub fn new(asker: Asker, settings: McpSettings, gate: Gate, max_body_bytes: usize) -> Self {
        let settings = Arc::new(settings);
        let waiting = WaitingAsks::default();
        let config = StreamableHttpServerConfig::default()
            .with_max_request_body_bytes(max_body_bytes)
            .disable_allowed_hosts();
        let service = StreamableHttpService::new(
            move || {
                Ok(AskgateMcp::new(
                    asker.clone(),
                    settings.clone(),
                    waiting.clone(),
                ))
            },
            Arc::new(LocalSessionManager::default()),
            config,
        );
        Self { service, gate }
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
            mcp: self.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct McpRoute<S> {
    mcp: McpLayer,
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
        request.extensions_mut().insert(caller);
        let served = self.mcp.service.call(request);
        Either::Left(Box::pin(async move {
            let response = served
                .await
                .unwrap_or_else(|never: Infallible| match never {});
            Ok(response.map(tonic::body::Body::new))
        }))
    }
}
