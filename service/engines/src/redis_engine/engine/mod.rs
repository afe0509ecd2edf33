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

use std::{sync::Arc, time::Duration};

use askgate_core::{
    backend::{
        Attached, Backend, Budget, BudgetHold, EventStream, Holder, Noticed, Registered,
        RequestAbort, Scope, StateConfig, Stats, SubscribeOptions, Tap,
        events::{cursor, message},
    },
    domain::{Error, NewAsk, Outcome, SessionKey},
};
use askgate_proto::v1::{Requested, Resolved, subscribe_response::Event};
use async_trait::async_trait;
use prost::Message as _;
use tokio::sync::oneshot;
use tracing::{Instrument, debug};
use uuid::Uuid;

use super::store::{RedisHookStore, TenantKeys};

mod config;
mod confirm;
mod follow;
mod leases;
mod node;
mod outbox;
mod pump;
mod register;
mod slots;
mod subscribe;
mod upkeep;
mod waiters;

pub use config::RedisConfig;
use node::Node;
use slots::SubscriberSlot;

/// The Redis [`Backend`].
#[derive(Clone)]
pub struct RedisBackend {
    node: Arc<Node>,
}

impl RedisBackend {
    /// Connects a node to the Redis of `config`, its state sized by `settings`, and
    /// starts what runs beside it: the confirmations of its deliveries and the upkeep
    /// that renews what it holds (until the node is dropped).
    pub async fn connect(config: RedisConfig, settings: StateConfig) -> anyhow::Result<Self> {
        let node = Node::start(config, settings).await?;
        confirm::install(&node);
        tokio::spawn(upkeep::renew_until_dropped(Arc::downgrade(&node)));
        Ok(Self { node })
    }

    /// The webhook store on this backend's Redis, seen by every node.
    pub fn hook_store(&self, limits: askgate_core::backend::hooks::StoreLimits) -> RedisHookStore {
        self.node.store().hooks(limits)
    }

    /// The audit log, in the same Redis.
    pub fn audit_store(&self) -> crate::redis_engine::store::RedisAuditStore {
        self.node.store().audit()
    }

    /// Resolves the asks an agent made under `incarnation`: its lease ended.
    async fn abort_agent_asks(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        for (session_id, rpc_id) in self
            .node
            .store()
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
        let registration = async move {
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
        };
        // In the caller's span: its log lines, and its trace's store calls.
        tokio::spawn(registration.in_current_span());
        result_rx
            .await
            .map_err(|_| Error::Internal("registration task ended without a result".into()))?
    }

    async fn pending(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error> {
        self.node.store().pending_ask(key, rpc_id).await
    }

    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error> {
        self.node.claim(key, rpc_id, outcome).await
    }

    async fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: askgate_core::domain::quorum::Vote,
        needed: u32,
        // On Redis the log is on other slots: the caller appends the record.
        _record: Option<askgate_core::backend::audit::AuditEntry>,
    ) -> Result<askgate_core::domain::quorum::Voted, Error> {
        self.node.store().vote(key, rpc_id, vote, needed).await
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        let node = &self.node;
        if node.waiting().still_waited(key, rpc_id) {
            return Ok(());
        }
        node.store().unlist_waiter(node.id(), key, rpc_id).await?;
        if !node.store().live_waiters(key, rpc_id).await?.is_empty() {
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
        self.node.store().pending(key).await
    }

    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        self.node.check_open()?;
        self.node
            .store()
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
        node.check_open()?;
        let incarnation = Uuid::now_v7().to_string();
        let previous = node
            .store()
            .attach_agent(
                tenant,
                agent_id,
                &incarnation,
                parent_agent_id,
                holder,
                Duration::from_millis(node.lease_ms()),
            )
            .await?;
        let superseded = node
            .leases()
            .attach_agent((tenant.to_owned(), agent_id.to_owned()), &incarnation);
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
        node.leases()
            .detach_agent(&(tenant.to_owned(), agent_id.to_owned()), incarnation);
        // On failure the lease expires: nobody renews it now.
        node.store()
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
            let store = node.store().ping().await;
            let probe = node.fanout().probe(node.store()).await;
            store && probe
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(2), check).await,
            Ok(true)
        )
    }

    async fn stats(&self) -> Stats {
        self.node.stats()
    }

    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Result<Option<Noticed>, Error> {
        let Some(sent) = self.node.store().notice(key, rpc_id, &notice).await? else {
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
        self.node.set_tap(tap);
    }

    async fn queued(&self, done: Vec<askgate_core::backend::OutboxEntry>) {
        outbox::queued(&self.node, done).await;
    }

    async fn dispose_all(&self) {
        self.node.drain().await;
    }
}

#[cfg(test)]
mod tests;
