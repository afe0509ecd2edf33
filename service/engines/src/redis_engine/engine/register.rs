//! Registering an ask on this node: listed where survivors find it, followed before
//! it is stored (so that no answer can be missed), stored by one script, and waited
//! on here; every exit but a new ask's takes back what it put in place ([`Rollback`]).

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_core::{
    backend::{
        Backend, Committed, Registered,
        events::{self, cursor, message, outcome_of},
    },
    domain::{Error, NewAsk, Outcome, SessionKey},
};
use askgate_proto::v1::{AgentRef, Requested, Unattended, subscribe_response::Event};
use tokio::sync::oneshot;
use tracing::debug;
use uuid::Uuid;

use super::{RedisBackend, node::Node, pump};
use crate::redis_engine::{
    fanout::SESSION_BUFFER,
    store::{Listing, Registration, SessionKeys},
};

impl RedisBackend {
    pub(super) async fn register_now(&self, mut ask: NewAsk) -> Result<Registered, Error> {
        let node = &self.node;
        node.check_open()?;
        let key = ask.key.clone();
        if let Some(agent) = &ask.agent {
            node.check_caller(&key.tenant, agent).await?;
        }
        let rpc_id = Uuid::now_v7().to_string();
        let spec = wait_spec(node, &ask);
        let must_be_attended = ask.if_unattended == Unattended::Fail;
        // Whatever this call puts in place under `rpc_id` is taken back on every exit
        // but a new ask's (the guard is disarmed there).
        let mut rollback = Rollback::new(node, &key, &rpc_id);
        // On one Redis the registration script lists the ask on this node's wait list
        // and checks Semantics 8 itself. On a cluster the wait list lives in another
        // slot: the ask goes on it before it exists (if this node dies at any point
        // after the script, the survivors still find it), with the unattended check in
        // the same round trip. Its finding goes to the script, which refuses a new ask
        // unattended but lets a retry by request_id find its own (Semantics 10 first).
        let mut attended = None;
        if node.store().is_cluster() {
            // Whatever part of the listing is written is swept as due if it fails.
            rollback.listed = true;
            let followed = list_first(node, &key, &rpc_id, &spec, must_be_attended).await?;
            if !followed && ask.request_id.is_empty() {
                return Err(Error::NoProvider);
            }
            attended = Some(followed);
        }
        let fingerprint = (!ask.request_id.is_empty()).then(|| ask.fingerprint());
        let requested = events::requested(&rpc_id, &mut ask);
        // Listen first and wait under the new id, so an answer given the instant the
        // ask is stored (on any node) cannot be missed.
        let channel = SessionKeys::new(&key).channel();
        let live = node.fanout().follow(&channel, SESSION_BUFFER).await?;
        let outcome = node.waiting().add(&key, &rpc_id, &spec.request_id);
        rollback.waiting = true;
        let listing = Listing {
            node_id: node.id(),
            grace: spec.grace,
            mark_ttl: spec.mark_ttl,
            must_be_attended,
            attended,
        };
        let registered = node
            .store()
            .register(
                &key,
                &requested,
                &ask.request_id,
                fingerprint,
                Some(&listing),
            )
            .await;
        // The script lists only a new ask; after an error, whatever it wrote is taken
        // off (or swept as due).
        rollback.listed |= registered.is_err();
        let registration = match registered {
            Ok(registration) => registration,
            Err(e) => {
                drop(rollback);
                // Nothing waits on the channel this call followed: let it go.
                drop(live);
                node.fanout().release(&channel).await;
                return Err(e);
            }
        };
        if let Registration::New { .. } = registration {
            rollback.disarm();
        } else {
            drop(rollback);
        }
        let (rpc_id, outcome) = self
            .wait_on(&key, registration, rpc_id, outcome, requested, &spec)
            .await?;
        pump::ensure(node, &key, live);
        if let Some(agent) = &ask.agent {
            self.bind_to_agent(&key, &rpc_id, agent).await;
        }
        Ok(Registered { rpc_id, outcome })
    }

