//! grpc.health.v1 that lets the server stop. tonic-health's `Watch` streams never end
//! by themselves, and a graceful shutdown waits for every open stream (hyper issue
//! 4170), so one health watcher would hold a draining node open until its drain
//! timeout. This wrapper ends each `Watch` once the node drains, after delivering the
//! status changes made before the drain (NOT_SERVING among them).

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use tokio::sync::watch;
use tokio_stream::{Stream, wrappers::WatchStream};
use tonic::{Request, Response, Status};
use tonic_health::{
    pb::{
        HealthCheckRequest, HealthCheckResponse,
        health_server::{Health, HealthServer},
    },
    server::{HealthReporter, HealthService},
};

/// The health service of a node whose drain is announced on `draining`.
pub fn service(
    reporter: HealthReporter,
    draining: watch::Receiver<bool>,
) -> HealthServer<DrainingHealth> {
    HealthServer::new(DrainingHealth {
        inner: HealthService::from_health_reporter(reporter),
        draining,
    })
}

pub struct DrainingHealth {
    inner: HealthService,
    draining: watch::Receiver<bool>,
}

type HealthStream = Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for DrainingHealth {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        self.inner.check(request).await
    }

    type WatchStream = HealthStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let statuses = self.inner.watch(request).await?.into_inner();
        Ok(Response::new(Box::pin(EndOnDrain {
            inner: statuses,
            draining: WatchStream::new(self.draining.clone()),
            drained: false,
        })))
    }
}

/// Forwards `inner` until the drain is announced, then what `inner` has ready, then
/// ends.
struct EndOnDrain<S> {
    inner: S,
    draining: WatchStream<bool>,
    drained: bool,
}

impl<S: Stream + Unpin> Stream for EndOnDrain<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        while !self.drained {
            match Pin::new(&mut self.draining).poll_next(cx) {
                Poll::Ready(Some(true) | None) => self.drained = true,
                Poll::Ready(Some(false)) => continue,
                Poll::Pending => return Pin::new(&mut self.inner).poll_next(cx),
            }
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Pending => Poll::Ready(None),
            ready => ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    use super::*;

    #[tokio::test]
    async fn items_ready_before_the_drain_are_delivered_then_the_stream_ends() {
        let (items_tx, items_rx) = tokio::sync::mpsc::unbounded_channel();
        let (drain_tx, drain_rx) = watch::channel(false);
        let mut stream = EndOnDrain {
            inner: tokio_stream::wrappers::UnboundedReceiverStream::new(items_rx),
            draining: WatchStream::new(drain_rx),
            drained: false,
        };
        items_tx.send(1).expect("send");
        assert_eq!(stream.next().await, Some(1));
        items_tx.send(2).expect("send");
        drain_tx.send(true).expect("drain");
        assert_eq!(stream.next().await, Some(2));
        assert_eq!(stream.next().await, None);
    }
}
