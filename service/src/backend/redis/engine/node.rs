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
        let period = (node.config.reconnect_grace / 3)
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
    pub(super) fn grace_ms(&self) -> u64 {
        (self.config.reconnect_grace.as_millis() as u64).max(1)
    }

    pub(super) fn lease_ms(&self) -> u64 {
        (self.config.lease.as_millis() as u64).max(1)
    }

    pub(super) async fn refresh(&self) -> Result<(), AskError> {
        let mut commands = Vec::new();
        for key in self
            .attended
            .lock()
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k)
        {
            commands.push(
                redis::cmd("SET")
                    .arg(key)
                    .arg(&self.id)
                    .arg("PX")
                    .arg(self.grace_ms())
                    .to_owned(),
            );
        }
        // The node's lease vouches for every ask it waits on: one command, not one per
        // ask (a node holding 100,000 asks would otherwise keep Redis busy renewing).
        // A drained node has ended its lease itself and must not renew it.
        let expires = now_ms() + self.lease_ms();
        let resolved = std::mem::take(&mut *self.resolved_here.lock());
        if !resolved.is_empty() {
            commands.push(redis::Cmd::srem(node_waits_key(&self.id), &resolved));
        }
        if !self.closed.load(Ordering::Acquire) {
            commands.push(redis::Cmd::zadd(NODES_KEY, &self.id, expires));
            commands.push(redis::Cmd::pexpire(
                node_waits_key(&self.id),
                self.lease_ms() as i64 * 6,
            ));
        }
        for key in self.exclusive.lock().keys() {
            commands.push(redis::Cmd::pexpire(key, self.lease_ms() as i64));
        }
        for (member, key) in self.subscribers.lock().iter() {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg(expires)
                    .arg(member)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(key, self.lease_ms() as i64));
        }
        // Followed sessions stay held by their tenant for a lease beyond now; GT: a
        // kept history may hold one longer already.
        for (key, session_id) in self.held_sessions.lock().keys() {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(session_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(
                key,
                self.store.idle_ttl().as_millis() as i64,
            ));
        }
        let leases: Vec<((String, String), String)> = self
            .leases
            .lock()
            .iter()
            .map(|(k, (inc, _))| (k.clone(), inc.clone()))
            .collect();
        for ((tenant, agent_id), _) in &leases {
            commands.push(redis::Cmd::pexpire(
                agent_key(tenant, agent_id),
                self.lease_ms() as i64,
            ));
            let agents = TenantKeys::new(tenant).agents();
            commands.push(
                redis::cmd("ZADD")
                    .arg(&agents)
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(agent_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(agents, self.lease_ms() as i64));
        }
        // Keys of many slots: one pipeline on a single server, one by one on a cluster.
        if let Err(e) = self.conn.run_all(commands).await {
            // Taken off the list with the next renewal instead.
            self.resolved_here.lock().extend(resolved);
            return Err(redis_error(e));
        }
        let mut conn = self.conn.clone();
        // A newer attach elsewhere replaced one of ours: that lease is over.
        for ((tenant, agent_id), incarnation) in leases {
            let current: Option<String> = conn
                .hget(agent_key(&tenant, &agent_id), "inc")
                .await
                .map_err(redis_error)?;
            if current.as_deref() != Some(incarnation.as_str())
                && let Some((_, superseded)) = self.leases.lock().remove(&(tenant, agent_id))
                && let Some(superseded) = superseded
            {
                let _ = superseded.send(());
            }
        }
        Ok(())
    }

    /// Holds a presence key (renewed by the refresh loop while held) and sets it now,
    /// so the session counts as attended from this subscription on.
    pub(super) async fn hold_attended(&self, key: String) -> Result<(), AskError> {
        *self.attended.lock().entry(key.clone()).or_default() += 1;
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(&key)
            .arg(&self.id)
            .arg("PX")
            .arg(self.grace_ms())
            .query_async::<()>(&mut conn)
            .await
            .map_err(redis_error)
    }

    /// Admits a followed session among its tenant's sessions holding state (refused
    /// TOO_MANY_SESSIONS when the tenant holds as many as it may) and renews it while
    /// this node follows it.
    pub(super) async fn hold_session(
        &self,
        key: &SessionKey,
    ) -> Result<(String, String), AskError> {
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
    ) -> Result<(), AskError> {
        let mut conn = self.conn.clone();
        let (incarnation, parent): (Option<String>, Option<String>) = redis::pipe()
            .hget(agent_key(tenant, &agent.agent_id), "inc")
            .hget(agent_key(tenant, &agent.agent_id), "parent")
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        if incarnation.as_deref() != Some(agent.incarnation.as_str()) {
            return Err(AskError::CallerNotLive);
        }
        if let Some(parent) = parent.filter(|p| !p.is_empty()) {
            let live: bool = conn
                .exists(agent_key(tenant, &parent))
                .await
                .map_err(redis_error)?;
            if live {
                return Err(AskError::DelegatedCaller);
            }
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
    ) -> Result<(), AskError> {
        let resolved = events::resolved(key, rpc_id, &outcome);
        // The script also deletes the ask's wait mark. Should the ask be on the sweep
        // list (its first node died), it stays there until due, when the sweep finds
        // it resolved: nothing is added to every claim for that rare case.
        self.store.claim(key, &resolved).await?;
        self.deliver(key, &resolved);
        Ok(())
    }

    /// Asks whose callers all went away: once their reattach grace is over and no live
    /// node waits on them, they resolve ABORTED. Every node sweeps; the claim script
    /// lets one win.
    pub(super) async fn sweep_abandoned(&self) -> Result<Vec<(SessionKey, String)>, AskError> {
        let mut conn = self.conn.clone();
        self.take_over_dead_nodes(&mut conn).await?;
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(WAITS_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(100)
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        let mut abandoned = Vec::new();
        for member in due {
            let _: Result<(), _> = conn.zrem(WAITS_KEY, &member).await;
            let Some((key, rpc_id)) = parse_wait_member(&member) else {
                continue;
            };
            let waiting = self.live_waiters(&mut conn, &key, &rpc_id).await?;
            if waiting.is_empty() {
                abandoned.push((key, rpc_id));
            }
            // A node whose lease ran out while Redis was out of its reach had its list
            // taken over; it is back and still waits: the ask goes back on its list.
            for node_id in waiting {
                let _: () = conn
                    .sadd(node_waits_key(&node_id), &member)
                    .await
                    .map_err(redis_error)?;
            }
        }
        Ok(abandoned)
    }

    /// The asks of nodes whose lease ended (they died, or drained): each goes on the
    /// sweep list, due when its reattach grace is over; a call that reattached on a
    /// live node meanwhile keeps it. A batch per node per sweep; the node is forgotten
    /// once its list is empty.
    pub(super) async fn take_over_dead_nodes(&self, conn: &mut RedisConn) -> Result<(), AskError> {
        let dead: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(NODES_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(10)
            .query_async(conn)
            .await
            .map_err(redis_error)?;
        for node_id in dead.into_iter().filter(|id| *id != self.id) {
            let waits = node_waits_key(&node_id);
            let members: Vec<String> = redis::cmd("SPOP")
                .arg(&waits)
                .arg(100)
                .query_async(conn)
                .await
                .map_err(redis_error)?;
            if members.is_empty() {
                let _: () = conn.zrem(NODES_KEY, &node_id).await.map_err(redis_error)?;
                continue;
            }
            for member in members {
                let Some((key, rpc_id)) = parse_wait_member(&member) else {
                    continue;
                };
                let grace: Option<u64> = conn
                    .hget(wait_mark(&key, &rpc_id), &node_id)
                    .await
                    .map_err(redis_error)?;
                let due = now_ms() + grace.unwrap_or(0);
                let _: () = conn
                    .zadd(WAITS_KEY, &member, due)
                    .await
                    .map_err(redis_error)?;
            }
        }
        Ok(())
    }

    /// The nodes whose lease is running that wait on the ask.
    pub(super) async fn live_waiters(
        &self,
        conn: &mut RedisConn,
        key: &SessionKey,
        rpc_id: &str,
    ) -> Result<Vec<String>, AskError> {
        let nodes: Vec<String> = conn
            .hkeys(wait_mark(key, rpc_id))
            .await
            .map_err(redis_error)?;
        if nodes.is_empty() {
            return Ok(nodes);
        }
        let leases: Vec<Option<u64>> = redis::cmd("ZMSCORE")
            .arg(NODES_KEY)
            .arg(&nodes)
            .query_async(conn)
            .await
            .map_err(redis_error)?;
        let now = now_ms();
        Ok(nodes
            .into_iter()
            .zip(leases)
            .filter(|(_, lease)| lease.is_some_and(|until| until > now))
            .map(|(node, _)| node)
            .collect())
    }

    /// Lists an ask as waited on here: in this node's wait list (for the survivors,
    /// should it die) and in the ask's mark, with its reattach grace.
    pub(super) fn wait_commands(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        ask: &WaitSpec,
    ) -> Vec<redis::Cmd> {
        let mark = wait_mark(key, rpc_id);
        vec![
            redis::Cmd::sadd(node_waits_key(&self.id), wait_member(key, rpc_id)),
            redis::Cmd::hset(&mark, &self.id, ask.grace.as_millis() as u64),
            redis::Cmd::pexpire(&mark, ask.mark_ttl.as_millis() as i64),
        ]
    }

    /// Undoes [`Self::wait_commands`]: no call waits on the ask here any more.
    pub(super) fn wait_commands_undone(&self, key: &SessionKey, rpc_id: &str) -> Vec<redis::Cmd> {
        vec![
            redis::Cmd::srem(node_waits_key(&self.id), wait_member(key, rpc_id)),
            redis::Cmd::hdel(wait_mark(key, rpc_id), &self.id),
        ]
    }

    /// [`Self::wait_commands_undone`], off the caller's path.
    pub(super) fn unlist(&self, key: &SessionKey, rpc_id: &str) {
        let (conn, commands) = (self.conn.clone(), self.wait_commands_undone(key, rpc_id));
        tokio::spawn(async move {
            let _ = conn.run_all(commands).await;
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

pub(super) fn agent_key(tenant: &str, agent_id: &str) -> String {
    TenantKeys::new(tenant).agent(agent_id)
}

pub(super) fn agent_asks_key(tenant: &str, agent_id: &str, incarnation: &str) -> String {
    TenantKeys::new(tenant).agent_asks(agent_id, incarnation)
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
