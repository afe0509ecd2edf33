//! One askgate node on the shared Redis: its connections, the calls waiting on it, the
//! leases it renews, and what it does that spans them (claiming an ask, handing its
//! outcome to the calls here, checking a caller, draining).

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use askgate_core::{
    backend::{
        Asked, Committed, OutboxEntry, StateConfig, Stats, Tap,
        events::{self, cursor, message},
    },
    domain::{Error, Outcome, SessionKey},
};
use askgate_proto::v1::{AgentRef, subscribe_response::Event};
use tokio::sync::watch;
use tracing::debug;
use uuid::Uuid;

use super::{
    RedisConfig,
    leases::{HeldSession, Leases},
    waiters::Waiting,
};
use crate::redis_engine::{
    fanout::Fanout,
    store::{RedisStore, StoredEvent, TenantKeys, now_ms},
};

/// A node: what it shares with every node (the store, the fanout) and what is its own.
pub(super) struct Node {
    id: String,
    store: RedisStore,
    fanout: Fanout,
    config: RedisConfig,
    /// The sizes, limits and windows of the state; every limit counts over all nodes.
    settings: StateConfig,
    waiting: Waiting,
    leases: Leases,
    closed: AtomicBool,
    /// Set at shutdown: subscriptions deliver what was written, then end.
    closing: watch::Sender<bool>,
    /// Where the events this node commits are reported, once set.
    tap: OnceLock<Tap>,
}

impl Node {
    /// Connects a node to the Redis of `config` and takes its lease. What keeps it
    /// alive (confirming deliveries, renewing what it holds) is started by the backend
    /// that owns it, which knows those tasks; the node is what they share.
    pub(super) async fn start(
        config: RedisConfig,
        settings: StateConfig,
    ) -> anyhow::Result<Arc<Self>> {
        let target = config.target();
        let store = RedisStore::connect(target.clone(), settings.clone())
            .await?
            .waiting(&target, config.wait)
            .await?;
        let fanout = Fanout::connect(target).await?;
        let id = Uuid::new_v4().simple().to_string();
        // The node's lease, before any ask it takes can rely on it.
        store.start_node_lease(&id, config.lease).await?;
        let node = Arc::new(Self {
            id,
            store,
            fanout,
            config,
            settings,
            waiting: Waiting::default(),
            leases: Leases::default(),
            closed: AtomicBool::new(false),
            closing: watch::channel(false).0,
            tap: OnceLock::new(),
        });
        Ok(node)
    }

    pub(super) fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn store(&self) -> &RedisStore {
        &self.store
    }

    pub(super) fn fanout(&self) -> &Fanout {
        &self.fanout
    }

    pub(super) fn settings(&self) -> &StateConfig {
        &self.settings
    }

    pub(super) fn waiting(&self) -> &Waiting {
        &self.waiting
    }

    pub(super) fn leases(&self) -> &Leases {
        &self.leases
    }

    /// How long this node's leases last without a renewal.
    pub(super) fn lease(&self) -> Duration {
        self.config.lease
    }

    pub(super) fn lease_ms(&self) -> u64 {
        (self.config.lease.as_millis() as u64).max(1)
    }

    /// SHUTTING_DOWN once the node drains.
    pub(super) fn check_open(&self) -> Result<(), Error> {
        match self.closed.load(Ordering::Acquire) {
            true => Err(Error::ShuttingDown),
            false => Ok(()),
        }
    }

    /// Whether the node still renews its own lease (a drained node ended it).
    pub(super) fn alive(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }

    /// Changes to true when the node drains.
    pub(super) fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    pub(super) fn set_tap(&self, tap: Tap) {
        // Deliveries are queued from now on: committed events go through the outbox.
        self.store.use_outbox();
        let _ = self.tap.set(tap);
    }

    /// Reports an event this node committed, once a tap is set.
    pub(super) fn report(&self, committed: impl FnOnce() -> Committed) {
        if let Some(tap) = self.tap.get() {
            tap.report(committed());
        }
    }

    pub(super) fn stats(&self) -> Stats {
        Stats {
            pending: self.waiting.len(),
            subscribers: self.leases.subscribers(),
        }
    }

