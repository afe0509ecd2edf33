//! The engine's operations on its state: register, claim, abandon, replay, agents,
//! the sweep of expired state. Every mutation of a session happens under its shard's
//! mutex, never across an `.await`.

use super::*;

impl Inner {
    pub(super) fn shard(&self, key: &SessionKey) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        self.shards[index].lock()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(super) fn tenant_sender(&self, tenant: &Arc<str>) -> broadcast::Sender<Message> {
        self.tenants
            .lock()
            .entry(tenant.clone())
            .or_insert_with(|| TenantState {
                events_tx: broadcast::channel(self.config.tenant_buffer.max(1)).0,
                left_at: None,
                passive: 0,
                pending: 0,
                pending_bytes: 0,
                sessions: 0,
                agents: 0,
            })
            .events_tx
            .clone()
    }

    /// The session's state, made if it has none yet and its tenant may hold one more.
    pub(super) fn session<'a>(
        &self,
        shard: &'a mut Shard,
        key: &SessionKey,
    ) -> Result<&'a mut Session, Error> {
        use std::collections::hash_map::Entry;
        let vacant = match shard.sessions.entry(key.clone()) {
            Entry::Occupied(session) => return Ok(session.into_mut()),
            Entry::Vacant(vacant) => vacant,
        };
        let tenant_tx = self.tenant_sender(&key.tenant);
        {
            let mut tenants = self.tenants.lock();
            let tenant = tenants
                .get_mut(&key.tenant)
                .ok_or_else(|| Error::Internal("a session's tenant has no state".into()))?;
            if tenant.sessions >= self.config.max_sessions_per_tenant {
                return Err(Error::too_many_sessions(
                    self.config.max_sessions_per_tenant,
                ));
            }
            tenant.sessions += 1;
        }
        Ok(vacant.insert(Session {
            epoch: self.next_epoch.fetch_add(1, Ordering::Relaxed),
            head: 0,
            pending: BTreeMap::new(),
            by_rpc_id: HashMap::new(),
            history: VecDeque::new(),
            events_tx: None,
            tenant_tx,
            exclusive_held: false,
            left_at: None,
            pending_bytes: 0,
        }))
    }

    /// Someone follows the session: a subscriber of it or an `all_sessions` subscriber
    /// of its tenant, now or less than the reconnect grace ago (Semantics 8).
    pub(super) fn attended(&self, session: &Session, tenant: &str) -> bool {
        let grace = self.config.reconnect_grace;
        if session.subscribers() > 0 || within(session.left_at, grace) {
            return true;
        }
        self.tenants
            .lock()
            .get(tenant)
            .is_some_and(|t| t.attending() > 0 || within(t.left_at, grace))
    }

    /// Drops an unused session once its reconnect grace is over; until then it stays
    /// (with its history, so a reconnecting subscriber can resume).
    pub(super) fn retire_if_unused(&self, shard: &mut Shard, key: &SessionKey) {
        let Some(session) = shard.sessions.get(key) else {
            return;
        };
        if !session.is_unused() {
            return;
        }
        let grace = self.config.reconnect_grace;
        match session.left_at {
            Some(left_at) if left_at.elapsed() < grace => {
                shard.retiring.push_back((left_at + grace, key.clone()));
            }
            _ => {
                shard.sessions.remove(key);
                if let Some(tenant) = self.tenants.lock().get_mut(&key.tenant) {
                    tenant.sessions = tenant.sessions.saturating_sub(1);
                }
            }
        }
    }

    pub(super) fn sweep(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            while shard.retiring.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, key)) = shard.retiring.pop_front() {
                    self.retire_if_unused(&mut shard, &key);
                }
            }
            while shard
                .request_expiry
                .front()
                .is_some_and(|(at, _)| *at <= now)
            {
                let Some((_, request)) = shard.request_expiry.pop_front() else {
                    break;
                };
                if let Some(RequestState::Done { expires, .. }) = shard.requests.get(&request)
                    && *expires <= now
                {
                    shard.requests.remove(&request);
                }
            }
        }
    }

    /// Removes the ask, hands its outcome to every waiting call, records it for
    /// retries, releases it from its agent's lease and broadcasts `resolved`.
    pub(super) fn resolve(&self, shard: &mut Shard, key: &SessionKey, seq: u64, outcome: Outcome) {
        let Some(session) = shard.sessions.get_mut(key) else {
            return;
        };
        let Some(ask) = session.pending.remove(&seq).map(|ask| *ask) else {
            return;
        };
        let rpc_id = ask
            .requested()
            .map(|r| r.rpc_id.clone())
            .unwrap_or_default();
        session.by_rpc_id.remove(rpc_id.as_str());
        let resolved = events::resolved(key, &rpc_id, &outcome);
        debug!(%rpc_id, reason = ?outcome.resolution, "ask resolved");
        session.pending_bytes = session.pending_bytes.saturating_sub(ask.bytes);
        if let Some(tenant) = self.tenants.lock().get_mut(&key.tenant) {
            tenant.pending = tenant.pending.saturating_sub(1);
            tenant.pending_bytes = tenant.pending_bytes.saturating_sub(ask.bytes);
        }
        let message = session.push(self.config.history_len, Event::Resolved(resolved));
        if let Some(agent) = ask.agent()
            && let Some(lease) = self
                .agents
                .lock()
                .get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
            && lease.incarnation == agent.incarnation
        {
            lease.asks.remove(&(key.clone(), rpc_id));
        }
        // Calls that went away (aborted, or waiting out a reattach grace) are skipped.
        for waiter in ask.waiters {
            let _ = waiter.send(outcome.clone());
        }
        if !ask.request_id.is_empty() {
            let expires = Instant::now() + self.config.request_retention;
            let request = (key.clone(), ask.request_id);
            shard.request_expiry.push_back((expires, request.clone()));
            shard.requests.insert(
                request,
                RequestState::Done {
                    resolved: message.clone(),
                    expires,
                },
            );
        }
        if let Some(tap) = self.tap.get() {
            tap.report(Committed {
                tenant: key.tenant.clone(),
                message,
                asked: Some(Asked::Event(ask.requested)),
            });
        }
    }

    /// Resolves the given asks ABORTED: their agent's lease ended.
    pub(super) fn abort_all(&self, asks: HashSet<(SessionKey, String)>) {
        for (key, rpc_id) in asks {
            let mut shard = self.shard(&key);
            let seq = shard
                .sessions
                .get(&key)
                .and_then(|s| s.by_rpc_id.get(rpc_id.as_str()).copied());
            if let Some(seq) = seq {
                self.resolve(&mut shard, &key, seq, Outcome::aborted());
                self.retire_if_unused(&mut shard, &key);
            }
        }
    }

    /// A retry of a known request: joins its pending ask or returns its recorded
    /// outcome. `None` when the request is new (or its record expired).
    pub(super) fn rejoin(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        request_id: &str,
    ) -> Option<Registered> {
        let request: RequestKey = (key.clone(), request_id.into());
        let (outcome_tx, outcome) = oneshot::channel();
        match shard.requests.get(&request)? {
            RequestState::Pending { rpc_id } => {
                let rpc_id = rpc_id.clone();
                let session = shard.sessions.get_mut(key)?;
                let seq = *session.by_rpc_id.get(rpc_id.as_str())?;
                let ask = session.pending.get_mut(&seq)?;
                ask.waiters.retain(|w| !w.is_closed());
                ask.waiters.push(outcome_tx);
                debug!(%rpc_id, request_id, "a retry joined its pending ask");
                Some(Registered { rpc_id, outcome })
            }
            RequestState::Done { resolved, expires } if *expires > Instant::now() => {
                let Some(Event::Resolved(resolved)) = &resolved.event else {
                    return None;
                };
                let _ = outcome_tx.send(events::outcome_of(resolved));
                debug!(rpc_id = %resolved.rpc_id, request_id, "a retry got its recorded outcome");
                Some(Registered {
                    rpc_id: resolved.rpc_id.clone(),
                    outcome,
                })
            }
            RequestState::Done { .. } => None,
        }
    }

    /// Semantics 7: the agent is attached now with that incarnation and has no live
    /// parent. Returns the agents guard so the caller can record the ask under it.
    pub(super) fn check_caller(
        &self,
        tenant: &Arc<str>,
        agent: &AgentRef,
    ) -> Result<MutexGuard<'_, HashMap<AgentKey, AgentLease>>, Error> {
        let agents = self.agents.lock();
        let lease = agents
            .get(&(tenant.clone(), agent.agent_id.clone()))
            .map(|lease| (lease.incarnation.as_str(), lease.parent_agent_id.as_str()));
        if let Some(parent) = askgate_core::backend::live_caller(agent, lease)?
            && agents.contains_key(&(tenant.clone(), parent.to_owned()))
        {
            return Err(Error::DelegatedCaller);
        }
        Ok(agents)
    }

    /// Counts a new pending ask of `bytes` against its tenant's caps.
    fn count_pending(&self, tenant: &str, bytes: u64) -> Result<(), Error> {
        let mut tenants = self.tenants.lock();
        let tenant = tenants
            .get_mut(tenant)
            .ok_or_else(|| Error::Internal("a session's tenant has no state".into()))?;
        if tenant.pending >= self.config.max_pending_per_tenant {
            return Err(Error::TooManyPending(format!(
                "at most {} pending asks per tenant",
                self.config.max_pending_per_tenant
            )));
        }
        if tenant.pending_bytes + bytes > self.config.max_pending_bytes_per_tenant {
            return Err(Error::pending_bytes_full(
                "tenant",
                self.config.max_pending_bytes_per_tenant,
            ));
        }
        tenant.pending += 1;
        tenant.pending_bytes += bytes;
        Ok(())
    }

    /// Stores a new ask after every check; the shard is locked by the caller.
    pub(super) fn store(&self, shard: &mut Shard, mut ask: NewAsk) -> Result<Registered, Error> {
        let key = ask.key.clone();
        let session = self.session(shard, &key)?;
        // The caller first, then the provider, then capacity. The agents guard is held
        // until the ask is recorded under its lease, so a detach cannot slip between.
        let mut agents = match &ask.agent {
            Some(agent) => Some(self.check_caller(&key.tenant, agent)?),
            None => None,
        };
        if ask.if_unattended == Unattended::Fail && !self.attended(session, &key.tenant) {
            return Err(Error::NoProvider);
        }
        if session.pending.len() >= self.config.max_pending_per_session {
            return Err(Error::TooManyPending(format!(
                "at most {} pending asks per session",
                self.config.max_pending_per_session
            )));
        }
        let rpc_id = Uuid::now_v7().to_string();
        let requested = events::requested(&rpc_id, &mut ask);
        // What the ask holds while pending, as the Redis engine counts it.
        let bytes = prost::Message::encoded_len(&requested) as u64;
        if session.pending_bytes + bytes > self.config.max_pending_bytes_per_session {
            return Err(Error::pending_bytes_full(
                "session",
                self.config.max_pending_bytes_per_session,
            ));
        }
        self.count_pending(&key.tenant, bytes)?;
        session.pending_bytes += bytes;
        let message = session.push(self.config.history_len, Event::Requested(requested));
        if let Some(tap) = self.tap.get() {
            tap.report(Committed {
                tenant: key.tenant.clone(),
                message: message.clone(),
                asked: None,
            });
        }
        let (outcome_tx, outcome) = oneshot::channel();
        session
            .by_rpc_id
            .insert(rpc_id.as_str().into(), session.head);
        let request_id: Arc<str> = ask.request_id.as_str().into();
        session.pending.insert(
            session.head,
            Box::new(PendingAsk {
                order: self.next_order.fetch_add(1, Ordering::Relaxed),
                bytes,
                requested: message,
                waiters: vec![outcome_tx],
                request_id: request_id.clone(),
            }),
        );
        if let (Some(agents), Some(agent)) = (agents.as_mut(), &ask.agent)
            && let Some(lease) = agents.get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
        {
            lease.asks.insert((key.clone(), rpc_id.clone()));
        }
        if !request_id.is_empty() {
            shard.requests.insert(
                (key, request_id),
                RequestState::Pending {
                    rpc_id: rpc_id.clone(),
                },
            );
        }
        Ok(Registered { rpc_id, outcome })
    }

    /// Starts (or, after a lag, restarts) following one session: the replay and a
    /// receiver taken under the same lock, so nothing falls between them.
    pub(super) fn follow_session(
        &self,
        key: &SessionKey,
        after: Option<&str>,
        lagged: bool,
        take_exclusive: bool,
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), Error> {
        let mut shard = self.shard(key);
        if self.is_closed() {
            return Err(Error::ShuttingDown);
        }
        let followed = self.follow_session_locked(&mut shard, key, after, lagged, take_exclusive);
        if followed.is_err() {
            // A session made only for this subscription does not stay.
            self.retire_if_unused(&mut shard, key);
        }
        followed
    }

    pub(super) fn follow_session_locked(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        after: Option<&str>,
        lagged: bool,
        take_exclusive: bool,
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), Error> {
        let session = self.session(shard, key)?;
        if !lagged && session.subscribers() >= self.config.max_subscribers_per_session {
            return Err(Error::too_many_subscribers(
                self.config.max_subscribers_per_session,
            ));
        }
        if take_exclusive {
            if session.exclusive_held {
                return Err(Error::DuplicateProvider);
            }
            session.exclusive_held = true;
        }
        let buffer = self.config.subscriber_buffer.max(1);
        let receiver = session
            .events_tx
            .get_or_insert_with(|| broadcast::channel(buffer).0)
            .subscribe();
        session.left_at = None;
        let replay = match after.and_then(|a| session.events_after(a)) {
            Some(missed) => events::resumed_replay(missed, session.head_cursor()),
            None => events::snapshot_replay(
                lagged || after.is_some(),
                session.snapshot().map(|p| p.requested.clone()),
                session.head_cursor(),
            ),
        };
        Ok((replay, receiver))
    }

    /// Starts (or restarts) following every session of a tenant. All shards are locked
    /// in index order so the snapshot and the receiver describe one instant.
    pub(super) fn follow_tenant(
        &self,
        tenant: &Arc<str>,
        reset_first: bool,
        lagged: bool,
        passive: bool,
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), Error> {
        let shards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        if self.is_closed() {
            return Err(Error::ShuttingDown);
        }
        let sender = self.tenant_sender(tenant);
        let limit = self.config.max_all_sessions_per_tenant;
        if !lagged && sender.receiver_count() >= limit {
            return Err(Error::too_many_all_sessions(limit));
        }
        let receiver = sender.subscribe();
        if let Some(state) = self.tenants.lock().get_mut(tenant) {
            match passive {
                // A resync keeps its count.
                true if !lagged => state.passive += 1,
                true => {}
                false => state.left_at = None,
            }
        }
        let mut pending: Vec<&PendingAsk> = shards
            .iter()
            .flat_map(|shard| shard.sessions.iter())
            .filter(|(key, _)| key.tenant == *tenant)
            .flat_map(|(_, session)| session.snapshot())
            .collect();
        pending.sort_by_key(|p| p.order);
        let replay = events::snapshot_replay(
            reset_first,
            pending.into_iter().map(|p| p.requested.clone()),
            String::new(),
        );
        Ok((replay, receiver))
    }

    /// A subscription ended: note when the scope lost its last subscriber (the
    /// reconnect grace counts from there) and retire the session if it is unused.
    pub(super) fn unsubscribed(&self, scope: &Scope, exclusive: bool, passive: bool) {
        match scope {
            Scope::Session(key) => {
                let mut shard = self.shard(key);
                if let Some(session) = shard.sessions.get_mut(key) {
                    if exclusive {
                        session.exclusive_held = false;
                    }
                    if session.subscribers() == 0 {
                        session.events_tx = None;
                        session.left_at = Some(Instant::now());
                    }
                }
                self.retire_if_unused(&mut shard, key);
            }
            Scope::Tenant(tenant) => {
                let mut tenants = self.tenants.lock();
                let Some(state) = tenants.get_mut(tenant) else {
                    return;
                };
                if passive {
                    state.passive = state.passive.saturating_sub(1);
                } else if state.attending() == 0 {
                    state.left_at = Some(Instant::now());
                }
            }
        }
    }
}
