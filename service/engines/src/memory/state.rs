//! The engine's state and its operations: register, claim, abandon, replay, agents,
//! the sweep of expired state. Every mutation of a session happens under its shard's
//! mutex, never across an `.await`.
//!
//! Lock order: one shard (or every shard, in index order), then the agents, then the
//! tenants; each step optional, never the other way round.

use std::{
    collections::VecDeque,
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
}

impl Inner {
    /// New state. Within a tokio runtime it also starts the sweeper that retires unused
    /// sessions and expired outcomes; the sweeper ends with the state.
    pub(super) fn new(config: StateConfig) -> Arc<Self> {
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
            agents: Agents::default(),
            closed: AtomicBool::new(false),
            next_epoch: AtomicU64::new(epoch_base),
            next_order: AtomicU64::new(0),
            tap: OnceLock::new(),
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

    fn check_open(&self) -> Result<(), Error> {
        match self.closed.load(Ordering::Acquire) {
            true => Err(Error::ShuttingDown),
            false => Ok(()),
        }
    }

    pub(super) fn set_tap(&self, tap: Tap) {
        let _ = self.tap.set(tap);
    }

    fn report(&self, committed: impl FnOnce() -> Committed) {
        if let Some(tap) = self.tap.get() {
            tap.report(committed());
        }
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
                let expires = Instant::now() + self.config.request_retention;
                let recorded = message(String::new(), Event::Resolved(resolved));
                shard.record_done(key, request_id.into(), recorded, expires);
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
            message: session.push(self.config.history_len, notice),
            requested,
        })
    }

    /// Shutdown: every pending ask ends DISPOSED, every session and lease goes.
    pub(super) fn dispose_all(&self) {
        self.closed.store(true, Ordering::Release);
        let mut disposed = 0usize;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let pending: Vec<(SessionKey, String)> = shard
                .sessions()
                .flat_map(|(key, s)| s.pending_rpc_ids().into_iter().map(|id| (key.clone(), id)))
                .collect();
            disposed += pending.len();
            for (key, rpc_id) in pending {
                let _ = self.resolve(&mut shard, &key, &rpc_id, Outcome::disposed());
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
        }
    }

    fn sweep(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for key in shard.due_retiring(now) {
                self.retire_if_unused(&mut shard, &key);
            }
            shard.expire_requests(now);
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
        let message = session.push(self.config.history_len, Event::Resolved(resolved));
        if let Some(agent) = ask.agent() {
            self.agents.release_ask(key, rpc_id, agent);
        }
        // Calls that went away (aborted, or waiting out a reattach grace) are skipped.
        for waiter in ask.waiters {
            let _ = waiter.send(outcome.clone());
        }
        if !ask.request_id.is_empty() {
            let expires = Instant::now() + self.config.request_retention;
            shard.record_done(key, ask.request_id, message.clone(), expires);
        }
        self.report(|| Committed {
            tenant: key.tenant.clone(),
            message,
            asked: Some(Asked::Event(ask.requested)),
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
        let message = session.push(config.history_len, Event::Requested(requested));
        self.report(|| Committed {
            tenant: key.tenant.clone(),
            message: message.clone(),
            asked: None,
        });
        let (outcome_tx, outcome) = oneshot::channel();
        let request_id: Arc<str> = ask.request_id.as_str().into();
        session.add_pending(
            &rpc_id,
            PendingAsk {
                order: self.next_order.fetch_add(1, Ordering::Relaxed),
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
            shard.record_pending(&key, request_id, &rpc_id);
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