    /// First wins (the claim script), then local waiters get the outcome at once (they
    /// would hear it from the pump too) and the ask leaves the sweep list, off the
    /// caller's path (a member left behind is swept as due, harmlessly).
    pub(super) async fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        let resolved = events::resolved(key, rpc_id, &outcome);
        // The script also deletes the ask's wait mark. Should the ask be on the sweep
        // list (its first node died), it stays there until due, when the sweep finds
        // it resolved: nothing is added to every claim for that rare case.
        let claimed = self.store.claim(key, &resolved).await?;
        self.waiting.deliver(key, &resolved);
        self.report(|| Committed {
            tenant: key.tenant.clone(),
            outbox: Some(outbox_entry(key, &claimed.epoch, claimed.seq)),
            message: message(
                cursor(&claimed.epoch, claimed.seq),
                Event::Resolved(resolved),
            ),
            asked: Some(Asked::Encoded(claimed.asked)),
        });
        Ok(())
    }

    /// Waiters whose ask resolved while this node was not listening (a lag, a
    /// reconnect): their outcome is in the history, or recorded.
    pub(super) async fn recover_waiters(&self, key: &SessionKey) {
        let rpc_ids = self.waiting.rpc_ids(key);
        if rpc_ids.is_empty() {
            return;
        }
        let Ok(events) = self.store.history(key).await else {
            return;
        };
        let mut unresolved: std::collections::HashSet<String> = rpc_ids.into_iter().collect();
        for event in events {
            if let StoredEvent::Resolved(resolved) = event
                && unresolved.remove(&resolved.rpc_id)
            {
                self.waiting.deliver(key, &resolved);
            }
        }
        // An ask neither resolved nor pending is gone: a Redis failover lost it (its
        // registration was not yet on the replica promoted). Its calls are handed
        // over: they retry with its request_id, which registers it again.
        for rpc_id in unresolved {
            if self.waiting.is_stored(key, &rpc_id)
                && let Err(Error::NotPending { settled: None }) =
                    self.store.pending_ask(key, &rpc_id).await
            {
                tracing::warn!(%rpc_id, "an ask waited on here is gone from Redis (lost in a failover?)");
                self.waiting.hand_over(key, &rpc_id);
            }
        }
    }

    /// Semantics 7: the agent is attached with that incarnation, its parent is not.
    pub(super) async fn check_caller(&self, tenant: &str, agent: &AgentRef) -> Result<(), Error> {
        let (incarnation, parent) = self.store.agent(tenant, &agent.agent_id).await?;
        let lease = incarnation
            .as_deref()
            .map(|incarnation| (incarnation, parent.as_deref().unwrap_or_default()));
        if let Some(parent) = askgate_core::backend::live_caller(agent, lease)?
            && self.store.agent_attached(tenant, parent).await?
        {
            return Err(Error::DelegatedCaller);
        }
        Ok(())
    }

    /// Lists an ask as waited on here: in this node's wait list (for the survivors,
    /// should it die) and in the ask's mark (kept `mark_ttl`), with its reattach grace.
    pub(super) async fn list_waiter(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        grace: Duration,
        mark_ttl: Duration,
    ) -> Result<(), Error> {
        self.store
            .list_waiter(&self.id, key, rpc_id, grace, mark_ttl)
            .await
    }

    /// Takes the ask off this node's wait list and mark, off the caller's path: an
    /// entry left behind is swept as due (the ask resolved or waited on elsewhere).
    pub(super) fn unlist(self: &Arc<Self>, key: &SessionKey, rpc_id: &str) {
        let (node, key, rpc_id) = (self.clone(), key.clone(), rpc_id.to_owned());
        tokio::spawn(async move {
            if let Err(e) = node.store.unlist_waiter(&node.id, &key, &rpc_id).await {
                debug!(%rpc_id, "unlisting a waiter failed (swept later): {e}");
            }
        });
    }

    /// Holds a presence key (renewed while held) and sets it now, so the session counts
    /// as attended from this subscription on.
    pub(super) async fn hold_attended(&self, key: &str) -> Result<(), Error> {
        self.leases.attend(key);
        self.store
            .set_presence(key, &self.id, self.settings.reconnect_grace)
            .await
    }

    /// Admits a followed session among its tenant's sessions holding state (refused
    /// TOO_MANY_SESSIONS when the tenant holds as many as it may) and renews it while
    /// this node follows it.
    pub(super) async fn hold_session(&self, key: &SessionKey) -> Result<HeldSession, Error> {
        self.store
            .admit_session(key, now_ms() + self.lease_ms())
            .await?;
        let held = (
            TenantKeys::new(&key.tenant).held_sessions(),
            key.session_id.to_string(),
        );
        self.leases.hold_session(&held);
        Ok(held)
    }

    /// Takes the session's exclusive hold for this node: DUPLICATE_PROVIDER when
    /// another subscription holds it.
    pub(super) async fn hold_exclusive(&self, hold: &str) -> Result<(), Error> {
        if !self
            .store
            .take_exclusive(hold, &self.id, self.config.lease)
            .await?
        {
            return Err(Error::DuplicateProvider);
        }
        self.leases.hold_exclusive(hold);
        Ok(())
    }

    /// Lets an exclusive hold go at once (else it expires within a lease).
    pub(super) async fn release_exclusive(&self, hold: &str) {
        self.leases.release_exclusive(hold);
        self.store.release_exclusive(hold).await;
    }

    /// Drains the node: asks a retry can reattach to are handed over (their calls are
    /// told to retry through another node; the survivors abort them if nobody comes
    /// back within their reattach grace), the others are disposed of; then the node's
    /// lease ends and subscriptions deliver what was written, then end.
    pub(super) async fn drain(&self) {
        self.closed.store(true, Ordering::Release);
        for ask in self.waiting.asks() {
            if ask.reattachable {
                self.waiting.hand_over(&ask.key, &ask.rpc_id);
            } else if let Err(e) = self.claim(&ask.key, &ask.rpc_id, Outcome::disposed()).await {
                // The survivors abort it once this node's lease has ended.
                debug!(rpc_id = %ask.rpc_id, "disposing of an ask failed: {e}");
            }
        }
        // End this node's lease now: the survivors take over its wait list at once
        // rather than a lease later (each handed-over ask gets its reattach grace).
        self.store.end_node_lease(&self.id).await;
        let _ = self.closing.send(true);
    }
}

/// The outbox entry of the session's event `seq` of `epoch`.
pub(super) fn outbox_entry(key: &SessionKey, epoch: &str, seq: u64) -> OutboxEntry {
    OutboxEntry {
        key: key.clone(),
        id: format!("{epoch} {seq}"),
    }
}
