//! The embedded backend: state in this process, sharded by session so that sessions do
//! not contend on one lock.
//!
//! Each session keeps its pending asks, a bounded history of its events (for cursor
//! resume) and a broadcast channel to its subscribers; each tenant has one more channel
//! for `all_sessions` subscribers. Every mutation of a session happens under its shard's
//! mutex, which never spans an `.await`: that is what makes a claim first-wins and keeps
//! replay and live events free of gaps and duplicates.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    hash::{BuildHasher, RandomState},
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::{SystemTime, UNIX_EPOCH},
};

use askgate_proto::v1::{
    Question, Requested, Reset, Resolution, Resolved, SubscribeResponse, Synced,
    subscribe_response::Event,
};
use async_trait::async_trait;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{broadcast, oneshot};
use tokio_stream::{
    Stream,
    wrappers::{BroadcastStream, errors::BroadcastStreamRecvError},
};
use tracing::{debug, warn};
use uuid::Uuid;

use super::{Backend, EventStream, Registered, Scope, SubscribeOptions};
use crate::domain::{AskError, NewAsk, Outcome, SessionKey};

type Message = Arc<SubscribeResponse>;

/// Sizes of the in-memory state.
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
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            shards: 64,
            history_len: 1024,
            subscriber_buffer: 1024,
            tenant_buffer: 16 * 1024,
            max_pending_per_session: 1024,
        }
    }
}

/// The in-memory [`Backend`].
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
}

struct Inner {
    config: MemoryConfig,
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Lock order: a shard (or all shards, in index order) before `tenants`.
    tenants: Mutex<HashMap<Arc<str>, broadcast::Sender<Message>>>,
    /// Set once at shutdown; checked under a shard lock before anything is stored.
    closed: AtomicBool,
    /// Distinguishes incarnations of a session's state, so a cursor from a session
    /// that was dropped and re-created (or from another process) is never trusted.
    next_epoch: AtomicU64,
    /// Orders pending asks across sessions for `all_sessions` replay.
    next_order: AtomicU64,
}

#[derive(Default)]
struct Shard {
    sessions: HashMap<SessionKey, Session>,
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
    events_tx: broadcast::Sender<Message>,
    tenant_tx: broadcast::Sender<Message>,
    exclusive_held: bool,
}

struct PendingAsk {
    order: u64,
    /// The `requested` event, replayed as is (same rpc_id, same cursor).
    requested: Message,
    outcome_tx: oneshot::Sender<Outcome>,
}

impl PendingAsk {
    fn requested(&self) -> Option<&Requested> {
        match &self.requested.event {
            Some(Event::Requested(r)) => Some(r),
            _ => None,
        }
    }
}

fn cursor(epoch: u64, seq: u64) -> String {
    format!("{epoch:x}-{seq}")
}

fn parse_cursor(cursor: &str) -> Option<(u64, u64)> {
    let (epoch, seq) = cursor.split_once('-')?;
    Some((u64::from_str_radix(epoch, 16).ok()?, seq.parse().ok()?))
}

fn now() -> prost_types::Timestamp {
    SystemTime::now().into()
}

fn message(cursor: String, event: Event) -> Message {
    Arc::new(SubscribeResponse {
        cursor,
        event: Some(event),
    })
}

fn synced(cursor: String, resumed: bool) -> Message {
    message(cursor, Event::Synced(Synced { resumed }))
}

fn reset() -> Message {
    message(String::new(), Event::Reset(Reset {}))
}

impl Session {
    fn push(&mut self, history_len: usize, event: Event) -> Message {
        self.head += 1;
        let msg = message(cursor(self.epoch, self.head), event);
        if self.history.len() == history_len {
            self.history.pop_front();
        }
        if history_len > 0 {
            self.history.push_back((self.head, msg.clone()));
        }
        // Sending fails only when nobody listens, which is fine.
        let _ = self.events_tx.send(msg.clone());
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
    fn remembered_resolution(&self, rpc_id: &str) -> Option<Resolution> {
        self.history.iter().rev().find_map(|(_, m)| match &m.event {
            Some(Event::Resolved(r)) if r.rpc_id == rpc_id => Some(r.reason()),
            _ => None,
        })
    }

    fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.events_tx.receiver_count() == 0 && !self.exclusive_held
    }

    /// Removes the ask, hands over its outcome and broadcasts `resolved`.
    fn resolve(&mut self, history_len: usize, key: &SessionKey, seq: u64, outcome: Outcome) {
        let Some(ask) = self.pending.remove(&seq) else {
            return;
        };
        let rpc_id = ask
            .requested()
            .map(|r| r.rpc_id.clone())
            .unwrap_or_default();
        self.by_rpc_id.remove(rpc_id.as_str());
        let resolved = Resolved {
            rpc_id,
            session_id: key.session_id.to_string(),
            reason: outcome.resolution.into(),
            answers: outcome.answers.clone(),
            resolved_by: outcome.resolved_by.clone(),
            resolved_at: Some(now()),
            cancel_reason: outcome.cancel_reason.clone().unwrap_or_default(),
        };
        debug!(rpc_id = %resolved.rpc_id, reason = ?outcome.resolution, "ask resolved");
        self.push(history_len, Event::Resolved(resolved));
        // The waiting Ask may be gone already (aborted); nothing to hand over then.
        let _ = ask.outcome_tx.send(outcome);
    }
}

