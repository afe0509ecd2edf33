//! The calls waiting on this node: indexed by session, the asks among them resolved
//! since the last renewal, and the sessions whose pump delivers their outcomes.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    time::Duration,
};

use askgate_core::{
    backend::events::outcome_of,
    domain::{Outcome, SessionKey},
};
use askgate_proto::v1::Resolved;
use parking_lot::Mutex;
use tokio::{sync::oneshot, time::Instant};

use crate::redis_engine::keys::wait_member;

/// The calls waiting on this node, what they await, and the pumps that serve them.
/// Lock order: `pumps`, then `calls`; `resolved_here` alone.
#[derive(Default)]
pub(super) struct Waiting {
    calls: Mutex<Calls>,
    /// Asks resolved since the last renewal, to take off this node's wait list then.
    resolved_here: Mutex<Vec<String>>,
    /// Sessions whose pump delivers outcomes to this node's calls.
    pumps: Mutex<HashSet<SessionKey>>,
    /// Where outcomes go instead of straight to their calls, when they must first be
    /// confirmed durable (`confirm.rs`).
    confirm: std::sync::OnceLock<ConfirmHook>,
}

/// An outcome on its way to a call, to be confirmed durable first.
pub(super) struct Delivery {
    pub key: SessionKey,
    pub rpc_id: String,
    pub request_id: String,
    pub outcome: Outcome,
    pub call: oneshot::Sender<Box<Outcome>>,
}

pub(super) type ConfirmHook = Box<dyn Fn(Delivery) + Send + Sync>;

/// An ask waited on here, as the node reports it at shutdown.
pub(super) struct WaitedAsk {
    pub key: SessionKey,
    pub rpc_id: String,
    /// A retry can reattach to it (it has a request_id).
    pub reattachable: bool,
}

impl Waiting {
    /// A new call waiting for the ask's outcome; `request_id` is the ask's (empty when
    /// no retry can ever reattach to it).
    pub(super) fn add(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        request_id: &str,
    ) -> oneshot::Receiver<Box<Outcome>> {
        let (outcome_tx, outcome_rx) = oneshot::channel();
        self.calls
            .lock()
            .entry(key, rpc_id, request_id)
            .senders
            .push(outcome_tx);
        outcome_rx
    }

    /// A call waiting for the ask's outcome again (its outcome was lost, `confirm.rs`).
    pub(super) fn add_call(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        request_id: &str,
        call: oneshot::Sender<Box<Outcome>>,
    ) {
        let mut calls = self.calls.lock();
        let entry = calls.entry(key, rpc_id, request_id);
        entry.senders.push(call);
        entry.stored = true;
    }

    /// From now on, outcomes go to `hook` to be confirmed before they reach their calls.
    pub(super) fn confirm_with(&self, hook: ConfirmHook) {
        let _ = self.confirm.set(hook);
    }

    /// Hands `outcome` to `call`, through the confirmation when there is one.
    pub(super) fn hand(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        request_id: &str,
        outcome: Outcome,
        call: oneshot::Sender<Box<Outcome>>,
    ) {
        match self.confirm.get() {
            Some(confirm) => confirm(Delivery {
                key: key.clone(),
                rpc_id: rpc_id.to_owned(),
                request_id: request_id.to_owned(),
                outcome,
                call,
            }),
            None => {
                let _ = call.send(Box::new(outcome));
            }
        }
    }

    /// Forgets the calls waiting for the ask, telling them nothing.
    pub(super) fn forget(&self, key: &SessionKey, rpc_id: &str) {
        self.calls.lock().remove(key, rpc_id);
    }

    /// Whether a call here still waits for the ask; forgets the ask when none does.
    pub(super) fn still_waited(&self, key: &SessionKey, rpc_id: &str) -> bool {
        let mut calls = self.calls.lock();
        let Some(wait) = calls.get_mut(key, rpc_id) else {
            return false;
        };
        wait.senders.retain(|s| !s.is_closed());
        let live = !wait.senders.is_empty();
        if !live {
            calls.remove(key, rpc_id);
        }
        live
    }

    /// Hands an outcome to the calls waiting for it here; the ask leaves this node's
    /// wait list with the next renewal.
    pub(super) fn deliver(&self, key: &SessionKey, resolved: &Resolved) {
        let Some(entry) = self.calls.lock().remove(key, &resolved.rpc_id) else {
            return;
        };
        self.resolved_here
            .lock()
            .push(wait_member(key, &resolved.rpc_id));
        let outcome = outcome_of(resolved);
        for waiter in entry.senders {
            self.hand(
                key,
                &resolved.rpc_id,
                &entry.request_id,
                outcome.clone(),
                waiter,
            );
        }
    }

    /// Tells the calls waiting for the ask that it was handed over (they retry with
    /// its request_id, through another node).
    pub(super) fn hand_over(&self, key: &SessionKey, rpc_id: &str) {
        if let Some(entry) = self.calls.lock().remove(key, rpc_id) {
            for waiter in entry.senders {
                let _ = waiter.send(Box::new(Outcome::disposed()));
            }
        }
    }

