//! The [`Backend`] over Redis: any number of askgate nodes share the state in
//! [`RedisStore`] and see each other's events through [`Fanout`].
//!
//! Node-local parts: the calls waiting on this node (their outcome arrives as the
//! `resolved` event of their session, through a per-session pump), this node's
//! subscribers (live events merged with the session history by sequence number), and
//! short-lived presence keys that this node refreshes while it holds them: "someone
//! follows this session" (the unattended rule), "a call waits for this ask" (the
//! reattach grace), agent leases and exclusive holds. A node that dies stops refreshing,
//! so what it held expires.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{Question, Requested, Resolved, subscribe_response::Event};
use async_trait::async_trait;
use parking_lot::Mutex;
use prost::Message as _;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, warn};
use uuid::Uuid;

use super::{
    fanout::{Fanout, LiveEvent},
    keys::{parse_wait_member, wait_member},
    store::{
        RedisHookStore, RedisStore, RedisTarget, Renewal, SessionKeys, StoredEvent, TenantKeys,
        now_ms,
    },
};
use askgate_core::backend::{
    Asked, Attached, Backend, Budget, BudgetHold, Committed, EventStream, Holder, Noticed,
    Registered, RequestAbort, Scope, StateConfig, Stats, SubscribeOptions, Tap,
    events::{self, Message, cursor, message, outcome_of, parse_cursor},
};
use askgate_core::domain::{Error, NewAsk, Outcome, SessionKey};

mod config;
mod follow;
mod node;
mod register;
mod slots;
mod subscribe;
mod waiters;

pub use config::RedisConfig;
use follow::*;
use node::*;
use slots::*;
use waiters::*;

/// An agent lease held on this node: its incarnation, and who to tell when a newer
/// attach replaces it.
type LocalLease = (String, Option<oneshot::Sender<()>>);
type WaiterKey = (SessionKey, String);

/// The Redis [`Backend`].
#[derive(Clone)]
pub struct RedisBackend {
    node: Arc<Node>,
}

struct Node {
    id: String,
    store: RedisStore,
    fanout: Fanout,
    config: RedisConfig,
    /// The sizes, limits and windows of the state; every limit counts over all nodes.
    settings: StateConfig,
    /// Calls waiting on this node, by (session, rpc_id).
    waiters: Mutex<Waiters>,
    /// Asks resolved since the last renewal, to take off this node's wait list then.
    resolved_here: Mutex<Vec<String>>,
    /// Sessions whose pump delivers outcomes to this node's waiters.
    pumps: Mutex<HashSet<SessionKey>>,
    /// Presence keys this node keeps alive, with how many local holders each has.
    attended: Mutex<HashMap<String, usize>>,
    /// Open subscriptions that hold no presence (`SubscribeOptions::passive`).
    passive: AtomicUsize,
    /// Agent leases held on this node: (tenant, agent_id) → incarnation, and who to tell
    /// when a newer attach replaces it.
    leases: Mutex<HashMap<(String, String), LocalLease>>,
    exclusive: Mutex<HashMap<String, String>>,
    /// This node's subscriber slots (see [`SubscriberSlot`]): member → the session's
    /// (or the tenant's) `subs` key.
    subscribers: Mutex<HashMap<String, String>>,
    /// Sessions this node's subscribers follow, in their tenant's held sessions:
    /// (that key, session_id) → how many local subscribers. Renewed with the leases.
    held_sessions: Mutex<HashMap<(String, String), usize>>,
    closed: AtomicBool,
    /// Set at shutdown: subscriptions deliver what was written, then end.
    closing: tokio::sync::watch::Sender<bool>,
    /// Where the events this node commits are reported, once set.
    tap: std::sync::OnceLock<Tap>,
}

