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
        Arc, OnceLock, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use askgate_proto::v1::{
    AgentRef, Question, Requested, Resolved, Unattended, subscribe_response::Event,
};
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

use askgate_core::backend::{
    Asked, Attached, Backend, Budget, BudgetHold, Committed, EventStream, Holder, Noticed,
    Registered, RequestAbort, Scope, StateConfig, Stats, SubscribeOptions, Tap,
    events::{self, Message, message},
};
use askgate_core::domain::{Error, NewAsk, Outcome, SessionKey, Settled};

mod hooks;
mod session;
mod state;
mod subscription;

pub use hooks::MemoryHookStore;
use session::*;
use subscription::*;

/// How often expired state (unused sessions, recorded outcomes) is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// The in-memory [`Backend`].
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

struct Inner {
    config: StateConfig,
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
    /// Where committed events are reported, once set.
    tap: OnceLock<Tap>,
    /// Units of tenants' budgets held (see [`Backend::hold`]).
    budgets: Arc<Budgets>,
}

/// Units held of each tenant's budgets.
type Budgets = Mutex<HashMap<(Arc<str>, Budget), usize>>;

/// A unit of a tenant's budget on this node; given back on drop.
struct MemoryHold {
    budgets: Arc<Budgets>,
    key: (Arc<str>, Budget),
}

impl Drop for MemoryHold {
    fn drop(&mut self) {
        let mut budgets = self.budgets.lock();
        if let Some(held) = budgets.get_mut(&self.key) {
            *held -= 1;
            if *held == 0 {
                budgets.remove(&self.key);
            }
        }
    }
}

struct TenantState {
    events_tx: broadcast::Sender<Message>,
    /// When the last `all_sessions` subscriber that counts (not passive) left.
    left_at: Option<Instant>,
    /// Receivers of `events_tx` held by passive subscriptions: they do not make the
    /// tenant's sessions attended.
    passive: usize,
    /// Pending asks over all the tenant's sessions.
    pending: usize,
    /// Bytes those asks hold.
    pending_bytes: u64,
    /// Sessions of the tenant in the shards (those retiring included).
    sessions: usize,
    /// Agents of the tenant attached now.
    agents: usize,
}

impl TenantState {
    /// Open `all_sessions` subscriptions that make the tenant's sessions attended.
    fn attending(&self) -> usize {
        self.events_tx.receiver_count().saturating_sub(self.passive)
    }
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

impl MemoryBackend {
    /// A new backend. Within a tokio runtime it also starts the sweeper that retires
    /// unused sessions and expired outcomes; the sweeper ends with the backend.
    pub fn new(config: StateConfig) -> Self {
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
            tap: OnceLock::new(),
            budgets: Arc::default(),
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

#[async_trait]
impl Backend for MemoryBackend {
    async fn hold(&self, tenant: &str, budget: Budget, max: usize) -> Result<BudgetHold, Error> {
        let key = (Arc::<str>::from(tenant), budget);
        let mut budgets = self.inner.budgets.lock();
        let held = budgets.entry(key.clone()).or_default();
        if *held >= max {
            return Err(budget.exhausted(max));
        }
        *held += 1;
        Ok(Box::new(MemoryHold {
            budgets: self.inner.budgets.clone(),
            key,
        }))
    }

    async fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        let inner = &self.inner;
        let key = ask.key.clone();
        let mut shard = inner.shard(&key);
        if inner.is_closed() {
            return Err(Error::ShuttingDown);
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

    async fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, Error> {
        let shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(Error::not_pending)?;
        session
            .by_rpc_id
            .get(rpc_id)
            .and_then(|seq| session.pending.get(seq))
            .and_then(|ask| ask.requested())
            .map(|r| r.questions.clone())
            .ok_or_else(|| session.not_pending(rpc_id))
    }

    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error> {
        let mut shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(Error::not_pending)?;
        let Some(&seq) = session.by_rpc_id.get(rpc_id) else {
            return Err(session.not_pending(rpc_id));
        };
        self.inner.resolve(&mut shard, key, seq, outcome);
        self.inner.retire_if_unused(&mut shard, key);
        Ok(())
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        let mut shard = self.inner.shard(key);
        let session = shard.sessions.get(key).ok_or_else(Error::not_pending)?;
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
    ) -> Result<EventStream, Error> {
        let (replay, receiver) = match &scope {
            Scope::Session(key) => self.inner.follow_session(
                key,
                options.after.as_deref(),
                false,
                options.exclusive,
            )?,
            Scope::Tenant(tenant) => {
                self.inner
                    .follow_tenant(tenant, options.after.is_some(), false, options.passive)?
            }
        };
        Ok(Box::pin(Subscription {
            inner: self.inner.clone(),
            scope,
            exclusive: options.exclusive,
            passive: options.passive,
            replay,
            live: Some(BroadcastStream::new(receiver)),
        }))
    }

    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error> {
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

    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        if self.inner.is_closed() {
            return Err(Error::ShuttingDown);
        }
        let mut shard = self.inner.shard(key);
        let request: RequestKey = (key.clone(), Arc::from(request_id));
        let now = Instant::now();
        match shard.requests.get(&request) {
            Some(RequestState::Pending { rpc_id }) => Ok(RequestAbort::Pending(rpc_id.clone())),
            Some(RequestState::Done { expires, .. }) if *expires > now => Ok(RequestAbort::Ended),
            _ => {
                let expires = now + self.inner.config.request_retention;
                shard.request_expiry.push_back((expires, request.clone()));
                let recorded = message(String::new(), Event::Resolved(resolved));
                shard.requests.insert(
                    request,
                    RequestState::Done {
                        resolved: recorded,
                        expires,
                    },
                );
                Ok(RequestAbort::Recorded)
            }
        }
    }

    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        if self.inner.is_closed() {
            return Err(Error::ShuttingDown);
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
                    return Err(Error::lease_held());
                }
                Some(_) => {}
                // A new agent of the tenant: counted against its cap (the agents lock
                // is held, so the count and the map agree).
                None => {
                    self.inner.tenant_sender(&key.0);
                    let mut tenants = self.inner.tenants.lock();
                    let state = tenants
                        .get_mut(&key.0)
                        .ok_or_else(|| Error::Internal("an agent's tenant has no state".into()))?;
                    let limit = self.inner.config.max_agents_per_tenant;
                    if state.agents >= limit {
                        return Err(Error::too_many_agents(limit));
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

    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Result<Option<Noticed>, Error> {
        let mut shard = self.inner.shard(key);
        let Some(session) = shard.sessions.get_mut(key) else {
            return Ok(None);
        };
        let requested = session
            .by_rpc_id
            .get(rpc_id)
            .and_then(|seq| session.pending.get(seq))
            .and_then(|ask| ask.requested())
            .cloned();
        Ok(requested.map(|requested| Noticed {
            message: session.push(self.inner.config.history_len, notice),
            requested,
        }))
    }

    fn set_tap(&self, tap: Tap) {
        let _ = self.inner.tap.set(tap);
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        (Arc::new(MemoryBackend::new(config)), Box::new(()))
    }

    askgate_core::backend_conformance_suite!(make);

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
