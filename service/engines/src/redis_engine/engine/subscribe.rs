//! Subscribing on this node: the slot and holds a subscription takes (subscriber caps,
//! presence, an exclusive hold), the channel it follows, and the task that merges its
//! live events with the session's (or the tenant's) history.

use std::{collections::VecDeque, sync::Arc};

use askgate_core::{
    backend::{EventStream, Scope, SubscribeOptions},
    domain::{Error, SessionKey},
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::{Follower, Held, HeldStream, Node, RedisBackend, SubscriberSlot, fail_subscription};
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
        if node.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        let buffer = match &scope {
            Scope::Session(_) => node.settings.subscriber_buffer,
            Scope::Tenant(_) => node.settings.tenant_buffer,
        };
        let (events_tx, events_rx) = mpsc::channel(buffer.max(1));
        let follower = Follower {
            node: node.clone(),
            events_tx,
            lost: node.fanout.watch_disconnections(),
        };
        let closing = node.closing.subscribe();
        let held = match scope {
            Scope::Session(key) => session(node, key, options, follower, closing).await?,
            Scope::Tenant(tenant) => tenant_wide(node, tenant, options, follower, closing).await?,
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
    closing: watch::Receiver<bool>,
) -> Result<Held, Error> {
    let keys = SessionKeys::new(&key);
    let slot = SubscriberSlot::take(
        &node,
        keys.subscribers(),
        node.settings.max_subscribers_per_session,
        Error::too_many_subscribers,
    )
    .await?;
    let held_session = node.hold_session(&key).await?;
    let exclusive = match options.exclusive {
        true => {
            let hold = keys.exclusive();
            if !node
                .store
                .take_exclusive(&hold, &node.id, node.config.lease)
                .await?
            {
                return Err(Error::DuplicateProvider);
            }
            node.exclusive.lock().insert(hold.clone(), node.id.clone());
            Some(hold)
        }
        false => None,
    };
    let channel = keys.channel();
    let attended = keys.attended();
    let live = node.fanout.follow(&channel, SESSION_BUFFER).await?;
    node.hold_attended(attended.clone()).await?;
    let events_tx = follower.events_tx.clone();
    let task = tokio::spawn(async move {
        let ended = follower.session(key, options.after, live, closing).await;
        fail_subscription(&events_tx, ended).await;
    });
    Ok(Held {
        node,
        channel,
        attended: Some(attended),
        exclusive,
        _slot: Some(slot),
        held_session: Some(held_session),
        task,
    })
}

/// A subscription to every session of a tenant: its slot among the tenant's, and
/// presence unless it is passive.
async fn tenant_wide(
    node: Arc<Node>,
    tenant: Arc<str>,
    options: SubscribeOptions,
    follower: Follower,
    closing: watch::Receiver<bool>,
) -> Result<Held, Error> {
    let keys = TenantKeys::new(&tenant);
    let slot = SubscriberSlot::take(
        &node,
        keys.all_sessions_subscribers(),
        node.settings.max_all_sessions_per_tenant,
        Error::too_many_all_sessions,
    )
    .await?;
    let channel = keys.channel();
    let live = node.fanout.follow(&channel, TENANT_BUFFER).await?;
    let attended = match options.passive {
        true => {
            node.passive
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            None
        }
        false => {
            let attended = keys.attended();
            node.hold_attended(attended.clone()).await?;
            Some(attended)
        }
    };
    let reset_first = options.after.is_some();
    let events_tx = follower.events_tx.clone();
    let task = tokio::spawn(async move {
        let ended = follower
            .tenant(tenant.to_string(), reset_first, live, closing)
            .await;
        fail_subscription(&events_tx, ended).await;
    });
    Ok(Held {
        node,
        channel,
        attended,
        exclusive: None,
        _slot: Some(slot),
        held_session: None,
        task,
    })
}
