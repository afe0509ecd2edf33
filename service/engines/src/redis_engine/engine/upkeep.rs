//! What a node does every few seconds: renew what it holds (its lease, presence,
//! waiter marks, agent leases, exclusive holds, slots), notice agent leases a newer
//! attach on another node replaced, take over dead nodes' waiters and abort the asks
//! whose callers all went away, and queue the deliveries of events left in the outbox.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use askgate_core::domain::{Error, Outcome, SessionKey};
use tracing::{debug, warn};

use super::node::Node;
use crate::redis_engine::keys::parse_wait_member;

/// Renews and sweeps every third of the shorter of the lease and the reconnect grace,
/// until the node is dropped.
pub(super) async fn renew_until_dropped(node: Weak<Node>) {
    for round in 0.. {
        let Some(node) = node.upgrade() else {
            return;
        };
        let period = (node.settings().reconnect_grace / 3)
            .min(node.lease() / 3)
            .max(Duration::from_millis(50));
        if let Err(e) = renew(&node).await {
            warn!("refreshing redis leases failed: {e}");
        }
        match sweep_abandoned(&node).await {
            Ok(abandoned) => {
                for (key, rpc_id) in abandoned {
                    if node.claim(&key, &rpc_id, Outcome::aborted()).await.is_ok() {
                        debug!(%rpc_id, "aborted an ask its node abandoned");
                    }
                }
            }
            Err(e) => warn!("sweeping abandoned asks failed: {e}"),
        }
        if let Err(e) = super::outbox::sweep(&node, round, period).await {
            warn!("sweeping the outbox failed: {e}");
        }
        drop(node);
        tokio::time::sleep(period).await;
    }
}

/// Renews everything the node holds in one round, then ends the agent leases that a
/// newer attach elsewhere replaced.
async fn renew(node: &Arc<Node>) -> Result<(), Error> {
    let agents = node.leases().agents();
    let renewal = node
        .leases()
        .renewal(node.waiting().take_resolved(), node.alive());
    let store = node.store();
    let renewed = store
        .renew(
            node.id(),
            &renewal,
            node.lease(),
            node.settings().reconnect_grace,
        )
        .await;
    if let Err(e) = renewed {
        // Taken off the list with the next renewal instead.
        node.waiting().restore_resolved(renewal.resolved);
        return Err(e);
    }
    for (agent, incarnation) in agents {
        let (current, _) = store.agent(&agent.0, &agent.1).await?;
        if current.as_deref() != Some(incarnation.as_str()) {
            node.leases().supersede_agent(&agent);
        }
    }
    Ok(())
}

/// Asks whose callers all went away: once their reattach grace is over and no live
/// node waits on them, they resolve ABORTED. Every node sweeps; the claim script lets
/// one win.
async fn sweep_abandoned(node: &Node) -> Result<Vec<(SessionKey, String)>, Error> {
    take_over_dead_nodes(node).await?;
    let store = node.store();
    let mut abandoned = Vec::new();
    for member in store.take_due(100).await? {
        let Some((key, rpc_id)) = parse_wait_member(&member) else {
            continue;
        };
        let waiting = store.live_waiters(&key, &rpc_id).await?;
        if waiting.is_empty() {
            abandoned.push((key, rpc_id));
        }
        // A node whose lease ran out while Redis was out of its reach had its list
        // taken over; it is back and still waits: the ask goes back on its list.
        for node_id in waiting {
            store.relist(&node_id, &member).await?;
        }
    }
    Ok(abandoned)
}

/// The asks of nodes whose lease ended (they died, or drained): each goes on the sweep
/// list, due when its reattach grace is over; a call that reattached on a live node
/// meanwhile keeps it. A batch per node per sweep; the node is forgotten once its list
/// is empty.
async fn take_over_dead_nodes(node: &Node) -> Result<(), Error> {
    for node_id in node.store().dead_nodes(10).await? {
        if node_id != node.id() {
            node.store().take_over(&node_id, 100).await?;
        }
    }
    Ok(())
}
