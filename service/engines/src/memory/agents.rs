//! The agents attached now, each with its lease: its incarnation, its parent, who
//! holds it, and the asks made under it (ABORTED when it ends).

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use askgate_core::{
    backend::{Attached, Holder},
    domain::{Error, SessionKey},
};
use askgate_proto::v1::AgentRef;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::{
    journal::{AttachedAgent, Change, Journal},
    tenants::Tenants,
};

/// An agent of a tenant: (tenant, agent_id).
type AgentKey = (Arc<str>, String);

/// Asks by their session and rpc_id.
pub(super) type AskKeys = HashSet<(SessionKey, String)>;

/// The agent registry. Lock order: `agents`, then the tenants'.
pub(super) struct Agents {
    agents: Mutex<HashMap<AgentKey, AgentLease>>,
    /// Where leases are recorded, on a durable engine: under the agents lock, so the
    /// store sees them in the order they happened.
    journal: Option<Journal>,
}

struct AgentLease {
    incarnation: String,
    parent_agent_id: String,
    /// The subject that attached it: only it (or an admin) may replace it.
    holder: String,
    /// Pending asks made under this incarnation: ABORTED when it ends.
    asks: AskKeys,
    superseded: Option<oneshot::Sender<()>>,
}

/// The agents, locked while a caller passed the check: an ask recorded through it
/// cannot miss a detach that slips between the check and the record.
pub(super) struct CheckedCaller<'a> {
    agents: MutexGuard<'a, HashMap<AgentKey, AgentLease>>,
}

impl Agents {
    pub(super) fn new(journal: Option<Journal>) -> Self {
        Self {
            agents: Mutex::default(),
            journal,
        }
    }

    /// A lease as a store kept it, with the pending asks made under it.
    pub(super) fn restore(&self, tenants: &Tenants, agent: AttachedAgent, asks: AskKeys) {
        let _ = tenants.admit_agent(&agent.tenant, usize::MAX);
        let lease = AgentLease {
            incarnation: agent.incarnation,
            parent_agent_id: agent.parent_agent_id,
            holder: agent.holder,
            asks,
            superseded: None,
        };
        self.agents
            .lock()
            .insert((agent.tenant, agent.agent_id), lease);
    }

    /// Attaches the agent with a new incarnation, replacing its lease if `holder` may;
    /// a new agent counts against its tenant's `max`. Returns the asks of the lease it
    /// replaced (to abort), whose holder was told.
    pub(super) fn attach(
        &self,
        tenants: &Tenants,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
        max: usize,
    ) -> Result<(Attached, AskKeys), Error> {
        let key = (Arc::<str>::from(tenant), agent_id.to_owned());
        let mut agents = self.agents.lock();
        match agents.get(&key) {
            Some(current) if current.holder != holder.subject && !holder.may_take_over => {
                return Err(Error::lease_held());
            }
            Some(_) => {}
            // A new agent of the tenant: counted against its cap (the agents lock is
            // held, so the count and the map agree).
            None => tenants.admit_agent(&key.0, max)?,
        }
        let incarnation = Uuid::now_v7().to_string();
        let (superseded_tx, superseded) = oneshot::channel();
        let lease = AgentLease {
            incarnation: incarnation.clone(),
            parent_agent_id: parent_agent_id.to_owned(),
            holder: holder.subject.clone(),
            asks: HashSet::new(),
            superseded: Some(superseded_tx),
        };
        if let Some(journal) = &self.journal {
            journal.record(Change::AgentAttached(AttachedAgent {
                tenant: key.0.clone(),
                agent_id: key.1.clone(),
                incarnation: incarnation.clone(),
                parent_agent_id: lease.parent_agent_id.clone(),
                holder: lease.holder.clone(),
            }));
        }
        let previous = agents.insert(key, lease);
        drop(agents);
        let replaced = match previous {
            Some(mut previous) => {
                tracing::debug!(agent_id, old = %previous.incarnation, "attach supersedes the previous lease");
                if let Some(superseded) = previous.superseded.take() {
                    let _ = superseded.send(());
                }
                previous.asks
            }
            None => AskKeys::new(),
        };
        let attached = Attached {
            incarnation,
            superseded,
        };
        Ok((attached, replaced))
    }

    /// Ends the agent's lease if `incarnation` is the current one; its asks (to abort).
    pub(super) fn detach(
        &self,
        tenants: &Tenants,
        tenant: &str,
        agent_id: &str,
        incarnation: &str,
    ) -> Option<AskKeys> {
        let mut agents = self.agents.lock();
        let key = (Arc::<str>::from(tenant), agent_id.to_owned());
        if agents.get(&key)?.incarnation != incarnation {
            return None;
        }
        tenants.agent_gone(tenant);
        if let Some(journal) = &self.journal {
            journal.record(Change::AgentDetached {
                tenant: key.0.clone(),
                agent_id: key.1.clone(),
            });
        }
        agents.remove(&key).map(|lease| lease.asks)
    }

    /// Semantics 7: the agent is attached now with that incarnation and has no live
    /// parent. Holds the agents until the ask is recorded under its lease.
    pub(super) fn check_caller(
        &self,
        tenant: &Arc<str>,
        agent: &AgentRef,
    ) -> Result<CheckedCaller<'_>, Error> {
        let agents = self.agents.lock();
        let lease = agents
            .get(&(tenant.clone(), agent.agent_id.clone()))
            .map(|lease| (lease.incarnation.as_str(), lease.parent_agent_id.as_str()));
        if let Some(parent) = askgate_core::backend::live_caller(agent, lease)?
            && agents.contains_key(&(tenant.clone(), parent.to_owned()))
        {
            return Err(Error::DelegatedCaller);
        }
        Ok(CheckedCaller { agents })
    }

    /// The ask ended: it no longer counts among its agent's.
    pub(super) fn release_ask(&self, key: &SessionKey, rpc_id: &str, agent: &AgentRef) {
        if let Some(lease) = self
            .agents
            .lock()
            .get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
            && lease.incarnation == agent.incarnation
        {
            lease.asks.remove(&(key.clone(), rpc_id.to_owned()));
        }
    }

    pub(super) fn clear(&self) {
        self.agents.lock().clear();
    }
}

impl CheckedCaller<'_> {
    /// Records the ask under its agent's lease.
    pub(super) fn record(&mut self, key: &SessionKey, rpc_id: &str, agent: &AgentRef) {
        if let Some(lease) = self
            .agents
            .get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
        {
            lease.asks.insert((key.clone(), rpc_id.to_owned()));
        }
    }
}
