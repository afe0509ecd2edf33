//! The embedded backend: state in this process, sharded by session so that sessions do
//! not contend on one lock.
//!
//! Each session keeps its pending asks, a bounded history of its events (for cursor
//! resume) and a broadcast channel to its subscribers; each tenant has one more channel
//! for `all_sessions` subscribers; the agent registry holds the live leases. Every
//! mutation of a session happens under its shard's mutex, which never spans an
//! `.await`: that is what makes a claim first-wins, keeps replay and live events free of
//! gaps and duplicates, and makes the caller and provider checks of `register` atomic
//! with the store.
//!
//! Lock order: one shard (or every shard, in index order), then `agents`, then
//! `tenants`; each step optional, never the other way round.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    hash::{BuildHasher, RandomState},
    pin::Pin,
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use askgate_proto::v1::{AgentRef, Question, Requested, Unattended, subscribe_response::Event};
use async_trait::async_trait;
use parking_lot::{Mutex, MutexGuard};
use tokio::{
    sync::{broadcast, oneshot},
    time::Instant,
};
use tokio_stream::{
    Stream,
    wrappers::{BroadcastStream, errors::BroadcastStreamRecvError},
};
use tracing::{debug, warn};
use uuid::Uuid;

use super::{
    Attached, Backend, EventStream, Holder, Registered, Scope, Stats, SubscribeOptions,
    events::{self, Message, message, reset, synced},
};
use crate::domain::{AskError, NewAsk, Outcome, SessionKey, Settled};

/// Sizes and windows of the in-memory state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Independent locks; sessions hash onto them.
    pub shards: usize,
    /// Events each session keeps for cursor resume.
    pub history_len: usize,
    /// Events a session subscriber may fall behind before it gets `reset`.
    pub subscriber_buffer: usize,
    /// Events an `all_sessions` subscriber may fall behind before it gets `reset`.
    pub tenant_buffer: usize,
    /// Pending asks one session may hold.
    pub max_pending_per_session: usize,
    /// Pending asks one tenant may hold over all its sessions.
    pub max_pending_per_tenant: usize,
    /// Open subscriptions one session may have.
    pub max_subscribers_per_session: usize,
    /// Open `all_sessions` subscriptions one tenant may have.
    pub max_all_sessions_per_tenant: usize,
    /// Agents one tenant may have attached at once.
    pub max_agents_per_tenant: usize,
    /// Sessions one tenant may hold state in at once (pending asks, subscribers, or a
    /// history kept for resume).
    pub max_sessions_per_tenant: usize,
    /// How long a session counts as attended after its last subscriber left, and how
    /// long an unused session (and its history, for resume) is kept.
    pub reconnect_grace: Duration,
    /// How long the outcome of an ask with a request_id is kept for a retry.
    pub request_retention: Duration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            shards: 64,
            history_len: 1000,
            subscriber_buffer: 1024,
            tenant_buffer: 16 * 1024,
            max_pending_per_session: 1024,
            max_pending_per_tenant: 10_000,
            max_subscribers_per_session: 64,
            max_all_sessions_per_tenant: 64,
            max_agents_per_tenant: 10_000,
            max_sessions_per_tenant: 10_000,
            reconnect_grace: Duration::from_secs(5),
            request_retention: Duration::from_secs(600),
        }
    }
}

/// How often expired state (unused sessions, recorded outcomes) is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The in-memory [`Backend`].
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

struct Inner {
    config: MemoryConfig,
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    tenants: Mutex<HashMap<Arc<str>, TenantState>>,
    agents: Mutex<HashMap<AgentKey, AgentLease>>,
    /// Set once at shutdown; checked under a shard lock before anything is stored.
    closed: AtomicBool,
    /// Distinguishes incarnations of a session's state, so a cursor from a session
    /// that was dropped and re-created (or from another process) is never trusted.
    next_epoch: AtomicU64,
    /// Orders pending asks across sessions for `all_sessions` replay.
    next_order: AtomicU64,
}

struct TenantState {
    events_tx: broadcast::Sender<Message>,
    /// When the last `all_sessions` subscriber left.
    left_at: Option<Instant>,
    /// Pending asks over all the tenant's sessions.
    pending: usize,
    /// Sessions of the tenant in the shards (those retiring included).
    sessions: usize,
    /// Agents of the tenant attached now.
    agents: usize,
}

