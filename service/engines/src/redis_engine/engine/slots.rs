//! Slots counted over every node (`max_subscribers_per_session`,
//! `max_all_sessions_per_tenant`, tenants' budgets), and the stream that holds a
//! subscription's leases while it lives.

use super::*;

/// One of the `max` subscriber slots of a session (`max_subscribers_per_session`) or of
/// a tenant's `all_sessions` streams (`max_all_sessions_per_tenant`), counted over
/// every node: a member of a `subs` sorted set, scored by when it expires. The node's
/// refresh loop renews it; a dead node's slots expire with its lease.
pub(super) struct SubscriberSlot {
    pub(super) node: Arc<Node>,
    pub(super) member: String,
}

impl SubscriberSlot {
    pub(super) async fn take(
        node: &Arc<Node>,
        subs: String,
        max: usize,
        full: impl FnOnce(usize) -> Error,
    ) -> Result<Self, Error> {
        let member = format!("{}:{}", node.id, Uuid::new_v4().simple());
        if !node
            .store
            .take_slot(&subs, &member, max, node.config.lease)
            .await?
        {
            return Err(full(max));
        }
        node.subscribers.lock().insert(member.clone(), subs);
        Ok(Self {
            node: node.clone(),
            member,
        })
    }
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        let Some(subs) = self.node.subscribers.lock().remove(&self.member) else {
            return;
        };
        let (node, member) = (self.node.clone(), std::mem::take(&mut self.member));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                node.store.release_slot(&subs, &member).await;
            });
        }
    }
}

/// Releases what a subscription held on this node when its stream is dropped.
pub(super) struct Held {
    pub(super) node: Arc<Node>,
    pub(super) channel: String,
    /// The presence this subscription holds; `None` for a passive one.
    pub(super) attended: Option<String>,
    pub(super) exclusive: Option<String>,
    pub(super) _slot: Option<SubscriberSlot>,
    /// The session in its tenant's held sessions (see `Node::hold_session`).
    pub(super) held_session: Option<(String, String)>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.task.abort();
        match &self.attended {
            Some(attended) => self.node.release_attended(attended),
            None => {
                self.node.passive.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if let Some(held) = self.held_session.take() {
            // No command: the entry expires a lease after its last renewal.
            self.node.release_session(held);
        }
        let node = self.node.clone();
        let channel = std::mem::take(&mut self.channel);
        let exclusive = self.exclusive.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(key) = exclusive {
                    node.exclusive.lock().remove(&key);
                    node.store.release_exclusive(&key).await;
                }
                node.fanout.release(&channel).await;
            });
        }
    }
}

/// A subscription's stream: the follower task's output, holding its resources.
pub(super) struct HeldStream {
    pub(super) events: ReceiverStream<Result<Delivery, Error>>,
    /// The rest of a replay delivered at once.
    pub(super) replay: VecDeque<Message>,
    pub(super) _held: Held,
}

impl tokio_stream::Stream for HeldStream {
    type Item = Result<Message, Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            return match std::pin::Pin::new(&mut self.events).poll_next(cx) {
                Poll::Ready(Some(Ok(Delivery::One(message)))) => Poll::Ready(Some(Ok(message))),
                Poll::Ready(Some(Ok(Delivery::Many(messages)))) => {
                    self.replay = messages;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}
