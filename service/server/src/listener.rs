//! The node's connections: accepted here rather than by tonic, so that nothing a peer
//! does without sending a request can hold the node.
//!
//! - At most `--max-connections` at once: one past it is closed at once (and counted
//!   in `askgate_refused_connections`), so idle sockets cannot take every descriptor.
//! - A connection with no request in flight for `--idle-timeout` (since it was opened,
//!   or since its last request ended) is closed, whatever it sends meanwhile: a silent
//!   TCP connection, a TLS or HTTP/2 handshake that never comes, an HTTP/1.1
//!   connection kept alive and left, an HTTP/2 connection that answers PINGs (or sends
//!   its own) but opens no stream. A request in flight (a blocked Ask, a Subscribe
//!   stream) is never idle; a gRPC client whose idle channel was closed connects again
//!   for its next call.
//! - When accepting fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
//!   ENOMEM), the loop backs off (10 ms doubling to 1 s) instead of spinning on a
//!   connection it cannot take; it says so in the log once per episode.
//!
//! HTTP/1.1 headers must arrive within hyper's 30 s header timeout, which tonic turns on.

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures_util::task::AtomicWaker;
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
    time::Sleep,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tower::{Layer, Service};
use tracing::{debug, warn};

/// How connections are bounded (`--max-connections`, `--idle-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection with no request in flight may send nothing.
    pub idle_timeout: Duration,
    /// TCP keepalive probes' interval, for peers that vanish without a word.
    pub tcp_keepalive: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            idle_timeout: Duration::from_secs(60),
            tcp_keepalive: Duration::from_secs(20),
        }
    }
}

/// The gauges and counters the listener keeps.
#[derive(Debug, Clone)]
pub struct ConnectionMetrics {
    pub open: Gauge,
    pub refused: Counter,
}

/// First and longest pause after accepting failed for want of resources.
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The accepted connections of `listener`, bounded by `limits`, as the stream tonic
/// serves. Accepting stops (and the socket closes) when the stream is dropped.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    metrics: ConnectionMetrics,
) -> ReceiverStream<io::Result<GuardedStream>> {
    let (accepted_tx, accepted_rx) = mpsc::channel(1);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let epoch = Instant::now();
    tokio::spawn(async move {
        let mut backoff = ACCEPT_BACKOFF_FIRST;
        let mut starved = false;
        loop {
            let accepted = tokio::select! {
                () = accepted_tx.closed() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) if out_of_resources(&e) => {
                    if !starved {
                        warn!(
                            "cannot accept connections: {e}; backing off until descriptors \
                             are free (raise the descriptor limit, or lower --max-connections)"
                        );
                    }
                    starved = true;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
                // One connection's failure (reset before it was accepted).
                Err(e) => {
                    debug!("accept failed: {e}");
                    continue;
                }
            };
            if starved {
                warn!("accepting connections again");
                starved = false;
            }
            backoff = ACCEPT_BACKOFF_FIRST;
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                metrics.refused.inc();
                debug!(%peer, "refused a connection: --max-connections reached");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let keepalive = socket2::TcpKeepalive::new().with_time(limits.tcp_keepalive);
            let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
            let guarded =
                GuardedStream::new(stream, peer, limits.idle_timeout, epoch, permit, &metrics);
            if accepted_tx.send(Ok(guarded)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(accepted_rx)
}

fn out_of_resources(error: &io::Error) -> bool {
    // EMFILE, ENFILE, ENOBUFS, ENOMEM on Linux and the BSDs alike.
    matches!(error.raw_os_error(), Some(24 | 23 | 105 | 55 | 12))
}

/// What a connection is doing: requests in flight, and since when it has had none.
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    /// When its last request ended (or it was opened), in milliseconds since the
    /// listener's epoch. What it reads meanwhile does not count: PINGs and SETTINGS
    /// keep no connection open.
    idle_from: AtomicU64,
    epoch: Instant,
    /// The connection's reader, woken when its last request ends so that its idle
    /// clock starts.
    reader: AtomicWaker,
}

impl Activity {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn idle_since(&self) -> Option<Instant> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| self.epoch + Duration::from_millis(self.idle_from.load(Ordering::Relaxed)))
    }
}

/// What tonic puts in each request's extensions for a [`GuardedStream`].
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub peer: SocketAddr,
    activity: Arc<Activity>,
}

