//! What this node holds in Redis only as long as it renews it: presence ("someone
//! follows this session"), agent leases, exclusive holds, subscriber slots and the
//! sessions its subscribers follow. A node that dies stops renewing, so what it held
//! expires.

use std::{
    collections::{HashMap, HashSet},
    sync::atomic::{AtomicUsize, Ordering},
};

use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::redis_engine::store::Renewal;

/// An agent of a tenant: (tenant, agent_id).
pub(super) type AgentKey = (String, String);

/// A session among its tenant's held sessions: (the tenant's `held` set, session_id).
pub(super) type HeldSession = (String, String);

/// This node's leases, each with how many local holders keep it.
#[derive(Default)]
pub(super) struct Leases {
    /// Presence keys, with how many local subscriptions hold each.
    attended: Mutex<HashMap<String, usize>>,
    /// Open subscriptions that hold no presence (`SubscribeOptions::passive`).
    passive: AtomicUsize,
    /// Agents attached through this node: their incarnation, and who to tell when a
    /// newer attach replaces it.
    agents: Mutex<HashMap<AgentKey, AgentLease>>,
    /// Sessions' exclusive holds this node has.
    exclusive: Mutex<HashSet<String>>,
    /// Subscriber slots (see `SubscriberSlot`): member → the session's (or the
    /// tenant's) `subs` key.
    slots: Mutex<HashMap<String, String>>,
    /// Sessions this node's subscribers follow, with how many local subscribers each.
    held_sessions: Mutex<HashMap<HeldSession, usize>>,
}

/// An agent lease held on this node.
struct AgentLease {
    incarnation: String,
    superseded: Option<oneshot::Sender<()>>,
}

impl Leases {
    /// One more local subscription makes the session (or tenant) of `key` attended.
    pub(super) fn attend(&self, key: &str) {
        *self.attended.lock().entry(key.to_owned()).or_default() += 1;
    }

    /// One subscription that attended through `key` ended. The key itself expires after
    /// the reconnect grace once nobody renews it: that is the grace.
    pub(super) fn leave(&self, key: &str) {
        release(&mut self.attended.lock(), key);
    }

    pub(super) fn join_passive(&self) {
        self.passive.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn leave_passive(&self) {
        self.passive.fetch_sub(1, Ordering::Relaxed);
    }

    /// The subscriptions open on this node.
    pub(super) fn subscribers(&self) -> usize {
        self.attended.lock().values().sum::<usize>() + self.passive.load(Ordering::Relaxed)
    }

    /// The agent is attached through this node under `incarnation`; the receiver hears
    /// when a newer attach replaces it. A lease it replaces here is told at once.
    pub(super) fn attach_agent(&self, agent: AgentKey, incarnation: &str) -> oneshot::Receiver<()> {
        let (superseded_tx, superseded) = oneshot::channel();
        let lease = AgentLease {
            incarnation: incarnation.to_owned(),
            superseded: Some(superseded_tx),
        };
        if let Some(replaced) = self.agents.lock().insert(agent, lease) {
            replaced.supersede();
        }
        superseded
    }

    /// The agent's lease under `incarnation` ended (a newer one stays).
    pub(super) fn detach_agent(&self, agent: &AgentKey, incarnation: &str) {
        let mut agents = self.agents.lock();
        if agents
            .get(agent)
            .is_some_and(|lease| lease.incarnation == incarnation)
        {
            agents.remove(agent);
        }
    }

    /// The agents attached here, with their incarnations.
    pub(super) fn agents(&self) -> Vec<(AgentKey, String)> {
        self.agents
            .lock()
            .iter()
            .map(|(agent, lease)| (agent.clone(), lease.incarnation.clone()))
            .collect()
    }

    /// A newer attach elsewhere replaced the agent's lease here: it is over.
    pub(super) fn supersede_agent(&self, agent: &AgentKey) {
        if let Some(lease) = self.agents.lock().remove(agent) {
            lease.supersede();
        }
    }

    pub(super) fn hold_exclusive(&self, hold: &str) {
        self.exclusive.lock().insert(hold.to_owned());
    }

    pub(super) fn release_exclusive(&self, hold: &str) {
        self.exclusive.lock().remove(hold);
    }

    pub(super) fn add_slot(&self, member: &str, subs: String) {
        self.slots.lock().insert(member.to_owned(), subs);
    }

    /// The slot's `subs` key, when this node still holds it.
    pub(super) fn remove_slot(&self, member: &str) -> Option<String> {
        self.slots.lock().remove(member)
    }

    pub(super) fn hold_session(&self, held: &HeldSession) {
        *self.held_sessions.lock().entry(held.clone()).or_default() += 1;
    }

    /// No command: the entry expires a lease after its last renewal.
    pub(super) fn release_session(&self, held: &HeldSession) {
        release(&mut self.held_sessions.lock(), held);
    }

    /// Everything to renew now, with the asks resolved here since the last renewal.
    /// `alive`: the node still renews its own lease (a drained node ended it).
    pub(super) fn renewal(&self, resolved: Vec<String>, alive: bool) -> Renewal {
        Renewal {
            presence: self
                .attended
                .lock()
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, _)| k.clone())
                .collect(),
            resolved,
            alive,
            exclusive: self.exclusive.lock().iter().cloned().collect(),
            slots: self
                .slots
                .lock()
                .iter()
                .map(|(member, key)| (member.clone(), key.clone()))
                .collect(),
            held_sessions: self.held_sessions.lock().keys().cloned().collect(),
            agents: self.agents.lock().keys().cloned().collect(),
        }
    }
}

impl AgentLease {
    /// Tells the attach stream that its lease is over (it may have ended already:
    /// nobody to tell).
    fn supersede(mut self) {
        if let Some(superseded) = self.superseded.take() {
            let _ = superseded.send(());
        }
    }
}

/// One local holder of `key` fewer; the entry goes with its last.
fn release<K, Q>(counts: &mut HashMap<K, usize>, key: &Q)
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    if let Some(count) = counts.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(key);
        }
    }
}