impl RedisBackend {
    /// Connects a node to the Redis of `config`, its state sized by `settings`.
    pub async fn connect(config: RedisConfig, settings: StateConfig) -> anyhow::Result<Self> {
        let target = RedisTarget {
            url: config.url.clone(),
            cluster: config.cluster,
            ca_pem: config.ca_pem.clone(),
        };
        let store = RedisStore::connect(target.clone(), settings.clone()).await?;
        let fanout = Fanout::connect(target.clone()).await?;
        let id = Uuid::new_v4().simple().to_string();
        // The node's lease, before any ask it takes can rely on it.
        store.start_node_lease(&id, config.lease).await?;
        let node = Arc::new(Node {
            id,
            store,
            fanout,
            config,
            settings,
            waiters: Mutex::default(),
            resolved_here: Mutex::default(),
            pumps: Mutex::default(),
            attended: Mutex::default(),
            passive: AtomicUsize::new(0),
            leases: Mutex::default(),
            exclusive: Mutex::default(),
            subscribers: Mutex::default(),
            held_sessions: Mutex::default(),
            closed: AtomicBool::new(false),
            closing: tokio::sync::watch::channel(false).0,
            tap: std::sync::OnceLock::new(),
        });
        tokio::spawn(refresh_until_dropped(Arc::downgrade(&node)));
        Ok(Self { node })
    }

    /// The webhook store on this backend's Redis, seen by every node.
    pub fn hook_store(&self, limits: askgate_core::backend::hooks::StoreLimits) -> RedisHookStore {
        self.node.store.hooks(limits)
    }
}

impl RedisBackend {
    /// Resolves the asks an agent made under `incarnation`: its lease ended.
    async fn abort_agent_asks(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let node = &self.node;
        for (session_id, rpc_id) in node
            .store
            .take_agent_asks(tenant, agent_id, incarnation)
            .await
        {
            let key = SessionKey::new(tenant, session_id.as_str());
            // NOT_PENDING when it was resolved meanwhile: nothing to do.
            let _ = self.claim(&key, &rpc_id, Outcome::aborted()).await;
        }
    }
}

#[async_trait]
impl Backend for RedisBackend {
    async fn hold(&self, tenant: &str, budget: Budget, max: usize) -> Result<BudgetHold, Error> {
        let slot = SubscriberSlot::take(
            &self.node,
            TenantKeys::new(tenant).budget(budget.name()),
            max,
            |max| budget.exhausted(max),
        )
        .await?;
        Ok(Box::new(slot))
    }