/// An accepted connection: holds one of the `--max-connections` places, counts itself
/// in `askgate_connections`, and fails its reads once idle past the timeout (hyper then
/// closes it).
pub struct GuardedStream {
    io: TcpStream,
    info: ConnectionInfo,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    gauge: Gauge,
    _permit: OwnedSemaphorePermit,
}

impl GuardedStream {
    fn new(
        io: TcpStream,
        peer: SocketAddr,
        idle_timeout: Duration,
        epoch: Instant,
        permit: OwnedSemaphorePermit,
        metrics: &ConnectionMetrics,
    ) -> Self {
        metrics.open.inc();
        let activity = Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            idle_from: AtomicU64::new(0),
            epoch,
            reader: AtomicWaker::new(),
        });
        activity
            .idle_from
            .store(activity.now_ms(), Ordering::Relaxed);
        Self {
            io,
            info: ConnectionInfo { peer, activity },
            idle_timeout,
            idle: Box::pin(tokio::time::sleep(idle_timeout)),
            gauge: metrics.open.clone(),
            _permit: permit,
        }
    }
}

impl Drop for GuardedStream {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        let activity = &this.info.activity;
        match read {
            Poll::Pending => {
                let Some(since) = activity.idle_since() else {
                    // Cheap when the waker is the same as last time (it usually is).
                    activity.reader.register(cx.waker());
                    // The last request may have ended meanwhile: look again.
                    if activity.idle_since().is_none() {
                        return Poll::Pending;
                    }
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                };
                let deadline = since + this.idle_timeout;
                this.idle.as_mut().reset(deadline.into());
                match this.idle.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "closed: the connection had no request in flight for --idle-timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Marks a request in flight on its connection from its arrival until its response
/// body is done (or dropped): a connection serving requests is never idle.
#[derive(Debug, Clone, Copy, Default)]
pub struct InFlightLayer;

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlight<S>;

    fn layer(&self, inner: S) -> InFlight<S> {
        InFlight { inner }
    }
}

#[derive(Debug, Clone)]
pub struct InFlight<S> {
    inner: S,
}

/// One request in flight; ends it when dropped.
struct Flying(Arc<Activity>);

impl Flying {
    fn begin<B>(request: &http::Request<B>) -> Option<Self> {
        let info = request.extensions().get::<ConnectionInfo>().or_else(|| {
            request
                .extensions()
                .get::<tonic::transport::server::TlsConnectInfo<ConnectionInfo>>()
                .map(|tls| tls.get_ref())
        })?;
        info.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Some(Self(info.activity.clone()))
    }
}

impl Drop for Flying {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .idle_from
            .store(activity.now_ms(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The reader may be parked with no idle clock running: start it.
            activity.reader.wake();
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner call's future, and the request's place in flight. Not boxed: every
    /// call, a waiting Ask among them, would hold one more allocation for as long as
    /// it lasts.
    pub struct InFlightFuture<F> {
        #[pin]
        response: F,
        flying: Option<Flying>,
    }
}

impl<F, E> std::future::Future for InFlightFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<tonic::body::Body>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.response.poll(cx))?;
        // The body keeps the request in flight until it is sent.
        Poll::Ready(Ok(match this.flying.take() {
            None => response,
            Some(flying) => response.map(|body| {
                tonic::body::Body::new(FlyingBody {
                    body,
                    _flying: flying,
                })
            }),
        }))
    }
}

impl<S, B> Service<http::Request<B>> for InFlight<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = InFlightFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let flying = Flying::begin(&request);
        InFlightFuture {
            response: self.inner.call(request),
            flying,
        }
    }
}

/// A response body that keeps its request in flight until it is done.
struct FlyingBody {
    body: tonic::body::Body,
    _flying: Flying,
}

impl http_body::Body for FlyingBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
