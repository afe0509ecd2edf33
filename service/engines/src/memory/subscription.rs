//! A subscriber's stream: the replay first, then live events from the broadcast
//! channel. A subscriber that falls behind gets `reset` and a fresh snapshot.

use super::*;

/// A subscriber's stream: the replay first, then live events from the broadcast
/// channel. A subscriber that falls behind gets `reset` and a fresh snapshot.
pub(super) struct Subscription {
    pub(super) inner: Arc<Inner>,
    pub(super) scope: Scope,
    pub(super) exclusive: bool,
    pub(super) passive: bool,
    pub(super) replay: VecDeque<Message>,
    pub(super) live: Option<BroadcastStream<Message>>,
}

impl Subscription {
    pub(super) fn resync(&mut self) -> bool {
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
