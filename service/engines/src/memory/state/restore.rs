//! A durable engine's start: the state its store kept put back in place.

use std::{collections::HashMap, sync::Arc, sync::atomic::Ordering, time::SystemTime};

use tokio::time::Instant;

use super::Inner;
use crate::memory::{
    agents::AskKeys,
    journal::{Stored, StoredRequestState},
    session::Session,
};

impl Inner {
    /// Puts the state a store kept in place, before the engine serves: sessions with
    /// their histories and pending asks (which wait out the reconnect grace from now),
    /// request records, agent leases. Returns the pending asks whose agent's lease is
    /// gone, to abort.
    pub(in crate::memory) fn restore(&self, stored: Stored) -> AskKeys {
        let retire_at = Instant::now() + self.config.reconnect_grace;
        // The pending asks made under each lease: (tenant, agent_id, incarnation).
        let mut by_lease: HashMap<(Arc<str>, String, String), AskKeys> = HashMap::new();
        let (mut epochs, mut orders) = (0, 0);
        for session in stored.sessions {
            let key = session.key.clone();
            let Ok(tenant_tx) = self.tenants.admit_session(&key.tenant, usize::MAX) else {
                continue;
            };
            epochs = epochs.max(session.epoch + 1);
            let session = Session::restore(session, tenant_tx);
            orders = orders.max(session.next_order());
            let (count, bytes) = session.pending_size();
            self.tenants.restore_pending(&key.tenant, count, bytes);
            for (agent, rpc_id) in session.asks_of_agents() {
                let lease = (
                    key.tenant.clone(),
                    agent.agent_id.clone(),
                    agent.incarnation.clone(),
                );
                let ask = (key.clone(), rpc_id.to_owned());
                by_lease.entry(lease).or_default().insert(ask);
            }
            self.shard(&key).restore_session(key, session, retire_at);
        }
        self.next_epoch.fetch_max(epochs, Ordering::Relaxed);
        self.next_order.fetch_max(orders, Ordering::Relaxed);
        let mut requests = stored.requests;
        // Oldest expiry first, as the shards' expiry queues hold them.
        requests.sort_by_key(|r| match &r.state {
            StoredRequestState::Pending { .. } => SystemTime::UNIX_EPOCH,
            StoredRequestState::Done { expires, .. } => *expires,
        });
        let (now, wall) = (Instant::now(), SystemTime::now());
        for request in requests {
            let tenant = request.key.tenant.clone();
            let held = self.shard(&request.key).restore_request(request, now, wall);
            self.tenants.hold_outcome(&tenant, held);
        }
        for agent in stored.agents {
            let lease = (
                agent.tenant.clone(),
                agent.agent_id.clone(),
                agent.incarnation.clone(),
            );
            let asks = by_lease.remove(&lease).unwrap_or_default();
            self.agents.restore(&self.tenants, agent, asks);
        }
        by_lease.into_values().flatten().collect()
    }
}
