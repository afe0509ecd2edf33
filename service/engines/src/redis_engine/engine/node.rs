//! What this node keeps alive in Redis and repairs: its lease, presence, waiter marks,
//! agent leases and exclusive holds (refreshed every few seconds), the takeover of dead
//! nodes' waiters, the sweep of abandoned asks, and the per-session pump that hands
//! waiting calls their outcome.

use super::*;

/// Keeps this node's presence keys, waiter marks, agent leases and exclusive holds
/// alive, and notices leases that a newer attach on another node replaced.
pub(super) async fn refresh_until_dropped(node: Weak<Node>) {
    loop {
        let Some(node) = node.upgrade() else {
            return;
        };
        let period = (node.settings.reconnect_grace / 3)
            .min(node.config.lease / 3)
            .max(Duration::from_millis(50));
        if let Err(e) = node.refresh().await {
            warn!("refreshing redis leases failed: {e}");
        }
        match node.sweep_abandoned().await {
            Ok(abandoned) => {
                for (key, rpc_id) in abandoned {
                    if node.claim(&key, &rpc_id, Outcome::aborted()).await.is_ok() {
                        debug!(%rpc_id, "aborted an ask its node abandoned");
                    }
                }
            }
            Err(e) => warn!("sweeping abandoned asks failed: {e}"),
        }
        drop(node);
        tokio::time::sleep(period).await;
    }
}

impl Node {
    pub(super) fn lease_ms(&self) -> u64 {
        (self.config.lease.as_millis() as u64).max(1)
    }