type AgentKey = (Arc<str>, String);

struct AgentLease {
    incarnation: String,
    parent_agent_id: String,
    /// The subject that attached it: only it (or an admin) may replace it.
    holder: String,
    /// Pending asks made under this incarnation: ABORTED when it ends.
    asks: HashSet<(SessionKey, String)>,
    superseded: Option<oneshot::Sender<()>>,
}

#[derive(Default)]
struct Shard {
    sessions: HashMap<SessionKey, Session>,
    /// Unused sessions waiting out their reconnect grace, by when it ends.
    retiring: VecDeque<(Instant, SessionKey)>,
    /// Asks by (session, request_id), for retries.
    requests: HashMap<(SessionKey, String), RequestState>,
    /// Recorded outcomes by when they expire.
    request_expiry: VecDeque<(Instant, (SessionKey, String))>,
}

enum RequestState {
    Pending {
        rpc_id: String,
    },
    Done {
        outcome: Outcome,
        rpc_id: String,
        expires: Instant,
    },
}

struct Session {
    epoch: u64,
    /// Sequence number of the last event.
    head: u64,
    /// Pending asks by the sequence number of their `requested` event: oldest first.
    pending: BTreeMap<u64, PendingAsk>,
    by_rpc_id: HashMap<Arc<str>, u64>,
    /// The last `history_len` events, oldest first, with their sequence numbers.
    history: VecDeque<(u64, Message)>,
    /// The channel to the session's own subscribers, made by the first of them and
    /// dropped with the last: a channel preallocates its whole buffer, and most
    /// sessions are only ever followed through their tenant's channel.
    events_tx: Option<broadcast::Sender<Message>>,
    tenant_tx: broadcast::Sender<Message>,
    exclusive_held: bool,
    /// When the last subscriber left (None: never subscribed, or subscribed now).
    left_at: Option<Instant>,
}

struct PendingAsk {
    order: u64,
    /// The `requested` event, replayed as is (same rpc_id, same cursor).
    requested: Message,
    /// The calls waiting for the outcome: the Ask, and retries that joined it.
    waiters: Vec<oneshot::Sender<Outcome>>,
    agent: Option<AgentRef>,
    request_id: String,
}

impl PendingAsk {
    fn requested(&self) -> Option<&Requested> {
        match &self.requested.event {
            Some(Event::Requested(r)) => Some(r),
            _ => None,
        }
    }
}

/// This engine's cursors: the session's epoch (a number, in hex) and the event's
/// sequence number, in the shared format.
fn cursor(epoch: u64, seq: u64) -> String {
    events::cursor(&format!("{epoch:x}"), seq)
}

fn parse_cursor(cursor: &str) -> Option<(u64, u64)> {
    let (epoch, seq) = events::parse_cursor(cursor)?;
    Some((u64::from_str_radix(epoch, 16).ok()?, seq))
}

fn within(since: Option<Instant>, grace: Duration) -> bool {
    since.is_some_and(|t| t.elapsed() < grace)
}

impl Session {
    fn push(&mut self, history_len: usize, event: Event) -> Message {
        self.head += 1;
        let msg = message(cursor(self.epoch, self.head), event);
        if self.history.len() >= history_len {
            self.history.pop_front();
        }
        if history_len > 0 {
            self.history.push_back((self.head, msg.clone()));
        }
        // Sending fails only when nobody listens, which is fine.
        if let Some(events_tx) = &self.events_tx {
            let _ = events_tx.send(msg.clone());
        }
        let _ = self.tenant_tx.send(msg.clone());
        msg
    }

    fn head_cursor(&self) -> String {
        cursor(self.epoch, self.head)
    }

    /// The pending asks, oldest first.
    fn snapshot(&self) -> impl Iterator<Item = &PendingAsk> {
        self.pending.values()
    }

