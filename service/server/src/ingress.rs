//! The HTTP entries that outside services call on askgate's port (the channels'
//! inbound endpoints: Slack's interactivity, Telegram's updates, the pages of signed
//! links): each an [`Ingress`], all served by one [`IngressLayer`] in front of the gRPC
//! services. A request is the ingress's when its
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
use tokio::sync::Semaphore;
use tower::{Layer, Service};

/// Bodies read at once, per ingress, before they can be verified.
pub const MAX_UNVERIFIED_BODIES: usize = 64;
/// How long a request waits for one of those places before it is refused (503).
pub const UNVERIFIED_QUEUE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the whole body may take to arrive (408 past it).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

pub use askgate_channels::ingress::{Ingress, Reply};

/// Serves the [`Ingress`]es; every other request goes on.
#[derive(Clone)]
pub struct IngressLayer {
    /// Each ingress and the places for bodies read before it verifies them. Shared:
    /// the service stack is cloned for every request.
    ingresses: Arc<[Entry]>,
}

/// An ingress, and its places for bodies read before they are verified.
struct Entry {
    ingress: Arc<dyn Ingress>,
    unverified: Arc<Semaphore>,
}

impl IngressLayer {
    pub fn new(ingresses: Vec<Arc<dyn Ingress>>) -> Self {
        let ingresses = ingresses
            .into_iter()
            .map(|ingress| Entry {
                ingress,
                unverified: Arc::new(Semaphore::new(MAX_UNVERIFIED_BODIES)),
            })
            .collect();
        Self { ingresses }
    }
}

impl<S> Layer<S> for IngressLayer {
    type Service = IngressRoute<S>;

    fn layer(&self, inner: S) -> IngressRoute<S> {
        IngressRoute {
            ingresses: self.ingresses.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub struct IngressRoute<S> {
    ingresses: Arc<[Entry]>,
    inner: S,
}

type Served<E> = Pin<Box<dyn Future<Output = Result<Response<tonic::body::Body>, E>> + Send>>;

impl<S, B> Service<Request<B>> for IngressRoute<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Error: Send + 'static,
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
        let path = request.uri().path();
        let Some(entry) = self.ingresses.iter().find(|e| e.ingress.claims(path)) else {
            return Either::Right(self.inner.call(request));
        };
        let ingress = entry.ingress.clone();
        let unverified = entry.unverified.clone();
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
async fn read_unverified<B>(
    ingress: &dyn Ingress,
    parts: &Parts,
    body: B,
    unverified: &Semaphore,
) -> Result<Bytes, Reply>
where
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