    pub(super) async fn refresh(&self) -> Result<(), Error> {
        let resolved = std::mem::take(&mut *self.resolved_here.lock());
        let leases: Vec<((String, String), String)> = self
            .leases
            .lock()
            .iter()
            .map(|(k, (inc, _))| (k.clone(), inc.clone()))
            .collect();
        let renewal = Renewal {
            presence: self
                .attended
                .lock()
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, _)| k.clone())
                .collect(),
            resolved,
            // A drained node has ended its lease itself and must not renew it.
            alive: !self.closed.load(Ordering::Acquire),
            exclusive: self.exclusive.lock().keys().cloned().collect(),
            slots: self
                .subscribers
                .lock()
                .iter()
                .map(|(member, key)| (member.clone(), key.clone()))
                .collect(),
            held_sessions: self.held_sessions.lock().keys().cloned().collect(),
            agents: leases.iter().map(|(agent, _)| agent.clone()).collect(),
        };
        let renewed = self
            .store
            .renew(
                &self.id,
                &renewal,
                self.config.lease,
                self.settings.reconnect_grace,
            )
            .await;
        if let Err(e) = renewed {
            // Taken off the list with the next renewal instead.
            self.resolved_here.lock().extend(renewal.resolved);
            return Err(e);
        }
        // A newer attach elsewhere replaced one of ours: that lease is over.
        for ((tenant, agent_id), incarnation) in leases {
            let (current, _) = self.store.agent(&tenant, &agent_id).await?;
            if current.as_deref() != Some(incarnation.as_str())
                && let Some((_, superseded)) = self.leases.lock().remove(&(tenant, agent_id))
                && let Some(superseded) = superseded
            {
                // The attach stream may have ended already: nobody to tell.
                let _ = superseded.send(());
            }
        }
        Ok(())
    }

    /// Holds a presence key (renewed by the refresh loop while held) and sets it now,
    /// so the session counts as attended from this subscription on.
    pub(super) async fn hold_attended(&self, key: String) -> Result<(), Error> {
        *self.attended.lock().entry(key.clone()).or_default() += 1;
        self.store
            .set_presence(&key, &self.id, self.settings.reconnect_grace)
            .await
    }

    /// Admits a followed session among its tenant's sessions holding state (refused
    /// TOO_MANY_SESSIONS when the tenant holds as many as it may) and renews it while
    /// this node follows it.
    pub(super) async fn hold_session(&self, key: &SessionKey) -> Result<(String, String), Error> {
        self.store
            .admit_session(key, now_ms() + self.lease_ms())
            .await?;
        let held = (
            TenantKeys::new(&key.tenant).held_sessions(),
            key.session_id.to_string(),
        );
        *self.held_sessions.lock().entry(held.clone()).or_default() += 1;
        Ok(held)
    }

    pub(super) fn release_session(&self, held: (String, String)) {
        let mut sessions = self.held_sessions.lock();
        if let Some(count) = sessions.get_mut(&held) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                sessions.remove(&held);
            }
        }
    }

    pub(super) fn release_attended(&self, key: &str) {
        let mut attended = self.attended.lock();
        if let Some(count) = attended.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                // The key itself expires after the reconnect grace: that is the grace.
                attended.remove(key);
            }
        }
    }

    /// Semantics 7: the agent is attached with that incarnation, its parent is not.
    pub(super) async fn check_caller(
        &self,
        tenant: &str,
        agent: &askgate_proto::v1::AgentRef,
    ) -> Result<(), Error> {
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

    pub(super) fn add_waiter(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        ask: &WaitSpec,
    ) -> oneshot::Receiver<Outcome> {
        let (outcome_tx, outcome_rx) = oneshot::channel();
        self.waiters
            .lock()
            .entry(key, rpc_id, || WaitEntry {
                senders: Vec::new(),
                request_id: ask.request_id.clone(),
            })
            .senders
            .push(outcome_tx);
        outcome_rx
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
        self.deliver(key, &resolved);
        if let Some(tap) = self.tap.get() {
            tap.report(Committed {
                tenant: key.tenant.clone(),
                message: message(
                    cursor(&claimed.epoch, claimed.seq),
                    Event::Resolved(resolved),
                ),
                asked: Some(Asked::Encoded(claimed.asked)),
            });
        }
        Ok(())
    }

    /// Asks whose callers all went away: once their reattach grace is over and no live
    /// node waits on them, they resolve ABORTED. Every node sweeps; the claim script
    /// lets one win.
    pub(super) async fn sweep_abandoned(&self) -> Result<Vec<(SessionKey, String)>, Error> {
        self.take_over_dead_nodes().await?;
        let mut abandoned = Vec::new();
        for member in self.store.take_due(100).await? {
            let Some((key, rpc_id)) = parse_wait_member(&member) else {
                continue;
            };
            let waiting = self.store.live_waiters(&key, &rpc_id).await?;
            if waiting.is_empty() {
                abandoned.push((key, rpc_id));
            }
            // A node whose lease ran out while Redis was out of its reach had its list
            // taken over; it is back and still waits: the ask goes back on its list.
            for node_id in waiting {
                self.store.relist(&node_id, &member).await?;
            }
        }
        Ok(abandoned)
    }

    /// The asks of nodes whose lease ended (they died, or drained): each goes on the
    /// sweep list, due when its reattach grace is over; a call that reattached on a
    /// live node meanwhile keeps it. A batch per node per sweep; the node is forgotten
    /// once its list is empty.
    pub(super) async fn take_over_dead_nodes(&self) -> Result<(), Error> {
        for node_id in self.store.dead_nodes(10).await? {
            if node_id != self.id {
                self.store.take_over(&node_id, 100).await?;
            }
        }
        Ok(())
    }

    /// Lists an ask as waited on here: in this node's wait list (for the survivors,
    /// should it die) and in the ask's mark, with its reattach grace.
    pub(super) async fn list_waiter(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        ask: &WaitSpec,
    ) -> Result<(), Error> {
        self.store
            .list_waiter(&self.id, key, rpc_id, ask.grace, ask.mark_ttl)
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

    /// Hands an outcome to the calls waiting for it here.
    pub(super) fn deliver(&self, key: &SessionKey, resolved: &Resolved) {
        if let Some(entry) = self.waiters.lock().remove(key, &resolved.rpc_id) {
            // Off this node's wait list with the next renewal, in one command.
            self.resolved_here
                .lock()
                .push(wait_member(key, &resolved.rpc_id));
            let outcome = outcome_of(resolved);
            for waiter in entry.senders {
                let _ = waiter.send(outcome.clone());
            }
        }
    }

    /// Waiters whose ask resolved while this node was not listening (a lag, a
    /// reconnect): their outcome is in the history, or recorded.
    pub(super) async fn recover_waiters(&self, key: &SessionKey) {
        let rpc_ids = self.waiters.lock().rpc_ids(key);
        if rpc_ids.is_empty() {
            return;
        }
        let Ok(events) = self.store.history(key).await else {
            return;
        };
        for event in events {
            if let StoredEvent::Resolved(resolved) = event
                && rpc_ids.contains(&resolved.rpc_id)
            {
                self.deliver(key, &resolved);
            }
        }
    }
}

/// Delivers the outcomes of a session's asks to the calls waiting on this node, for
/// as long as any wait.
pub(super) async fn pump(
    node: Arc<Node>,
    key: SessionKey,
    mut live: broadcast::Receiver<Arc<LiveEvent>>,
) {
    /// Ticks to keep re-reading the history after a pub/sub reconnect (its
    /// resubscription takes a moment).
    const RECOVERY_TICKS: u32 = 5;
    /// How long the pump (and its channel subscription) outlives the session's last
    /// waiter here: an agent asking again soon needs no new SUBSCRIBE.
    const LINGER: Duration = Duration::from_secs(2);
    let channel = SessionKeys::new(&key).channel();
    let mut disconnections = node.fanout.disconnections();
    let mut recovering = 0;
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        {
            // Decide to stop under the pumps lock: a register that adds a waiter and
            // then finds this pump gone starts a new one, never relies on a dying one.
            let mut pumps = node.pumps.lock();
            let waiting = node.waiters.lock().waiting_on(&key);
            if waiting {
                idle_since = None;
            } else if idle_since.is_some_and(|t| t.elapsed() >= LINGER) {
                pumps.remove(&key);
                break;
            } else {
                idle_since.get_or_insert_with(tokio::time::Instant::now);
            }
        }
        match tokio::time::timeout(Duration::from_secs(1), live.recv()).await {
            Ok(Ok(event)) => {
                if let StoredEvent::Resolved(resolved) = &event.event {
                    node.deliver(&key, resolved);
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => node.recover_waiters(&key).await,
            Ok(Err(broadcast::error::RecvError::Closed)) => break,
            Err(_) => {
                let seen = node.fanout.disconnections();
                if seen != disconnections {
                    disconnections = seen;
                    recovering = RECOVERY_TICKS;
                }
                if recovering > 0 {
                    recovering -= 1;
                    node.recover_waiters(&key).await;
                }
            }
        }
    }
    drop(live);
    node.fanout.release(&channel).await;
}

/// What a registration put in place under its new rpc_id, taken back when it drops
/// unless [`Rollback::disarm`]ed: the node's wait-list entry (`listed`) and the local
/// waiter (`waiting`). Every exit of the registration but a new ask's unwinds through
/// it, early returns and a dropped call alike.
pub(super) struct Rollback<'a> {
    node: &'a Arc<Node>,
    key: &'a SessionKey,
    rpc_id: &'a str,
    pub listed: bool,
    pub waiting: bool,
}

impl<'a> Rollback<'a> {
    pub fn new(node: &'a Arc<Node>, key: &'a SessionKey, rpc_id: &'a str) -> Self {
        Self {
            node,
            key,
            rpc_id,
            listed: false,
            waiting: false,
        }
    }

    /// The ask is registered: keep everything.
    pub fn disarm(mut self) {
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
            self.node.waiters.lock().remove(self.key, self.rpc_id);
        }
    }
}