    /// The events after `after`, when the history still holds all of them.
    fn events_after(&self, after: &str) -> Option<Vec<Message>> {
        let (epoch, seq) = parse_cursor(after)?;
        let oldest_held = self.history.front().map_or(self.head + 1, |(s, _)| *s);
        if epoch != self.epoch || seq > self.head || seq + 1 < oldest_held {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|(s, _)| *s > seq)
                .map(|(_, m)| m.clone())
                .collect(),
        )
    }

    /// How a finished ask ended, while the history still remembers it.
    fn settled(&self, rpc_id: &str) -> Option<Settled> {
        self.history.iter().rev().find_map(|(_, m)| match &m.event {
            Some(Event::Resolved(r)) if r.rpc_id == rpc_id => Some(Settled {
                resolution: r.reason(),
                resolved_by: r.resolved_by.clone(),
            }),
            _ => None,
        })
    }

    fn not_pending(&self, rpc_id: &str) -> AskError {
        AskError::NotPending {
            settled: self.settled(rpc_id),
        }
    }

    /// No pending ask, no subscriber, no exclusive hold.
    fn is_unused(&self) -> bool {
        self.pending.is_empty() && self.subscribers() == 0 && !self.exclusive_held
    }

    /// The session's own subscribers (not its tenant's).
    fn subscribers(&self) -> usize {
        self.events_tx.as_ref().map_or(0, |tx| tx.receiver_count())
    }
}

impl MemoryBackend {
    /// A new backend. Within a tokio runtime it also starts the sweeper that retires
    /// unused sessions and expired outcomes; the sweeper ends with the backend.
    pub fn new(config: MemoryConfig) -> Self {
        let shards = (0..config.shards.max(1))
            .map(|_| Mutex::new(Shard::default()))
            .collect();
        let epoch_base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let inner = Arc::new(Inner {
            config,
            shards,
            hasher: RandomState::new(),
            tenants: Mutex::new(HashMap::new()),
            agents: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            next_epoch: AtomicU64::new(epoch_base),
            next_order: AtomicU64::new(0),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep_until_dropped(Arc::downgrade(&inner)));
        }
        Self { inner }
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

impl Inner {
    fn shard(&self, key: &SessionKey) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        self.shards[index].lock()
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn tenant_sender(&self, tenant: &Arc<str>) -> broadcast::Sender<Message> {
        self.tenants
            .lock()
            .entry(tenant.clone())
            .or_insert_with(|| TenantState {
                events_tx: broadcast::channel(self.config.tenant_buffer.max(1)).0,
                left_at: None,
                pending: 0,
                sessions: 0,
                agents: 0,
            })
            .events_tx
            .clone()
    }

    /// The session's state, made if it has none yet and its tenant may hold one more.
    fn session<'a>(
        &self,
        shard: &'a mut Shard,
        key: &SessionKey,
    ) -> Result<&'a mut Session, AskError> {
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
                .ok_or_else(|| AskError::Internal("a session's tenant has no state".into()))?;
            if tenant.sessions >= self.config.max_sessions_per_tenant {
                return Err(AskError::too_many_sessions(
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
        }))
    }

    /// Someone follows the session: a subscriber of it or an `all_sessions` subscriber
    /// of its tenant, now or less than the reconnect grace ago (Semantics 8).
    fn attended(&self, session: &Session, tenant: &str) -> bool {
        let grace = self.config.reconnect_grace;
        if session.subscribers() > 0 || within(session.left_at, grace) {
            return true;
        }
        self.tenants
            .lock()
            .get(tenant)
            .is_some_and(|t| t.events_tx.receiver_count() > 0 || within(t.left_at, grace))
    }

