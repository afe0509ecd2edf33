//! The engine's state and its operations: register, claim, abandon, replay, agents,
//! the sweep of expired state. Every mutation of a session happens under its shard's
//! mutex, never across an `.await`.
//!
//! Lock order: one shard (or every shard, in index order), then the agents, then the
//! tenants; each step optional, never the other way round.

use std::{
    collections::{HashMap, VecDeque},
    hash::{BuildHasher, RandomState},
    sync::{
        Arc, OnceLock, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use askgate_core::{
    backend::{
        Asked, Attached, Committed, Holder, Noticed, Registered, RequestAbort, Scope, StateConfig,
        Stats, Tap,
        events::{self, Message, message},
    },
    domain::{Error, NewAsk, Outcome, SessionKey},
};
use askgate_proto::v1::{Question, Requested, Resolved, Unattended, subscribe_response::Event};
use parking_lot::{Mutex, MutexGuard};
use tokio::{
    sync::{broadcast, oneshot},
    time::Instant,
};
use tracing::debug;
use uuid::Uuid;

use super::{
    agents::{Agents, AskKeys},
    journal::{AddedAsk, Change, Journal, Stored, StoredRequestState},
    session::{PendingAsk, Session},
    shard::{RequestState, Shard},
    tenants::Tenants,
};

/// How often expired state (unused sessions, recorded outcomes) is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A replay and the receiver of the live events after it, taken under the same lock.
pub(super) type Followed = (VecDeque<Message>, broadcast::Receiver<Message>);

pub(super) struct Inner {
    config: StateConfig,
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    tenants: Tenants,
    agents: Agents,
    /// Set once at shutdown; checked under a shard lock before anything is stored.
    closed: AtomicBool,
    /// Distinguishes incarnations of a session's state, so a cursor from a session
    /// that was dropped and re-created (or from another process) is never trusted.
    next_epoch: AtomicU64,
    /// Orders pending asks across sessions for `all_sessions` replay.
    next_order: AtomicU64,
    /// Where committed events are reported, once set.
    tap: OnceLock<Tap>,
    /// Where every change goes before it is acknowledged, on a durable engine.
    journal: Option<Journal>,
}

impl Inner {
    /// New state. Within a tokio runtime it also starts the sweeper that retires unused
    /// sessions and expired outcomes; the sweeper ends with the state.
    pub(super) fn new(config: StateConfig, journal: Option<Journal>) -> Arc<Self> {
        let shards = (0..config.shards.max(1))
            .map(|_| Mutex::new(Shard::default()))
            .collect();
        let epoch_base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let inner = Arc::new(Self {
            tenants: Tenants::new(config.tenant_buffer),
            config,
            shards,
            hasher: RandomState::new(),
            agents: Agents::new(journal.clone()),
            closed: AtomicBool::new(false),
            next_epoch: AtomicU64::new(epoch_base),
            next_order: AtomicU64::new(0),
            tap: OnceLock::new(),
            journal,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep_until_dropped(Arc::downgrade(&inner)));
        }
        inner
    }

    fn shard(&self, key: &SessionKey) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        self.shards[index].lock()
    }

    /// SHUTTING_DOWN once closed; BACKEND_UNAVAILABLE once the store failed.
    fn check_open(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        match &self.journal {
            Some(journal) => journal.check(),
            None => Ok(()),
        }
    }

    pub(super) fn set_tap(&self, tap: Tap) {
        let _ = self.tap.set(tap);
    }

    /// Reports a committed event, once it is durable.
    fn report(&self, committed: impl FnOnce() -> Committed + Send + 'static) {
        let Some(tap) = self.tap.get() else {
            return;
        };
        match &self.journal {
            None => tap.report(committed()),
            Some(journal) => {
                let tap = tap.clone();
                journal.then(move || tap.report(committed()));
            }
        }
    }

    /// Records a change, on a durable engine.
    fn record(&self, change: impl FnOnce() -> Change) {
        if let Some(journal) = &self.journal {
            journal.record(change());
        }
    }

    /// Runs `action` once every change so far is durable (at once on memory).
    fn once_durable(&self, action: impl FnOnce() + Send + 'static) {
        match &self.journal {
            None => action(),
            Some(journal) => journal.then(action),
        }
    }

    /// Once every change so far is durable: what acknowledges a change waits for this.
    pub(super) async fn synced(&self) -> Result<(), Error> {
        match &self.journal {
            None => Ok(()),
            Some(journal) => journal.synced().await,
        }
    }

    /// Waits while a durable engine's writer is behind (see `Journal::room`).
    pub(super) async fn room(&self) {
        if let Some(journal) = &self.journal {
            journal.room().await;
        }
    }

    /// Whether the store still takes changes.
    pub(super) fn healthy(&self) -> bool {
        self.journal.as_ref().is_none_or(|j| j.check().is_ok())
    }

    /// Appends an event to the session, recorded.
    fn push(&self, session: &mut Session, key: &SessionKey, event: Event) -> Message {
        let history_len = self.config.history_len;
        let message = session.push(history_len, event);
        self.record(|| Change::Event {
            key: key.clone(),
            seq: session.head(),
            message: message.clone(),
            history_len,
        });
        message
    }

    pub(super) fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        let key = ask.key.clone();
        let mut shard = self.shard(&key);
        self.check_open()?;
        if !ask.request_id.is_empty()
            && let Some(joined) = rejoin(&mut shard, &key, &ask.request_id)
        {
            return Ok(joined);
        }
        let stored = self.store(&mut shard, ask);
        if stored.is_err() {
            self.retire_if_unused(&mut shard, &key);
        }
        stored
    }

    pub(super) fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, Error> {
        let shard = self.shard(key);
        let session = shard.session(key).ok_or_else(Error::not_pending)?;
        Ok(session.requested(rpc_id)?.questions.clone())
    }

    pub(super) fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        let mut shard = self.shard(key);
        self.resolve(&mut shard, key, rpc_id, outcome)?;
        self.retire_if_unused(&mut shard, key);
        Ok(())
    }

    /// ABORTED unless a call still waits for the ask.
    pub(super) fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        let mut shard = self.shard(key);
        let session = shard.session(key).ok_or_else(Error::not_pending)?;
        session.pending(rpc_id)?;
        if !session.waited_for(rpc_id) {
            self.resolve(&mut shard, key, rpc_id, Outcome::aborted())?;
            self.retire_if_unused(&mut shard, key);
        }
        Ok(())
    }

    pub(super) fn list_pending(&self, key: &SessionKey) -> Vec<Requested> {
        let shard = self.shard(key);
        shard
            .session(key)
            .map(|s| {
                s.snapshot()
                    .filter_map(PendingAsk::requested)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records `resolved` for a request id no ask holds, so that the ask it would make
    /// ends at once.
    pub(super) fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        self.check_open()?;
        let mut shard = self.shard(key);
        match shard.request(key, request_id) {
            Some(RequestState::Pending { rpc_id }) => Ok(RequestAbort::Pending(rpc_id.clone())),
            Some(RequestState::Done { expires, .. }) if *expires > Instant::now() => {
                Ok(RequestAbort::Ended)
            }
            _ => {
                let retention = self.config.request_retention;
                let recorded = message(String::new(), Event::Resolved(resolved));
                let request_id: Arc<str> = request_id.into();
                self.record(|| Change::RequestDone {
                    key: key.clone(),
                    request_id: request_id.clone(),
                    resolved: recorded.clone(),
                    expires: SystemTime::now() + retention,
                });
                shard.record_done(key, request_id, recorded, Instant::now() + retention);
                drop(shard);
                Ok(RequestAbort::Recorded)
            }
        }
    }

    pub(super) fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        self.check_open()?;
        let (attached, replaced) = self.agents.attach(
            &self.tenants,
            tenant,
            agent_id,
            parent_agent_id,
            holder,
            self.config.max_agents_per_tenant,
        )?;
        self.abort_all(replaced);
        Ok(attached)
    }

    pub(super) fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        if let Some(asks) = self
            .agents
            .detach(&self.tenants, tenant, agent_id, incarnation)
        {
            debug!(
                agent_id,
                incarnation,
                pending = asks.len(),
                "agent detached"
            );
            self.abort_all(asks);
        }
    }

    pub(super) fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        for shard in self.shards.iter() {
            let shard = shard.lock();
            for (_, session) in shard.sessions() {
                stats.pending += session.pending_len();
                stats.subscribers += session.subscribers();
            }
        }
        stats.subscribers += self.tenants.subscribers();
        stats
    }

    pub(super) fn notify(&self, key: &SessionKey, rpc_id: &str, notice: Event) -> Option<Noticed> {
        let mut shard = self.shard(key);
        let session = shard.session_mut(key)?;
        let requested = session.requested(rpc_id).ok()?.clone();
        Some(Noticed {
            message: self.push(session, key, notice),
            requested,
        })
    }

    /// Shutdown: pending asks end DISPOSED, every session and lease goes. On a durable
    /// engine an ask with a request_id is handed over instead: its calls are told it
    /// was DISPOSED (they retry with its request_id) and it stays in the store, pending.
    pub(super) fn dispose_all(&self) {
        self.closed.store(true, Ordering::Release);
        let mut disposed = 0usize;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let pending: Vec<(SessionKey, String)> = shard
                .sessions()
                .flat_map(|(key, s)| {
                    s.pending_rpc_ids()
                        .into_iter()
                        .filter(|id| self.journal.is_none() || !s.reattachable(id))
                        .map(|id| (key.clone(), id))
                })
                .collect();
            disposed += pending.len();
            for (key, rpc_id) in pending {
                let _ = self.resolve(&mut shard, &key, &rpc_id, Outcome::disposed());
            }
            let keys: Vec<SessionKey> = shard.sessions().map(|(key, _)| key.clone()).collect();
            for key in keys {
                if let Some(session) = shard.session_mut(&key) {
                    session.hand_over(&Outcome::disposed());
                }
            }
            shard.clear_sessions();
        }
        self.tenants.clear();
        self.agents.clear();
        debug!(disposed, "memory backend disposed");
    }

    /// The session's state, made if it has none yet and its tenant may hold one more.
    fn session<'a>(
        &self,
        shard: &'a mut Shard,
        key: &SessionKey,
    ) -> Result<&'a mut Session, Error> {
        shard.session_or(key, || {
            let tenant_tx = self
                .tenants
                .admit_session(&key.tenant, self.config.max_sessions_per_tenant)?;
            let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
            self.record(|| Change::SessionOpened {
                key: key.clone(),
                epoch,
            });
            Ok(Session::new(epoch, tenant_tx))
        })
    }

    /// Someone follows the session: a subscriber of it or an `all_sessions` subscriber
    /// of its tenant, now or less than the reconnect grace ago (Semantics 8).
    fn attended(&self, session: &Session, tenant: &str) -> bool {
        let grace = self.config.reconnect_grace;
        session.followed_within(grace) || self.tenants.attended_within(tenant, grace)
    }

    /// Drops an unused session once its reconnect grace is over; until then it stays
    /// (with its history, so a reconnecting subscriber can resume).
    fn retire_if_unused(&self, shard: &mut Shard, key: &SessionKey) {
        if shard.retire_if_unused(key, self.config.reconnect_grace) {
            self.tenants.session_gone(&key.tenant);
            self.record(|| Change::SessionRetired { key: key.clone() });
        }
    }

    fn sweep(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for key in shard.due_retiring(now) {
                self.retire_if_unused(&mut shard, &key);
            }
            shard.expire_requests(now, |(key, request_id)| {
                self.record(|| Change::RequestExpired { key, request_id });
            });
        }
    }

    /// Removes the ask, hands its outcome to every waiting call, records it for
    /// retries, releases it from its agent's lease and broadcasts `resolved`;
    /// NOT_PENDING when it is not pending.
    fn resolve(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        let session = shard.session_mut(key).ok_or_else(Error::not_pending)?;
        let ask = session
            .take_pending(rpc_id)
            .ok_or_else(|| session.not_pending(rpc_id))?;
        let resolved = events::resolved(key, rpc_id, &outcome);
        debug!(%rpc_id, reason = ?outcome.resolution, "ask resolved");
        self.tenants.release_pending(&key.tenant, ask.bytes);
        self.record(|| Change::AskRemoved {
            key: key.clone(),
            rpc_id: rpc_id.to_owned(),
        });
        let message = self.push(session, key, Event::Resolved(resolved));
        if let Some(agent) = ask.agent() {
            self.agents.release_ask(key, rpc_id, agent);
        }
        if !ask.request_id.is_empty() {
            let retention = self.config.request_retention;
            self.record(|| Change::RequestDone {
                key: key.clone(),
                request_id: ask.request_id.clone(),
                resolved: message.clone(),
                expires: SystemTime::now() + retention,
            });
            let expires = Instant::now() + retention;
            shard.record_done(key, ask.request_id, message.clone(), expires);
        }
        // Calls that went away (aborted, or waiting out a reattach grace) are skipped.
        let waiters = ask.waiters;
        self.once_durable(move || {
            for waiter in waiters {
                let _ = waiter.send(outcome.clone());
            }
        });
        let tenant = key.tenant.clone();
        let asked = Some(Asked::Event(ask.requested));
        self.report(move || Committed {
            tenant,
            message,
            asked,
        });
        Ok(())
    }

    /// Resolves the given asks ABORTED: their agent's lease ended.
    fn abort_all(&self, asks: AskKeys) {
        for (key, rpc_id) in asks {
            let mut shard = self.shard(&key);
            if self
                .resolve(&mut shard, &key, &rpc_id, Outcome::aborted())
                .is_ok()
            {
                self.retire_if_unused(&mut shard, &key);
            }
        }
    }

    /// Stores a new ask after every check; the shard is locked by the caller.
    fn store(&self, shard: &mut Shard, mut ask: NewAsk) -> Result<Registered, Error> {
        let key = ask.key.clone();
        let config = &self.config;
        let session = self.session(shard, &key)?;
        // The caller first, then the provider, then capacity. The agents stay locked
        // until the ask is recorded under its lease, so a detach cannot slip between.
        let mut caller = match &ask.agent {
            Some(agent) => Some(self.agents.check_caller(&key.tenant, agent)?),
            None => None,
        };
        if ask.if_unattended == Unattended::Fail && !self.attended(session, &key.tenant) {
            return Err(Error::NoProvider);
        }
        let rpc_id = Uuid::now_v7().to_string();
        let requested = events::requested(&rpc_id, &mut ask);
        // What the ask holds while pending, as the Redis engine counts it.
        let bytes = prost::Message::encoded_len(&requested) as u64;
        session.check_room(
            config.max_pending_per_session,
            config.max_pending_bytes_per_session,
            bytes,
        )?;
        self.tenants.count_pending(
            &key.tenant,
            bytes,
            config.max_pending_per_tenant,
            config.max_pending_bytes_per_tenant,
        )?;
        let message = self.push(session, &key, Event::Requested(requested));
        let (tenant, reported) = (key.tenant.clone(), message.clone());
        let (outcome_tx, outcome) = oneshot::channel();
        let request_id: Arc<str> = ask.request_id.as_str().into();
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        self.record(|| {
            Change::AskAdded(Box::new(AddedAsk {
                key: key.clone(),
                rpc_id: rpc_id.clone(),
                seq: session.head(),
                order,
                bytes,
                request_id: request_id.clone(),
                requested: message.clone(),
                reattach_grace: ask.reattach_grace,
            }))
        });
        session.add_pending(
            &rpc_id,
            PendingAsk {
                order,
                bytes,
                requested: message,
                waiters: vec![outcome_tx],
                request_id: request_id.clone(),
            },
        );
        if let (Some(caller), Some(agent)) = (caller.as_mut(), &ask.agent) {
            caller.record(&key, &rpc_id, agent);
        }
        if !request_id.is_empty() {
            self.record(|| Change::RequestPending {
                key: key.clone(),
                request_id: request_id.clone(),
                rpc_id: rpc_id.clone(),
            });
            shard.record_pending(&key, request_id, &rpc_id);
        }
        // Reported once everything above is durable (on a durable engine).
        self.report(move || Committed {
            tenant,
            message: reported,
            asked: None,
        });
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
    ) -> Result<Followed, Error> {
        let mut shard = self.shard(key);
        self.check_open()?;
        let followed = self.follow_session_locked(&mut shard, key, after, lagged, take_exclusive);
        if followed.is_err() {
            // A session made only for this subscription does not stay.
            self.retire_if_unused(&mut shard, key);
        }
        followed
    }

    fn follow_session_locked(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        after: Option<&str>,
        lagged: bool,
        take_exclusive: bool,
    ) -> Result<Followed, Error> {
        let session = self.session(shard, key)?;
        let receiver = session.subscribe(
            self.config.max_subscribers_per_session,
            lagged,
            take_exclusive,
            self.config.subscriber_buffer,
        )?;
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
    ) -> Result<Followed, Error> {
        let shards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        self.check_open()?;
        let limit = self.config.max_all_sessions_per_tenant;
        let receiver = self.tenants.subscribe(tenant, limit, lagged, passive)?;
        let mut pending: Vec<&PendingAsk> = shards
            .iter()
            .flat_map(|shard| shard.sessions())
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
                if let Some(session) = shard.session_mut(key) {
                    session.unsubscribed(exclusive);
                }
                self.retire_if_unused(&mut shard, key);
            }
            Scope::Tenant(tenant) => self.tenants.unsubscribed(tenant, passive),
        }
    }
}