    /// What the call waits on for what the script did: its new ask (reported to the
    /// tap), the pending ask its request_id names, or that ask's recorded outcome.
    async fn wait_on(
        &self,
        key: &SessionKey,
        registration: Registration,
        rpc_id: String,
        outcome: oneshot::Receiver<Box<Outcome>>,
        requested: Requested,
        spec: &WaitSpec,
    ) -> Result<(String, oneshot::Receiver<Box<Outcome>>), Error> {
        let node = &self.node;
        match registration {
            Registration::New { seq, epoch } => {
                node.waiting().stored(key, &rpc_id);
                node.report(|| Committed {
                    tenant: key.tenant.clone(),
                    outbox: Some(super::node::outbox_entry(key, &epoch, seq)),
                    message: message(cursor(&epoch, seq), Event::Requested(requested)),
                    asked: None,
                });
                Ok((rpc_id, outcome))
            }
            Registration::Joined { rpc_id: joined } => {
                let outcome = node.waiting().add(key, &joined, &spec.request_id);
                node.waiting().stored(key, &joined);
                // Waited on here from now on, before a sweep can find the ask's grace
                // (after its first node died) over.
                if let Err(e) = node
                    .list_waiter(key, &joined, spec.grace, spec.mark_ttl)
                    .await
                {
                    node.waiting().forget(key, &joined);
                    return Err(e);
                }
                // It may have resolved between the script and the wait: recover.
                if node.store().pending_ask(key, &joined).await.is_err() {
                    node.recover_waiters(key).await;
                }
                Ok((joined, outcome))
            }
            Registration::Recorded { rpc_id, resolved } => {
                let (outcome_tx, outcome) = oneshot::channel();
                let recorded = outcome_of(&resolved);
                node.waiting()
                    .hand(key, &rpc_id, &spec.request_id, recorded, outcome_tx);
                Ok((rpc_id, outcome))
            }
        }
    }

    /// Counts the ask among its agent's, so that the agent's detach aborts it.
    async fn bind_to_agent(&self, key: &SessionKey, rpc_id: &str, agent: &AgentRef) {
        let node = &self.node;
        node.store()
            .add_agent_ask(
                &key.tenant,
                &agent.agent_id,
                &agent.incarnation,
                key,
                rpc_id,
                node.lease() * 6,
            )
            .await;
        // A detach that ran meanwhile did not see this ask: abort it now. A failed
        // claim leaves it to the call: its waiter still holds it, and the sweep aborts
        // it once its caller is gone past the reattach grace.
        if node.check_caller(&key.tenant, agent).await.is_err()
            && let Err(e) = self.claim(key, rpc_id, Outcome::aborted()).await
        {
            debug!(%rpc_id, "aborting an ask of a detached agent failed: {e}");
        }
    }
}

/// What a new waiter needs to know of its ask.
struct WaitSpec {
    grace: Duration,
    request_id: String,
    /// How long the ask's mark is kept: past the ask's deadline, its grace and a lease.
    mark_ttl: Duration,
}

/// How long the node's marks of a waiting call last, and its reattach grace.
fn wait_spec(node: &Node, ask: &NewAsk) -> WaitSpec {
    let waits_at_most = ask
        .expires_at
        .and_then(|t| t.duration_since(SystemTime::now()).ok())
        .unwrap_or(node.lease() * 6);
    WaitSpec {
        grace: ask.reattach_grace,
        request_id: ask.request_id.clone(),
        mark_ttl: waits_at_most + ask.reattach_grace + node.lease() * 2,
    }
}

/// On a cluster: lists the ask on this node's wait list before it exists, and looks in
/// the same round trip whether someone follows the session when it must be attended.
/// Returns whether the ask may go on as attended (always, when it need not be).
async fn list_first(
    node: &Arc<Node>,
    key: &SessionKey,
    rpc_id: &str,
    spec: &WaitSpec,
    must_be_attended: bool,
) -> Result<bool, Error> {
    let listed = node.list_waiter(key, rpc_id, spec.grace, spec.mark_ttl);
    let attended = async {
        match must_be_attended {
            true => node.store().attended(key).await,
            false => Ok(true),
        }
    };
    let (listed, attended) = tokio::join!(listed, attended);
    listed?;
    attended
}

/// What a registration put in place under its new rpc_id, taken back when it drops
/// unless [`Rollback::disarm`]ed: the node's wait-list entry (`listed`) and the local
/// waiter (`waiting`). Every exit of the registration but a new ask's unwinds through
/// it, early returns and a dropped call alike.
struct Rollback<'a> {
    node: &'a Arc<Node>,
    key: &'a SessionKey,
    rpc_id: &'a str,
    listed: bool,
    waiting: bool,
}

impl<'a> Rollback<'a> {
    fn new(node: &'a Arc<Node>, key: &'a SessionKey, rpc_id: &'a str) -> Self {
        Self {
            node,
            key,
            rpc_id,
            listed: false,
            waiting: false,
        }
    }

    /// The ask is registered: keep everything.
    fn disarm(mut self) {
        self.listed = false;
        self.waiting = false;
    }
}

impl Drop for Rollback<'_> {
    fn drop(&mut self) {
        if self.listed {
            self.node.unlist(self.key, self.rpc_id);
        }
        if self.waiting {
            self.node.waiting().forget(self.key, self.rpc_id);
        }
    }
}
