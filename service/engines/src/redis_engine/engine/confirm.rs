//! An outcome reaches its agent only once it is durable, when acknowledging writes
//! wait for replicas (`--redis-wait-replicas`, `--redis-wait-fsync`).
//!
//! The claim script publishes its `resolved` event before the `WAIT` after it returns:
//! a node waiting for the ask hears of it at once. Were the agent told then, and the
//! `WAIT` failed (no replica took the claim in time; the human was told UNAVAILABLE)
//! and the primary died, the agent would act on an answer the promoted replica never
//! saw, and the ask, pending again, could be answered otherwise. So before an outcome
//! is handed over, the store reads how the ask ended behind a write of its own that the
//! policy's `WAIT` covers ([`RedisStore::confirm`]): the outcome recorded is then
//! durable. An outcome the failover lost shows as the ask pending again (or ended
//! otherwise): the call then waits for the ask again.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use askgate_core::backend::events::outcome_of;
use askgate_proto::v1::{Resolution, Resolved};
use tracing::warn;

use super::{node::Node, pump, waiters::Delivery};
use crate::redis_engine::{fanout::SESSION_BUFFER, store::SessionKeys};

/// When the store's writes wait for replicas, every outcome this node hands to a call
/// goes through [`confirm`] first. The call stays the node's to watch until then: a
/// call that goes away is seen gone (and its ask aborted as abandoned) as before.
pub(super) fn install(node: &Arc<Node>) {
    if !node.store().waits() {
        return;
    }
    let weak: Weak<Node> = Arc::downgrade(node);
    node.waiting().confirm_with(Box::new(move |delivery| {
        // Handed over: the call retries through another node, which confirms there.
        if delivery.outcome.resolution == Resolution::Disposed {
            let _ = delivery.call.send(Box::new(delivery.outcome));
            return;
        }
        if let Some(node) = weak.upgrade() {
            tokio::spawn(confirm(node, delivery));
        }
    }));
}

/// Hands the delivery's outcome to its call once it is durable; waits for the ask again
/// if a failover lost it.
async fn confirm(node: Arc<Node>, delivery: Delivery) {
    let Some((settled, pending)) = recorded(&node, &delivery).await else {
        return;
    };
    // The same outcome, answers and all (two people, or one person twice, may have
    // answered differently on each side of a failover); or neither recorded nor
    // pending: recorded long ago and forgotten since.
    let same = settled
        .as_ref()
        .is_some_and(|r| outcome_of(r) == delivery.outcome);
    if same || (settled.is_none() && !pending) {
        let _ = delivery.call.send(Box::new(delivery.outcome));
        return;
    }
    warn!(
        rpc_id = %delivery.rpc_id,
        "an outcome was lost in a Redis failover before it was durable; waiting for the ask again"
    );
    wait_again(&node, delivery).await;
}

/// How the ask ended, read durably; retried while Redis is out of reach, for as long
/// as the call waits. `None` once it stopped waiting.
async fn recorded(node: &Node, delivery: &Delivery) -> Option<(Option<Resolved>, bool)> {
    let mut pause = Duration::from_millis(50);
    loop {
        match node.store().confirm(&delivery.key, &delivery.rpc_id).await {
            Ok(state) => return Some(state),
            Err(_) if !delivery.call.is_closed() => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(_) => return None,
        }
    }
}

/// The call waits for the ask again on this node, as a new call would (following its
/// session, its pump running), recovering an outcome already in the history.
async fn wait_again(node: &Arc<Node>, delivery: Delivery) {
    let Delivery {
        key,
        rpc_id,
        request_id,
        call,
        ..
    } = delivery;
    let channel = SessionKeys::new(&key).channel();
    let mut pause = Duration::from_millis(50);
    let live = loop {
        match node.fanout().follow(&channel, SESSION_BUFFER).await {
            Ok(live) => break live,
            Err(_) if !call.is_closed() => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(_) => return,
        }
    };
    node.waiting().add_call(&key, &rpc_id, &request_id, call);
    pump::ensure(node, &key, live);
    node.recover_waiters(&key).await;
}