    /// Drops an unused session once its reconnect grace is over; until then it stays
    /// (with its history, so a reconnecting subscriber can resume).
    fn retire_if_unused(&self, shard: &mut Shard, key: &SessionKey) {
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

    fn sweep(&self, now: Instant) {
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
    fn resolve(&self, shard: &mut Shard, key: &SessionKey, seq: u64, outcome: Outcome) {
        let Some(session) = shard.sessions.get_mut(key) else {
            return;
        };
        let Some(ask) = session.pending.remove(&seq) else {
            return;
        };
        let rpc_id = ask
            .requested()
            .map(|r| r.rpc_id.clone())
            .unwrap_or_default();
        session.by_rpc_id.remove(rpc_id.as_str());
        let resolved = events::resolved(key, &rpc_id, &outcome);
        debug!(%rpc_id, reason = ?outcome.resolution, "ask resolved");
        if let Some(tenant) = self.tenants.lock().get_mut(&key.tenant) {
            tenant.pending = tenant.pending.saturating_sub(1);
        }
        session.push(self.config.history_len, Event::Resolved(resolved));
        if let Some(agent) = &ask.agent
            && let Some(lease) = self
                .agents
                .lock()
                .get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
            && lease.incarnation == agent.incarnation
        {
            lease.asks.remove(&(key.clone(), rpc_id.clone()));
        }
        if !ask.request_id.is_empty() {
            let expires = Instant::now() + self.config.request_retention;
            let request = (key.clone(), ask.request_id.clone());
            shard.request_expiry.push_back((expires, request.clone()));
            shard.requests.insert(
                request,
                RequestState::Done {
                    outcome: outcome.clone(),
                    rpc_id,
                    expires,
                },
            );
        }
        // Calls that went away (aborted, or waiting out a reattach grace) are skipped.
        for waiter in ask.waiters {
            let _ = waiter.send(outcome.clone());
        }
    }

    /// Resolves the given asks ABORTED: their agent's lease ended.
    fn abort_all(&self, asks: HashSet<(SessionKey, String)>) {
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
    fn rejoin(&self, shard: &mut Shard, key: &SessionKey, request_id: &str) -> Option<Registered> {
        let request = (key.clone(), request_id.to_owned());
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
            RequestState::Done {
                outcome: recorded,
                rpc_id,
                expires,
            } if *expires > Instant::now() => {
                let _ = outcome_tx.send(recorded.clone());
                debug!(%rpc_id, request_id, "a retry got its recorded outcome");
                Some(Registered {
                    rpc_id: rpc_id.clone(),
                    outcome,
                })
            }
            RequestState::Done { .. } => None,
        }
    }

    /// Semantics 7: the agent is attached now with that incarnation and has no live
    /// parent. Returns the agents guard so the caller can record the ask under it.
    fn check_caller(
        &self,
        tenant: &Arc<str>,
        agent: &AgentRef,
    ) -> Result<MutexGuard<'_, HashMap<AgentKey, AgentLease>>, AskError> {
        let agents = self.agents.lock();
        let lease = agents
            .get(&(tenant.clone(), agent.agent_id.clone()))
            .filter(|lease| lease.incarnation == agent.incarnation)
            .ok_or(AskError::CallerNotLive)?;
        let parent = &lease.parent_agent_id;
        if !parent.is_empty() && agents.contains_key(&(tenant.clone(), parent.clone())) {
            return Err(AskError::DelegatedCaller);
        }
        Ok(agents)
    }

    /// Stores a new ask after every check; the shard is locked by the caller.
    fn store(&self, shard: &mut Shard, mut ask: NewAsk) -> Result<Registered, AskError> {
        let key = ask.key.clone();
        let session = self.session(shard, &key)?;
        // The caller first, then the provider, then capacity. The agents guard is held
        // until the ask is recorded under its lease, so a detach cannot slip between.
        let mut agents = match &ask.agent {
            Some(agent) => Some(self.check_caller(&key.tenant, agent)?),
            None => None,
        };
        if ask.if_unattended == Unattended::Fail && !self.attended(session, &key.tenant) {
            return Err(AskError::NoProvider);
        }
        if session.pending.len() >= self.config.max_pending_per_session {
            return Err(AskError::TooManyPending(format!(
                "at most {} pending asks per session",
                self.config.max_pending_per_session
            )));
        }
        {
            let mut tenants = self.tenants.lock();
            let tenant = tenants
                .get_mut(&key.tenant)
                .ok_or_else(|| AskError::Internal("a session's tenant has no state".into()))?;
            if tenant.pending >= self.config.max_pending_per_tenant {
                return Err(AskError::TooManyPending(format!(
                    "at most {} pending asks per tenant",
                    self.config.max_pending_per_tenant
                )));
            }
            tenant.pending += 1;
        }
        let rpc_id = Uuid::now_v7().to_string();
        let requested = events::requested(&rpc_id, &mut ask);
        let message = session.push(self.config.history_len, Event::Requested(requested));
        let (outcome_tx, outcome) = oneshot::channel();
        session
            .by_rpc_id
            .insert(rpc_id.as_str().into(), session.head);
        session.pending.insert(
            session.head,
            PendingAsk {
                order: self.next_order.fetch_add(1, Ordering::Relaxed),
                requested: message,
                waiters: vec![outcome_tx],
                agent: ask.agent.clone(),
                request_id: ask.request_id.clone(),
            },
        );
        if let (Some(agents), Some(agent)) = (agents.as_mut(), &ask.agent)
            && let Some(lease) = agents.get_mut(&(key.tenant.clone(), agent.agent_id.clone()))
        {
            lease.asks.insert((key.clone(), rpc_id.clone()));
        }
        if !ask.request_id.is_empty() {
            shard.requests.insert(
                (key, ask.request_id),
                RequestState::Pending {
                    rpc_id: rpc_id.clone(),
                },
            );
        }
        Ok(Registered { rpc_id, outcome })
    }

    /// Starts (or, after a lag, restarts) following one session: the replay and a
    /// receiver taken under the same lock, so nothing falls between them.
    fn follow_session(
        &self,
        key: &SessionKey,
        after: Option<&str>,
        lagged: bool,
        take_exclusive: bool,
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), AskError> {
        let mut shard = self.shard(key);
        if self.is_closed() {
            return Err(AskError::ShuttingDown);
        }
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
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), AskError> {
        let session = self.session(shard, key)?;
        if !lagged && session.subscribers() >= self.config.max_subscribers_per_session {
            return Err(AskError::too_many_subscribers(
                self.config.max_subscribers_per_session,
            ));
        }
        if take_exclusive {
            if session.exclusive_held {
                return Err(AskError::DuplicateProvider);
            }
            session.exclusive_held = true;
        }
        let buffer = self.config.subscriber_buffer.max(1);
        let receiver = session
            .events_tx
            .get_or_insert_with(|| broadcast::channel(buffer).0)
            .subscribe();
        session.left_at = None;
        let mut replay = VecDeque::new();
        match after.and_then(|a| session.events_after(a)) {
            Some(events) => {
                replay.extend(events);
                replay.push_back(synced(session.head_cursor(), true));
            }
            None => {
                if lagged || after.is_some() {
                    replay.push_back(reset());
                }
                replay.extend(session.snapshot().map(|p| p.requested.clone()));
                replay.push_back(synced(session.head_cursor(), false));
            }
        }
        Ok((replay, receiver))
    }

    /// Starts (or restarts) following every session of a tenant. All shards are locked
    /// in index order so the snapshot and the receiver describe one instant.
    fn follow_tenant(
        &self,
        tenant: &Arc<str>,
        reset_first: bool,
        lagged: bool,
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), AskError> {
        let shards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        if self.is_closed() {
            return Err(AskError::ShuttingDown);
        }
        let sender = self.tenant_sender(tenant);
        let limit = self.config.max_all_sessions_per_tenant;
        if !lagged && sender.receiver_count() >= limit {
            return Err(AskError::too_many_all_sessions(limit));
        }
        let receiver = sender.subscribe();
        if let Some(state) = self.tenants.lock().get_mut(tenant) {
            state.left_at = None;
        }
        let mut pending: Vec<&PendingAsk> = shards
            .iter()
            .flat_map(|shard| shard.sessions.iter())
            .filter(|(key, _)| key.tenant == *tenant)
            .flat_map(|(_, session)| session.snapshot())
            .collect();
        pending.sort_by_key(|p| p.order);
        let mut replay = VecDeque::with_capacity(pending.len() + 2);
        if reset_first {
            replay.push_back(reset());
        }
        replay.extend(pending.into_iter().map(|p| p.requested.clone()));
        replay.push_back(synced(String::new(), false));
        Ok((replay, receiver))
    }

    /// A subscription ended: note when the scope lost its last subscriber (the
    /// reconnect grace counts from there) and retire the session if it is unused.
    fn unsubscribed(&self, scope: &Scope, exclusive: bool) {
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
                if let Some(state) = self.tenants.lock().get_mut(tenant)
                    && state.events_tx.receiver_count() == 0
                {
                    state.left_at = Some(Instant::now());
                }
            }
        }
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn register(&self, ask: NewAsk) -> Result<Registered, AskError> {
        let inner = &self.inner;
        let key = ask.key.clone();
        let mut shard = inner.shard(&key);
        if inner.is_closed() {
            return Err(AskError::ShuttingDown);
        }
        if !ask.request_id.is_empty()
            && let Some(joined) = inner.rejoin(&mut shard, &key, &ask.request_id)
        {
            return Ok(joined);
        }
        let stored = inner.store(&mut shard, ask);
        if stored.is_err() {
            inner.retire_if_unused(&mut shard, &key);
        }
        stored
    }

