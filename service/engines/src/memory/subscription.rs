//! A subscriber's stream: the replay first, then live events from the broadcast
//! channel. A subscriber that falls behind gets `reset` and a fresh snapshot.

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use askgate_core::{
    backend::{Scope, SubscribeOptions, events::Message},
    domain::Error,
};
use tokio_stream::{
    Stream,
    wrappers::{BroadcastStream, errors::BroadcastStreamRecvError},
};
use tracing::warn;

use super::state::Inner;

/// A subscriber's stream: the replay first, then live events from the broadcast
/// channel. A subscriber that falls behind gets `reset` and a fresh snapshot.
pub(super) struct Subscription {
    inner: Arc<Inner>,
    scope: Scope,
    exclusive: bool,
    passive: bool,
    replay: VecDeque<Message>,
    live: Option<BroadcastStream<Message>>,
}

impl Subscription {
    /// Starts following `scope` as `options` say.
    pub(super) fn start(
        inner: Arc<Inner>,
        scope: Scope,
        options: &SubscribeOptions,
    ) -> Result<Self, Error> {
        let (replay, receiver) = match &scope {
            Scope::Session(key) => {
                inner.follow_session(key, options.after.as_deref(), false, options.exclusive)?
            }
            Scope::Tenant(tenant) => {
                inner.follow_tenant(tenant, options.after.is_some(), false, options.passive)?
            }
        };
        Ok(Self {
            inner,
            scope,
            exclusive: options.exclusive,
            passive: options.passive,
            replay,
            live: Some(BroadcastStream::new(receiver)),
        })
    }

    /// After a lag: `reset`, a fresh snapshot, and a new receiver; false when the
    /// scope cannot be followed any more (shutdown).
    fn resync(&mut self) -> bool {
        let follow = match &self.scope {
            Scope::Session(key) => self.inner.follow_session(key, None, true, false),
            Scope::Tenant(tenant) => self.inner.follow_tenant(tenant, true, true, self.passive),
        };
        match follow {
            Ok((replay, receiver)) => {
                self.replay = replay;
                self.live = Some(BroadcastStream::new(receiver));
                true
            }
            Err(_) => false,
        }
    }
}

impl Stream for Subscription {
    /// Never an error: the memory backend cannot become unreachable.
    type Item = Result<Message, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            let Some(live) = self.live.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(live).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => return Poll::Ready(Some(Ok(message))),
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(missed)))) => {
                    warn!(scope = ?self.scope, missed, "subscriber fell behind; sending reset and a fresh snapshot");
                    self.live = None;
                    if !self.resync() {
                        return Poll::Ready(None);
                    }
                }
                Poll::Ready(None) => {
                    self.live = None;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Release the receiver first so the scope can be seen as unsubscribed.
        self.live = None;
        self.inner
            .unsubscribed(&self.scope, self.exclusive, self.passive);
    }
}