impl Inner {
    /// Puts the state a store kept in place, before the engine serves: sessions with
    /// their histories and pending asks (which wait out the reconnect grace from now),
    /// request records, agent leases. Returns the pending asks whose agent's lease is
    /// gone, to abort.
    pub(super) fn restore(&self, stored: Stored) -> AskKeys {
        let now = Instant::now();
        let wall = SystemTime::now();
        let retire_at = now + self.config.reconnect_grace;
        // The pending asks made under each lease: (tenant, agent_id, incarnation).
        let mut by_lease: HashMap<(Arc<str>, String, String), AskKeys> = HashMap::new();
        let (mut epochs, mut orders) = (0, 0);
        for session in stored.sessions {
            let key = session.key;
            let Ok(tenant_tx) = self.tenants.admit_session(&key.tenant, usize::MAX) else {
                continue;
            };
            epochs = epochs.max(session.epoch + 1);
            let mut pending = Vec::with_capacity(session.asks.len());
            for ask in session.asks {
                orders = orders.max(ask.order + 1);
                let _ = self
                    .tenants
                    .count_pending(&key.tenant, ask.bytes, usize::MAX, u64::MAX);
                let asked = PendingAsk {
                    order: ask.order,
                    bytes: ask.bytes,
                    requested: ask.requested,
                    waiters: Vec::new(),
                    request_id: ask.request_id,
                };
                if let Some(agent) = asked.agent() {
                    let lease = (
                        key.tenant.clone(),
                        agent.agent_id.clone(),
                        agent.incarnation.clone(),
                    );
                    let ask_key = (key.clone(), ask.rpc_id.clone());
                    by_lease.entry(lease).or_default().insert(ask_key);
                }
                pending.push((ask.seq, ask.rpc_id, asked));
            }
            let history = session.history.into();
            let restored =
                Session::restore(session.epoch, session.head, history, pending, tenant_tx);
            self.shard(&key).restore_session(key, restored, retire_at);
        }
        self.next_epoch.fetch_max(epochs, Ordering::Relaxed);
        self.next_order.fetch_max(orders, Ordering::Relaxed);
        let mut requests = stored.requests;
        requests.sort_by_key(|r| match &r.state {
            StoredRequestState::Pending { .. } => SystemTime::UNIX_EPOCH,
            StoredRequestState::Done { expires, .. } => *expires,
        });
        for request in requests {
            let mut shard = self.shard(&request.key);
            match request.state {
                StoredRequestState::Pending { rpc_id } => {
                    shard.record_pending(&request.key, request.request_id, &rpc_id);
                }
                StoredRequestState::Done { resolved, expires } => {
                    let Ok(left) = expires.duration_since(wall) else {
                        continue;
                    };
                    shard.record_done(&request.key, request.request_id, resolved, now + left);
                }
            }
        }
        for agent in stored.agents {
            let lease = (
                agent.tenant.clone(),
                agent.agent_id.clone(),
                agent.incarnation.clone(),
            );
            let asks = by_lease.remove(&lease).unwrap_or_default();
            self.agents.restore(&self.tenants, agent, asks);
        }
        by_lease.into_values().flatten().collect()
    }
}

/// A retry of a known request: joins its pending ask or returns its recorded outcome.
/// `None` when the request is new (or its record expired).
fn rejoin(shard: &mut Shard, key: &SessionKey, request_id: &str) -> Option<Registered> {
    let (outcome_tx, outcome) = oneshot::channel();
    match shard.request(key, request_id)? {
        RequestState::Pending { rpc_id } => {
            let rpc_id = rpc_id.clone();
            if !shard.session_mut(key)?.join(&rpc_id, outcome_tx) {
                return None;
            }
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

async fn sweep_until_dropped(inner: Weak<Inner>) {
    let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.sweep(Instant::now());
    }
}