    async fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, AskError> {
        let shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(AskError::not_pending)?;
        session
            .by_rpc_id
            .get(rpc_id)
            .and_then(|seq| session.pending.get(seq))
            .and_then(PendingAsk::requested)
            .map(|r| r.questions.clone())
            .ok_or_else(|| session.not_pending(rpc_id))
    }

    async fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), AskError> {
        let mut shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(AskError::not_pending)?;
        let Some(&seq) = session.by_rpc_id.get(rpc_id) else {
            return Err(session.not_pending(rpc_id));
        };
        self.inner.resolve(&mut shard, key, seq, outcome);
        self.inner.retire_if_unused(&mut shard, key);
        Ok(())
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), AskError> {
        let mut shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(AskError::not_pending)?;
        let Some(&seq) = session.by_rpc_id.get(rpc_id) else {
            return Err(session.not_pending(rpc_id));
        };
        let waited_for = session
            .pending
            .get(&seq)
            .is_some_and(|ask| ask.waiters.iter().any(|w| !w.is_closed()));
        if !waited_for {
            self.inner.resolve(&mut shard, key, seq, Outcome::aborted());
            self.inner.retire_if_unused(&mut shard, key);
        }
        Ok(())
    }

    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, AskError> {
        let (replay, receiver) = match &scope {
            Scope::Session(key) => self.inner.follow_session(
                key,
                options.after.as_deref(),
                false,
                options.exclusive,
            )?,
            Scope::Tenant(tenant) => {
                self.inner
                    .follow_tenant(tenant, options.after.is_some(), false)?
            }
        };
        Ok(Box::pin(Subscription {
            inner: self.inner.clone(),
            scope,
            exclusive: options.exclusive,
            replay,
            live: Some(BroadcastStream::new(receiver)),
        }))
    }

    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, AskError> {
        let shard = self.inner.shard(key);
        Ok(shard
            .sessions
            .get(key)
            .map(|s| {
                s.snapshot()
                    .filter_map(PendingAsk::requested)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn pending_request(
        &self,
        key: &SessionKey,
        request_id: &str,
    ) -> Result<Option<String>, AskError> {
        let shard = self.inner.shard(key);
        Ok(
            match shard.requests.get(&(key.clone(), request_id.to_owned())) {
                Some(RequestState::Pending { rpc_id }) => Some(rpc_id.clone()),
                _ => None,
            },
        )
    }

    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, AskError> {
        if self.inner.is_closed() {
            return Err(AskError::ShuttingDown);
        }
        let incarnation = Uuid::now_v7().to_string();
        let (superseded_tx, superseded) = oneshot::channel();
        let lease = AgentLease {
            incarnation: incarnation.clone(),
            parent_agent_id: parent_agent_id.to_owned(),
            holder: holder.subject.clone(),
            asks: HashSet::new(),
            superseded: Some(superseded_tx),
        };
        let previous = {
            let mut agents = self.inner.agents.lock();
            let key = (Arc::<str>::from(tenant), agent_id.to_owned());
            match agents.get(&key) {
                Some(current) if current.holder != holder.subject && !holder.may_take_over => {
                    return Err(AskError::lease_held());
                }
                Some(_) => {}
                // A new agent of the tenant: counted against its cap (the agents lock
                // is held, so the count and the map agree).
                None => {
                    self.inner.tenant_sender(&key.0);
                    let mut tenants = self.inner.tenants.lock();
                    let state = tenants.get_mut(&key.0).ok_or_else(|| {
                        AskError::Internal("an agent's tenant has no state".into())
                    })?;
                    let limit = self.inner.config.max_agents_per_tenant;
                    if state.agents >= limit {
                        return Err(AskError::too_many_agents(limit));
                    }
                    state.agents += 1;
                }
            }
            agents.insert(key, lease)
        };
        if let Some(mut previous) = previous {
            debug!(agent_id, old = %previous.incarnation, "attach supersedes the previous lease");
            if let Some(superseded) = previous.superseded.take() {
                let _ = superseded.send(());
            }
            self.inner.abort_all(previous.asks);
        }
        Ok(Attached {
            incarnation,
            superseded,
        })
    }

    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let asks = {
            let mut agents = self.inner.agents.lock();
            let key = (Arc::<str>::from(tenant), agent_id.to_owned());
            match agents.get(&key) {
                Some(lease) if lease.incarnation == incarnation => {
                    if let Some(state) = self.inner.tenants.lock().get_mut(tenant) {
                        state.agents = state.agents.saturating_sub(1);
                    }
                    agents.remove(&key).map(|lease| lease.asks)
                }
                _ => None,
            }
        };
        if let Some(asks) = asks {
            debug!(
                agent_id,
                incarnation,
                pending = asks.len(),
                "agent detached"
            );
            self.inner.abort_all(asks);
        }
    }

    async fn healthy(&self) -> bool {
        true
    }

    async fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        for shard in self.inner.shards.iter() {
            let shard = shard.lock();
            for session in shard.sessions.values() {
                stats.pending += session.pending.len();
                stats.subscribers += session.subscribers();
            }
        }
        stats.subscribers += self
            .inner
            .tenants
            .lock()
            .values()
            .map(|t| t.events_tx.receiver_count())
            .sum::<usize>();
        stats
    }

    async fn dispose_all(&self) {
        let inner = &self.inner;
        inner.closed.store(true, Ordering::Release);
        let mut disposed = 0usize;
        for shard in inner.shards.iter() {
            let mut shard = shard.lock();
            let pending: Vec<(SessionKey, u64)> = shard
                .sessions
                .iter()
                .flat_map(|(key, s)| s.pending.keys().map(|seq| (key.clone(), *seq)))
                .collect();
            disposed += pending.len();
            for (key, seq) in pending {
                inner.resolve(&mut shard, &key, seq, Outcome::disposed());
            }
            // Dropping the sessions drops their senders: subscribers receive what is
            // queued, then their stream ends.
            shard.sessions.clear();
        }
        inner.tenants.lock().clear();
        inner.agents.lock().clear();
        debug!(disposed, "memory backend disposed");
    }
}

/// A subscriber's stream: the replay first, then live events from the broadcast
/// channel. A subscriber that falls behind gets `reset` and a fresh snapshot.
struct Subscription {
    inner: Arc<Inner>,
    scope: Scope,
    exclusive: bool,
    replay: VecDeque<Message>,
    live: Option<BroadcastStream<Message>>,
}

impl Subscription {
    fn resync(&mut self) -> bool {
        let follow = match &self.scope {
            Scope::Session(key) => self.inner.follow_session(key, None, true, false),
            Scope::Tenant(tenant) => self.inner.follow_tenant(tenant, true, true),
        };
        match follow {
            Ok((replay, receiver)) => {
                self.replay = replay;
                self.live = Some(BroadcastStream::new(receiver));
                true
            }
            Err(_) => false,
        }
    }
}

impl Stream for Subscription {
    /// Never an error: the memory backend cannot become unreachable.
    type Item = Result<Message, AskError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            let Some(live) = self.live.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(live).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => return Poll::Ready(Some(Ok(message))),
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(missed)))) => {
                    warn!(scope = ?self.scope, missed, "subscriber fell behind; sending reset and a fresh snapshot");
                    self.live = None;
                    if !self.resync() {
                        return Poll::Ready(None);
                    }
                }
                Poll::Ready(None) => {
                    self.live = None;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Release the receiver first so the scope can be seen as unsubscribed.
        self.live = None;
        self.inner.unsubscribed(&self.scope, self.exclusive);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn make(config: MemoryConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        (Arc::new(MemoryBackend::new(config)), Box::new(()))
    }

    backend_conformance_suite!(make);

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A cursor from a client is any text: parsing never panics, and the cursors
        /// this backend writes read back as written.
        #[test]
        fn cursors_parse_without_panic_and_round_trip(text in "\\PC{0,40}", epoch: u64, seq: u64) {
            let _ = parse_cursor(&text);
            proptest::prop_assert_eq!(parse_cursor(&cursor(epoch, seq)), Some((epoch, seq)));
        }
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(parse_cursor(&cursor(0xabc, 42)), Some((0xabc, 42)));
        for bad in ["", "-", "x-1", "1-x", "1", "1-1-1"] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }
}