    /// The asks of the session waited on here.
    pub(super) fn rpc_ids(&self, key: &SessionKey) -> Vec<String> {
        self.calls.lock().rpc_ids(key)
    }

    /// Notes that the ask is in Redis (its registration returned, or it was joined).
    pub(super) fn stored(&self, key: &SessionKey, rpc_id: &str) {
        if let Some(entry) = self.calls.lock().get_mut(key, rpc_id) {
            entry.stored = true;
        }
    }

    /// Whether the ask waited on here is known to be in Redis.
    pub(super) fn is_stored(&self, key: &SessionKey, rpc_id: &str) -> bool {
        self.calls
            .lock()
            .get_mut(key, rpc_id)
            .is_some_and(|e| e.stored)
    }

    /// Every ask waited on here.
    pub(super) fn asks(&self) -> Vec<WaitedAsk> {
        self.calls.lock().asks()
    }

    /// How many asks are waited on here.
    pub(super) fn len(&self) -> usize {
        self.calls.lock().len
    }

    /// The wait-list members resolved since the last renewal, for this one.
    pub(super) fn take_resolved(&self) -> Vec<String> {
        std::mem::take(&mut *self.resolved_here.lock())
    }

    /// Gives back what a failed renewal took: the next one takes it off.
    pub(super) fn restore_resolved(&self, members: Vec<String>) {
        self.resolved_here.lock().extend(members);
    }

    /// Claims the session's pump: true when none ran, and the caller must start it.
    pub(super) fn start_pump(&self, key: &SessionKey) -> bool {
        self.pumps.lock().insert(key.clone())
    }

    /// The session's pump ended for another reason than idleness.
    pub(super) fn end_pump(&self, key: &SessionKey) {
        self.pumps.lock().remove(key);
    }

    /// Whether the session's pump goes on: while a call waits on the session, and
    /// `linger` after the last left (`idle_since` keeps when that was). Decided under
    /// the pumps lock: a registration that adds a call and then finds this pump gone
    /// starts a new one, never relies on a dying one.
    pub(super) fn pump_goes_on(
        &self,
        key: &SessionKey,
        idle_since: &mut Option<Instant>,
        linger: Duration,
    ) -> bool {
        let mut pumps = self.pumps.lock();
        if self.calls.lock().by_session.contains_key(key) {
            *idle_since = None;
        } else if idle_since.is_some_and(|t| t.elapsed() >= linger) {
            pumps.remove(key);
            return false;
        } else {
            idle_since.get_or_insert_with(Instant::now);
        }
        true
    }
}

/// The calls waiting on this node for one ask.
struct WaitEntry {
    senders: Vec<oneshot::Sender<Box<Outcome>>>,
    /// Empty when no retry can ever reattach to the ask.
    request_id: String,
    /// The ask is known to be in Redis (its registration returned): missing there
    /// later, it was lost.
    stored: bool,
}

/// The calls waiting on this node, by session and then rpc_id: a session's pump asks
/// whether anything here still waits on it at every event, which must not cost a scan
/// of every ask the node holds.
#[derive(Default)]
struct Calls {
    by_session: HashMap<SessionKey, HashMap<String, WaitEntry>>,
    len: usize,
}

impl Calls {
    /// The entry of (key, rpc_id), made when there is none.
    fn entry(&mut self, key: &SessionKey, rpc_id: &str, request_id: &str) -> &mut WaitEntry {
        match self
            .by_session
            .entry(key.clone())
            .or_default()
            .entry(rpc_id.to_owned())
        {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                self.len += 1;
                entry.insert(WaitEntry {
                    senders: Vec::new(),
                    request_id: request_id.to_owned(),
                    stored: false,
                })
            }
        }
    }

    fn get_mut(&mut self, key: &SessionKey, rpc_id: &str) -> Option<&mut WaitEntry> {
        self.by_session.get_mut(key)?.get_mut(rpc_id)
    }

    fn remove(&mut self, key: &SessionKey, rpc_id: &str) -> Option<WaitEntry> {
        let asks = self.by_session.get_mut(key)?;
        let removed = asks.remove(rpc_id)?;
        if asks.is_empty() {
            self.by_session.remove(key);
        }
        self.len -= 1;
        Some(removed)
    }

    fn rpc_ids(&self, key: &SessionKey) -> Vec<String> {
        self.by_session
            .get(key)
            .map(|asks| asks.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn asks(&self) -> Vec<WaitedAsk> {
        self.by_session
            .iter()
            .flat_map(|(key, asks)| {
                asks.iter().map(move |(rpc_id, e)| WaitedAsk {
                    key: key.clone(),
                    rpc_id: rpc_id.clone(),
                    reattachable: !e.request_id.is_empty(),
                })
            })
            .collect()
    }
}
