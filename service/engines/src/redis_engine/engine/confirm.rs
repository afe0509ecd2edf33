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

use std::{sync::Arc, time::Duration};

use askgate_core::{
    backend::events::outcome_of,
    domain::{Outcome, SessionKey},
};
use askgate_proto::v1::{Resolution, Resolved};
use tokio::sync::oneshot;
use tracing::warn;

use super::{node::Node, pump};
use crate::redis_engine::{fanout::SESSION_BUFFER, store::SessionKeys};

/// What a call waits under: enough to wait again.
#[derive(Clone)]
pub(super) struct Waited {
    pub key: SessionKey,
    pub rpc_id: String,
    pub request_id: String,
}

/// `outcome`, handed over only once confirmed durable when the store's writes wait
/// for replicas; as is otherwise.
pub(super) fn confirmed(
    node: &Arc<Node>,
    waited: Waited,
    outcome: oneshot::Receiver<Outcome>,
) -> oneshot::Receiver<Outcome> {
    if !node.store().waits() {
        return outcome;
    }
    let (confirmed_tx, confirmed) = oneshot::channel();
    tokio::spawn(confirm(node.clone(), waited, outcome, confirmed_tx));
    confirmed
}

async fn confirm(
    node: Arc<Node>,
    waited: Waited,
    mut outcome: oneshot::Receiver<Outcome>,
    confirmed: oneshot::Sender<Outcome>,
) {
    loop {
        let Ok(got) = outcome.await else {
            return;
        };
        // Handed over: the call retries through another node, which confirms there.
        if got.resolution == Resolution::Disposed {
            let _ = confirmed.send(got);
            return;
        }
        let Some((settled, pending)) = recorded(&node, &waited, &confirmed).await else {
            return;
        };
        // The same outcome, answers and all (two people, or one person twice, may have
        // answered differently on each side of a failover); or neither recorded nor
        // pending: recorded long ago and forgotten since.
        let same = settled.as_ref().is_some_and(|r| outcome_of(r) == got);
        if same || (settled.is_none() && !pending) {
            let _ = confirmed.send(got);
            return;
        }
        warn!(
            rpc_id = %waited.rpc_id,
            "an outcome was lost in a Redis failover before it was durable; waiting for the ask again"
        );
        outcome = wait_again(&node, &waited, &confirmed).await;
    }
}

/// How the ask ended, read durably; retried while Redis is out of reach, for as long
/// as the call waits. `None` once it stopped waiting.
async fn recorded(
    node: &Node,
    waited: &Waited,
    confirmed: &oneshot::Sender<Outcome>,
) -> Option<(Option<Resolved>, bool)> {
    let mut pause = Duration::from_millis(50);
    loop {
        match node.store().confirm(&waited.key, &waited.rpc_id).await {
            Ok(state) => return Some(state),
            Err(_) if !confirmed.is_closed() => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(_) => return None,
        }
    }
}

/// Waits for the ask again on this node, as a new call would (following its session,
/// its pump running), recovering an outcome already in the history.
async fn wait_again(
    node: &Arc<Node>,
    waited: &Waited,
    confirmed: &oneshot::Sender<Outcome>,
) -> oneshot::Receiver<Outcome> {
    let outcome = node
        .waiting()
        .add(&waited.key, &waited.rpc_id, &waited.request_id);
    node.waiting().stored(&waited.key, &waited.rpc_id);
    let channel = SessionKeys::new(&waited.key).channel();
    let mut pause = Duration::from_millis(50);
    while !confirmed.is_closed() {
        match node.fanout().follow(&channel, SESSION_BUFFER).await {
            Ok(live) => {
                pump::ensure(node, &waited.key, live);
                break;
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
    node.recover_waiters(&waited.key).await;
    outcome
}
