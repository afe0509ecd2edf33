//! Subscribing on this node: the slot and holds a subscription takes (subscriber caps,
//! presence, an exclusive hold), the channel it follows, the task that merges its live
//! events with the session's (or the tenant's) history, and the stream that holds all
//! of it while it lives.

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use askgate_core::{
    backend::{EventStream, Scope, SubscribeOptions, events::Message},
    domain::{Error, SessionKey},
};
use tokio::task::JoinHandle;
use tokio_stream::{Stream, wrappers::ReceiverStream};

use super::{
    RedisBackend,
    follow::{Delivery, Follower},
    leases::HeldSession,
    node::Node,
    slots::SubscriberSlot,
};
use crate::redis_engine::{
    fanout::{SESSION_BUFFER, TENANT_BUFFER},
    store::{SessionKeys, TenantKeys},
};

impl RedisBackend {
    pub(super) async fn subscribe_now(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, Error> {
        let node = self.node.clone();
        node.check_open()?;
        let buffer = match &scope {
            Scope::Session(_) => node.settings().subscriber_buffer,
            Scope::Tenant(_) => node.settings().tenant_buffer,
        };
        let (follower, events_rx) = Follower::new(node.clone(), buffer);
        let held = match scope {
            Scope::Session(key) => session(node, key, options, follower).await?,
            Scope::Tenant(tenant) => tenant_wide(node, tenant, options, follower).await?,
        };
        Ok(Box::pin(HeldStream {
            events: ReceiverStream::new(events_rx),
            replay: VecDeque::new(),
            _held: held,
        }))
    }
}

/// A subscription to one session: its subscriber slot, the session held among the
/// tenant's, an exclusive hold if asked for, and presence ("someone follows").
async fn session(
    node: Arc<Node>,
    key: SessionKey,
    options: SubscribeOptions,
    follower: Follower,
) -> Result<Held, Error> {
    let keys = SessionKeys::new(&key);
    let slot = SubscriberSlot::take(
        &node,
        keys.subscribers(),
        node.settings().max_subscribers_per_session,
        Error::too_many_subscribers,
    )
    .await?;
    let mut held = Held::new(node.clone(), keys.channel(), slot);
    held.session = Some(node.hold_session(&key).await?);
    if options.exclusive {
        let hold = keys.exclusive();
        node.hold_exclusive(&hold).await?;
        held.exclusive = Some(hold);
    }
    let live = node.fanout().follow(&held.channel, SESSION_BUFFER).await?;
    held.following = true;
    // Noted before it is set: a failed SET still counts here until let go.
    let attended = held.attended.insert(keys.attended());
    node.hold_attended(attended).await?;
    held.task = Some(follower.spawn_session(key, options.after, live));
    Ok(held)
}

/// A subscription to every session of a tenant: its slot among the tenant's, and
/// presence unless it is passive.
async fn tenant_wide(
    node: Arc<Node>,
    tenant: Arc<str>,
    options: SubscribeOptions,
    follower: Follower,
) -> Result<Held, Error> {
    let keys = TenantKeys::new(&tenant);
    let slot = SubscriberSlot::take(
        &node,
        keys.all_sessions_subscribers(),
        node.settings().max_all_sessions_per_tenant,
        Error::too_many_all_sessions,
    )
    .await?;
    let mut held = Held::new(node.clone(), keys.channel(), slot);
    let live = node.fanout().follow(&held.channel, TENANT_BUFFER).await?;
    held.following = true;
    if options.passive {
        node.leases().join_passive();
        held.passive = true;
    } else {
        let attended = held.attended.insert(keys.attended());
        node.hold_attended(attended).await?;
    }
    let reset_first = options.after.is_some();
    held.task = Some(follower.spawn_tenant(tenant.to_string(), reset_first, live));
    Ok(held)
}

/// What a subscription holds on this node, each part noted as it is taken and let go
/// when the subscription ends (its stream dropped) or fails to start.
struct Held {
    node: Arc<Node>,
    /// The channel it follows, once `following`.
    channel: String,
    following: bool,
    _slot: SubscriberSlot,
    /// The presence it holds; `None` for a passive one.
    attended: Option<String>,
    passive: bool,
    exclusive: Option<String>,
    /// The session in its tenant's held sessions (see `Node::hold_session`).
    session: Option<HeldSession>,
    task: Option<JoinHandle<()>>,
}

impl Held {
    fn new(node: Arc<Node>, channel: String, slot: SubscriberSlot) -> Self {
        Self {
            node,
            channel,
            following: false,
            _slot: slot,
            attended: None,
            passive: false,
            exclusive: None,
            session: None,
            task: None,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        let leases = self.node.leases();
        if let Some(attended) = &self.attended {
            leases.leave(attended);
        }
        if self.passive {
            leases.leave_passive();
        }
        if let Some(held) = self.session.take() {
            leases.release_session(&held);
        }
        let node = self.node.clone();
        let channel = self.following.then(|| std::mem::take(&mut self.channel));
        let exclusive = self.exclusive.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(hold) = exclusive {
                    node.release_exclusive(&hold).await;
                }
                if let Some(channel) = channel {
                    node.fanout().release(&channel).await;
                }
            });
        }
    }
}

/// A subscription's stream: the follower task's output, holding its resources.
struct HeldStream {
    events: ReceiverStream<Result<Delivery, Error>>,
    /// The rest of a replay delivered at once.
    replay: VecDeque<Message>,
    _held: Held,
}

impl Stream for HeldStream {
    type Item = Result<Message, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            return match Pin::new(&mut self.events).poll_next(cx) {
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