    async fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        // Once the script has stored the ask, the steps after it must finish even if
        // the caller goes away meanwhile (its call cancelled): otherwise the ask would
        // be stored with nobody to abort it. So registration runs on its own task.
        let (result_tx, result_rx) = oneshot::channel();
        let this = self.clone();
        let key = ask.key.clone();
        let grace = ask.reattach_grace;
        tokio::spawn(async move {
            let result = this.register_now(ask).await;
            if let Err(Ok(registered)) = result_tx.send(result) {
                // The caller is gone: abort at once, or leave it to the reattach grace
                // (this node stops renewing it, so the sweep aborts it after that).
                if grace.is_zero()
                    && let Err(e) = this
                        .claim(&key, &registered.rpc_id, Outcome::aborted())
                        .await
                {
                    // Not on this node's renewed list any more: the sweep aborts it.
                    debug!(rpc_id = %registered.rpc_id, "aborting a dropped ask failed: {e}");
                }
            }
        });
        result_rx
            .await
            .map_err(|_| Error::Internal("registration task ended without a result".into()))?
    }

    async fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, Error> {
        Ok(self.node.store.pending_ask(key, rpc_id).await?.questions)
    }

    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error> {
        self.node.claim(key, rpc_id, outcome).await
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        let node = &self.node;
        let waiting_here = {
            let mut waiters = node.waiters.lock();
            match waiters.get_mut(key, rpc_id) {
                Some(wait) => {
                    wait.senders.retain(|s| !s.is_closed());
                    let live = !wait.senders.is_empty();
                    if !live {
                        waiters.remove(key, rpc_id);
                    }
                    live
                }
                None => false,
            }
        };
        if waiting_here {
            return Ok(());
        }
        node.store.unlist_waiter(&node.id, key, rpc_id).await?;
        if !node.store.live_waiters(key, rpc_id).await?.is_empty() {
            return Ok(());
        }
        self.claim(key, rpc_id, Outcome::aborted()).await
    }

    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, Error> {
        self.subscribe_now(scope, options).await
    }

    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error> {
        self.node.store.pending(key).await
    }

    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        if self.node.closed.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        self.node
            .store
            .abort_request(key, request_id, &resolved)
            .await
    }

    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        let node = &self.node;
        if node.closed.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        let incarnation = Uuid::now_v7().to_string();
        let previous = node
            .store
            .attach_agent(
                tenant,
                agent_id,
                &incarnation,
                parent_agent_id,
                holder,
                Duration::from_millis(node.lease_ms()),
            )
            .await?;
        let (superseded_tx, superseded) = oneshot::channel();
        let replaced = node.leases.lock().insert(
            (tenant.to_owned(), agent_id.to_owned()),
            (incarnation.clone(), Some(superseded_tx)),
        );
        if let Some((_, Some(old))) = replaced {
            let _ = old.send(());
        }
        if let Some(previous) = previous {
            debug!(agent_id, old = %previous, "attach supersedes the previous lease");
            self.abort_agent_asks(tenant, agent_id, &previous).await;
        }
        Ok(Attached {
            incarnation,
            superseded,
        })
    }

    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let node = &self.node;
        {
            let mut leases = node.leases.lock();
            let key = (tenant.to_owned(), agent_id.to_owned());
            if leases.get(&key).is_some_and(|(inc, _)| inc == incarnation) {
                leases.remove(&key);
            }
        }
        // On failure the lease expires: nobody renews it now.
        node.store
            .end_agent_lease(tenant, agent_id, incarnation)
            .await;
        self.abort_agent_asks(tenant, agent_id, incarnation).await;
    }

    async fn healthy(&self) -> bool {
        // Every connection works (after an outage each one fails once, then the
        // connection manager replaces it), and the node's own subscription still
        // delivers (the probe).
        let node = &self.node;
        let check = async {
            let store = node.store.ping().await;
            let probe = node.fanout.probe(&node.store).await;
            store && probe
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(2), check).await,
            Ok(true)
        )
    }

    async fn stats(&self) -> Stats {
        let node = &self.node;
        Stats {
            pending: node.waiters.lock().len(),
            subscribers: node.attended.lock().values().sum::<usize>()
                + node.passive.load(Ordering::Relaxed),
        }
    }

    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Result<Option<Noticed>, Error> {
        let Some(sent) = self.node.store.notice(key, rpc_id, &notice).await? else {
            return Ok(None);
        };
        let requested = Requested::decode(sent.asked.as_slice())
            .map_err(|e| Error::Internal(format!("corrupt ask in redis: {e}")))?;
        Ok(Some(Noticed {
            message: message(cursor(&sent.epoch, sent.seq), notice),
            requested,
        }))
    }

    fn set_tap(&self, tap: Tap) {
        let _ = self.node.tap.set(tap);
    }

    async fn dispose_all(&self) {
        let node = &self.node;
        node.closed.store(true, Ordering::Release);
        let waiting: Vec<(WaiterKey, bool)> = node
            .waiters
            .lock()
            .iter()
            .map(|(key, rpc_id, e)| ((key.clone(), rpc_id.clone()), !e.request_id.is_empty()))
            .collect();
        for ((key, rpc_id), reattachable) in waiting {
            if reattachable {
                // Handed over: the call is told to retry with its request_id (through
                // another node); the ask stays pending, and the survivors abort it if
                // nobody comes back within its reattach grace.
                if let Some(entry) = node.waiters.lock().remove(&key, &rpc_id) {
                    for waiter in entry.senders {
                        let _ = waiter.send(Outcome::disposed());
                    }
                }
            } else {
                // Nobody can reattach to an ask without a request_id: dispose of it. Should
                // that fail, the survivors abort it once this node's lease has ended.
                if let Err(e) = self.claim(&key, &rpc_id, Outcome::disposed()).await {
                    debug!(%rpc_id, "disposing of an ask failed: {e}");
                }
            }
        }
        // End this node's lease now: the survivors take over its wait list at once
        // rather than a lease later (each handed-over ask gets its reattach grace).
        node.store.end_node_lease(&node.id).await;
        let _ = node.closing.send(true);
    }
}

#[cfg(test)]
mod tests;