impl MemoryBackend {
    pub fn new(config: MemoryConfig) -> Self {
        let shards = (0..config.shards.max(1))
            .map(|_| Mutex::new(Shard::default()))
            .collect();
        let epoch_base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Self {
            inner: Arc::new(Inner {
                config,
                shards,
                hasher: RandomState::new(),
                tenants: Mutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
                next_epoch: AtomicU64::new(epoch_base),
                next_order: AtomicU64::new(0),
            }),
        }
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
            .or_insert_with(|| broadcast::channel(self.config.tenant_buffer.max(1)).0)
            .clone()
    }

    fn session<'a>(&self, shard: &'a mut Shard, key: &SessionKey) -> &'a mut Session {
        shard
            .sessions
            .entry(key.clone())
            .or_insert_with(|| Session {
                epoch: self.next_epoch.fetch_add(1, Ordering::Relaxed),
                head: 0,
                pending: BTreeMap::new(),
                by_rpc_id: HashMap::new(),
                history: VecDeque::new(),
                events_tx: broadcast::channel(self.config.subscriber_buffer.max(1)).0,
                tenant_tx: self.tenant_sender(&key.tenant),
                exclusive_held: false,
            })
    }

    fn drop_if_idle(shard: &mut Shard, key: &SessionKey) {
        if shard.sessions.get(key).is_some_and(Session::is_idle) {
            shard.sessions.remove(key);
        }
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
        let session = self.session(&mut shard, key);
        if take_exclusive {
            if session.exclusive_held {
                return Err(AskError::DuplicateProvider);
            }
            session.exclusive_held = true;
        }
        let receiver = session.events_tx.subscribe();
        let resumed = after.and_then(|a| session.events_after(a));
        let mut replay = VecDeque::new();
        match resumed {
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
    ) -> Result<(VecDeque<Message>, broadcast::Receiver<Message>), AskError> {
        let shards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        if self.is_closed() {
            return Err(AskError::ShuttingDown);
        }
        let receiver = self.tenant_sender(tenant).subscribe();
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
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn register(&self, ask: NewAsk) -> Result<Registered, AskError> {
        let inner = &self.inner;
        let mut shard = inner.shard(&ask.key);
        if inner.is_closed() {
            return Err(AskError::ShuttingDown);
        }
        let session = inner.session(&mut shard, &ask.key);
        if session.pending.len() >= inner.config.max_pending_per_session {
            return Err(AskError::TooManyPending(format!(
                "at most {} pending asks per session",
                inner.config.max_pending_per_session
            )));
        }
        let rpc_id = Uuid::now_v7().to_string();
        let requested = Requested {
            rpc_id: rpc_id.clone(),
            session_id: ask.key.session_id.to_string(),
            questions: ask.questions,
            agent: ask.agent,
            labels: ask.labels,
            requested_at: Some(now()),
            expires_at: ask.expires_at.map(Into::into),
        };
        let message = session.push(inner.config.history_len, Event::Requested(requested));
        let (outcome_tx, outcome) = oneshot::channel();
        session
            .by_rpc_id
            .insert(rpc_id.as_str().into(), session.head);
        session.pending.insert(
            session.head,
            PendingAsk {
                order: inner.next_order.fetch_add(1, Ordering::Relaxed),
                requested: message,
                outcome_tx,
            },
        );
        Ok(Registered { rpc_id, outcome })
    }

    async fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, AskError> {
        let shard = self.inner.shard(key);
        let session = shard
            .sessions
            .get(key)
            .ok_or(AskError::NotPending { resolution: None })?;
        session
            .by_rpc_id
            .get(rpc_id)
            .and_then(|seq| session.pending.get(seq))
            .and_then(PendingAsk::requested)
            .map(|r| r.questions.clone())
            .ok_or_else(|| AskError::NotPending {
                resolution: session.remembered_resolution(rpc_id),
            })
    }

    async fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), AskError> {
        let history_len = self.inner.config.history_len;
        let mut shard = self.inner.shard(key);
        let session = shard
            .sessions
            .get_mut(key)
            .ok_or(AskError::NotPending { resolution: None })?;
        let Some(&seq) = session.by_rpc_id.get(rpc_id) else {
            return Err(AskError::NotPending {
                resolution: session.remembered_resolution(rpc_id),
            });
        };
        session.resolve(history_len, key, seq, outcome);
        Inner::drop_if_idle(&mut shard, key);
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
            Scope::Tenant(tenant) => self.inner.follow_tenant(tenant, options.after.is_some())?,
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

    async fn dispose_all(&self) {
        let inner = &self.inner;
        inner.closed.store(true, Ordering::Release);
        let mut disposed = 0usize;
        for shard in inner.shards.iter() {
            let mut shard = shard.lock();
            for (key, mut session) in shard.sessions.drain() {
                let seqs: Vec<u64> = session.pending.keys().copied().collect();
                disposed += seqs.len();
                for seq in seqs {
                    session.resolve(inner.config.history_len, &key, seq, Outcome::disposed());
                }
                // Dropping the session drops its senders: subscribers receive what is
                // queued, then their stream ends.
            }
        }
        inner.tenants.lock().clear();
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
            Scope::Tenant(tenant) => self.inner.follow_tenant(tenant, true),
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
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(message));
            }
            let Some(live) = self.live.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(live).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => return Poll::Ready(Some(message)),
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
        // Release the receiver first so the session can be seen as idle.
        self.live = None;
        if let Scope::Session(key) = &self.scope {
            let mut shard = self.inner.shard(key);
            if self.exclusive
                && let Some(session) = shard.sessions.get_mut(key)
            {
                session.exclusive_held = false;
            }
            Inner::drop_if_idle(&mut shard, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    backend_conformance_suite!(MemoryBackend::new);

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(parse_cursor(&cursor(0xabc, 42)), Some((0xabc, 42)));
        for bad in ["", "-", "x-1", "1-x", "1", "1-1-1"] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }
}
