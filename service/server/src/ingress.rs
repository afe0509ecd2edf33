//! The HTTP entries that outside services call on askgate's port (Slack's
//! interactivity, Telegram's updates): each an [`Ingress`] served by an
//! [`IngressLayer`] in front of the gRPC services. A request is the ingress's when its
//! path is; its headers are checked before its body is read, and what an
//! unauthenticated caller can make the node hold is bounded: a body larger than the
//! ingress takes is refused before it is read, at most [`MAX_UNVERIFIED_BODIES`] are
//! read at once (a request waits at most [`UNVERIFIED_QUEUE_TIMEOUT`] for a place,
//! then gets 503), and each must arrive within [`BODY_READ_TIMEOUT`] (else 408).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures_util::future::Either;
use http::{Request, Response, StatusCode, header, request::Parts};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tower::{Layer, Service};

/// Bodies read at once, per ingress, before they can be verified.
pub const MAX_UNVERIFIED_BODIES: usize = 64;
/// How long a request waits for one of those places before it is refused (503).
pub const UNVERIFIED_QUEUE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the whole body may take to arrive (408 past it).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What an ingress answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl Reply {
    /// A JSON reply (an empty body without `body`).
    pub fn json(status: StatusCode, body: Option<Value>) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string())),
        }
    }

    /// An HTML page, kept out of caches, frames and referrers (its URL may be a
    /// secret link), running no script.
    pub fn html(status: StatusCode, page: String) -> Self {
        Self {
            status,
            content_type: "text/html; charset=utf-8",
            body: Bytes::from(page),
        }
    }

    /// `{"error": text}` with `status`.
    pub fn error(status: StatusCode, text: &str) -> Self {
        Self::json(status, Some(json!({ "error": text })))
    }

    fn into_response(self) -> Response<tonic::body::Body> {
        let mut response =
            Response::new(tonic::body::Body::new(http_body_util::Full::new(self.body)));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static(self.content_type),
        );
        if self.content_type.starts_with("text/html") {
            for (name, value) in [
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
                ),
                (header::X_FRAME_OPTIONS, "DENY"),
                // Not no-referrer: Chromium then sends `Origin: null` with the page's own
                // form, which the origin policy refuses; same-origin keeps the URL (a
                // secret link) from every other site all the same.
                (header::REFERRER_POLICY, "same-origin"),
                (header::CACHE_CONTROL, "no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ] {
                headers.insert(name, http::HeaderValue::from_static(value));
            }
        }
        response
    }
}

impl From<(StatusCode, Option<Value>)> for Reply {
    fn from((status, body): (StatusCode, Option<Value>)) -> Self {
        Self::json(status, body)
    }
}

/// An HTTP entry of askgate's port that outside services call.
pub trait Ingress: Clone + Send + Sync + 'static {
    /// Whether a request to `path` is this ingress's.
    fn claims(&self, path: &str) -> bool;

    /// Bytes of a body read at most.
    fn max_body(&self) -> usize;

    /// Checks a request before its body is read (its method, its headers): a refusal
    /// is answered at once.
    fn precheck(&self, parts: &Parts) -> Result<(), Reply>;

    /// Answers a request whose body was read.
    fn handle(&self, parts: Parts, body: Bytes) -> impl Future<Output = Reply> + Send;
}

/// Serves an [`Ingress`]; every other request goes on.
#[derive(Clone)]
pub struct IngressLayer<I> {
    /// Shared: the service stack is cloned for every request.
    ingress: Arc<I>,
    /// Places for bodies read before they are verified.
    unverified: Arc<Semaphore>,
}

impl<I: Ingress> IngressLayer<I> {
    pub fn new(ingress: I) -> Self {
        Self {
            ingress: Arc::new(ingress),
            unverified: Arc::new(Semaphore::new(MAX_UNVERIFIED_BODIES)),
        }
    }
}

impl<S, I: Ingress> Layer<S> for IngressLayer<I> {
    type Service = IngressRoute<S, I>;

    fn layer(&self, inner: S) -> IngressRoute<S, I> {
        IngressRoute {
            ingress: self.ingress.clone(),
            unverified: self.unverified.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct IngressRoute<S, I> {
    ingress: Arc<I>,
    unverified: Arc<Semaphore>,
    inner: S,
}

type Served<E> = Pin<Box<dyn Future<Output = Result<Response<tonic::body::Body>, E>> + Send>>;

impl<S, I, B> Service<Request<B>> for IngressRoute<S, I>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Error: Send + 'static,
    I: Ingress,
    B: http_body::Body + Send + 'static,
    B::Data: Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Either<Served<S::Error>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if !self.ingress.claims(request.uri().path()) {
            return Either::Right(self.inner.call(request));
        }
        let ingress = self.ingress.clone();
        let unverified = self.unverified.clone();
        Either::Left(Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = match read_unverified(&*ingress, &parts, body, &unverified).await {
                Ok(body) => body,
                Err(reply) => return Ok(reply.into_response()),
            };
            Ok(ingress.handle(parts, body).await.into_response())
        }))
    }
}

/// The body of a request, read within the bounds of what an unauthenticated caller
/// may make the node hold: once the ingress's precheck passed and the declared length
/// fits, in one of [`MAX_UNVERIFIED_BODIES`] places, within [`BODY_READ_TIMEOUT`].
async fn read_unverified<I, B>(
    ingress: &I,
    parts: &Parts,
    body: B,
    unverified: &Semaphore,
) -> Result<Bytes, Reply>
where
    I: Ingress,
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    ingress.precheck(parts)?;
    let max = ingress.max_body();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(Reply::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request is too large",
        ));
    }
    let _place = tokio::time::timeout(UNVERIFIED_QUEUE_TIMEOUT, unverified.acquire())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| Reply::error(StatusCode::SERVICE_UNAVAILABLE, "busy: try again"))?;
    let collected = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        http_body_util::Limited::new(body, max).collect(),
    )
    .await
    .map_err(|_| Reply::error(StatusCode::REQUEST_TIMEOUT, "the request body was too slow"))?;
    collected.map(|body| body.to_bytes()).map_err(|_| {
        Reply::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request is too large or was cut off",
        )
    })
}
