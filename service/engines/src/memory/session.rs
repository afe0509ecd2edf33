//! One session's state, under its shard's lock: its pending asks, the bounded history
//! of its events (for cursor resume), its subscribers' channel and exclusive hold.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use askgate_core::{
    backend::events::{self, Message, message},
    domain::{Error, Outcome, Settled, quorum::Votes},
};

use super::journal::StoredSession;
use askgate_proto::v1::{AgentRef, Requested, subscribe_response::Event};
use tokio::{
    sync::{broadcast, oneshot},
    time::Instant,
};

pub(super) struct Session {
    epoch: u64,
    /// Sequence number of the last event.
    head: u64,
    /// Pending asks by the sequence number of their `requested` event: oldest first.
    /// Boxed, so a tree node's eleven slots cost a pointer each, not an ask each
    /// (most sessions hold one or two asks).
    pending: BTreeMap<u64, Box<PendingAsk>>,
    by_rpc_id: HashMap<Arc<str>, u64>,
    /// The last events (at most `history_len`, and at most `history_bytes` of them
    /// but the newest), oldest first, with their sequence numbers.
    history: VecDeque<(u64, Message)>,
    /// The encoded bytes of `history`.
    history_bytes: u64,
    /// The channel to the session's own subscribers, made by the first of them and
    /// dropped with the last: a channel preallocates its whole buffer, and most
    /// sessions are only ever followed through their tenant's channel.
    events_tx: Option<broadcast::Sender<Message>>,
    tenant_tx: broadcast::Sender<Message>,
    exclusive_held: bool,
    /// Bytes its pending asks hold (their encoded `requested`).
    pending_bytes: u64,
    /// When the last subscriber left (None: never subscribed, or subscribed now).
    left_at: Option<Instant>,
}

/// An ask waiting for its outcome.
pub(super) struct PendingAsk {
    /// Its place among all the engine's pending asks, for `all_sessions` replay.
    pub order: u64,
    /// The encoded size of its `requested`: what it counts in its budgets.
    pub bytes: u64,
    /// The `requested` event, replayed as is (same rpc_id, same cursor).
    pub requested: Message,
    /// The calls waiting for the outcome: the Ask, and retries that joined it.
    pub waiters: Vec<oneshot::Sender<Box<Outcome>>>,
    /// Empty when the ask has none.
    pub request_id: Arc<str>,
    /// The votes cast on a quorum ask so far (none on another ask).
    pub votes: Option<Box<Votes>>,
}

impl PendingAsk {
    pub(super) fn requested(&self) -> Option<&Requested> {
        match &self.requested.event {
            Some(Event::Requested(r)) => Some(r),
            _ => None,
        }
    }

    /// The agent the ask was made under, as its `requested` event names it.
    pub(super) fn agent(&self) -> Option<&AgentRef> {
        self.requested().and_then(|r| r.agent.as_ref())
    }
}

/// This engine's cursors: the session's epoch (a number, in hex) and the event's
/// sequence number, in the shared format.
pub(super) fn cursor(epoch: u64, seq: u64) -> String {
    events::cursor(&format!("{epoch:x}"), seq)
}

pub(super) fn parse_cursor(cursor: &str) -> Option<(u64, u64)> {
    let (epoch, seq) = events::parse_cursor(cursor)?;
    Some((u64::from_str_radix(epoch, 16).ok()?, seq))
}

/// How much of its events a session's history keeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct HistoryLimits {
    /// Events (0: none).
    pub len: usize,
    /// Encoded bytes, the newest event whatever its size.
    pub bytes: u64,
}

/// What an event counts in its session's history.
fn event_bytes(message: &Message) -> u64 {
    prost::Message::encoded_len(&**message) as u64
}

/// Whether `since` is less than `grace` ago.
pub(super) fn within(since: Option<Instant>, grace: Duration) -> bool {
    since.is_some_and(|t| t.elapsed() < grace)
}

impl Session {
    /// A new session of the incarnation `epoch`, publishing to its tenant's channel too.
    pub(super) fn new(epoch: u64, tenant_tx: broadcast::Sender<Message>) -> Self {
        Self {
            epoch,
            head: 0,
            pending: BTreeMap::new(),
            by_rpc_id: HashMap::new(),
            history: VecDeque::new(),
            history_bytes: 0,
            events_tx: None,
            tenant_tx,
            exclusive_held: false,
            pending_bytes: 0,
            left_at: None,
        }
    }

    /// A session as a store kept it, with its history and pending asks (whose calls
    /// are gone). Restored sessions count as just left by their subscribers: they wait
    /// out the reconnect grace from now.
    pub(super) fn restore(stored: StoredSession, tenant_tx: broadcast::Sender<Message>) -> Self {
        let mut session = Self::new(stored.epoch, tenant_tx);
        session.head = stored.head;
        session.history = stored.history.into();
        session.history_bytes = session.history.iter().map(|(_, m)| event_bytes(m)).sum();
        session.left_at = Some(Instant::now());
        for ask in stored.asks {
            session.pending_bytes += ask.bytes;
            session
                .by_rpc_id
                .insert(ask.rpc_id.as_str().into(), ask.seq);
            let pending = PendingAsk {
                order: ask.order,
                bytes: ask.bytes,
                requested: ask.requested,
                waiters: Vec::new(),
                request_id: ask.request_id,
                votes: ask.votes.map(Box::new),
            };
            session.pending.insert(ask.seq, Box::new(pending));
        }
        session
    }

    /// The pending asks made by agents: each one's agent and rpc_id.
    pub(super) fn asks_of_agents(&self) -> impl Iterator<Item = (&AgentRef, &str)> {
        self.by_rpc_id.iter().filter_map(|(rpc_id, seq)| {
            let agent = self.pending.get(seq)?.agent()?;
            Some((agent, &**rpc_id))
        })
    }

    /// What the pending asks hold: how many, and their bytes.
    pub(super) fn pending_size(&self) -> (usize, u64) {
        (self.pending.len(), self.pending_bytes)
    }

    /// The place after the last of its pending asks among all the engine's.
    pub(super) fn next_order(&self) -> u64 {
        self.pending
            .values()
            .map(|ask| ask.order + 1)
            .max()
            .unwrap_or(0)
    }

    /// Sequence number of the last event.
    pub(super) fn head(&self) -> u64 {
        self.head
    }

    /// Tells every call waiting on the session's asks that the ask was handed over
    /// (`outcome`, DISPOSED): they retry with its request_id, and the ask stays.
    pub(super) fn hand_over(&mut self, outcome: &Outcome) {
        for ask in self.pending.values_mut() {
            for waiter in ask.waiters.drain(..) {
                let _ = waiter.send(Box::new(outcome.clone()));
            }
        }
    }

    /// Appends an event to the history, which keeps the last `limits.len` events,
    /// dropping the oldest while it holds more than `limits.bytes` (the newest always
    /// stays; a resume from before what it keeps gets `reset`). Subscribers get it from
    /// [`Self::publish`], once it is recorded.
    ///
    /// Returns the event and its encoded size.
    pub(super) fn push(&mut self, limits: HistoryLimits, event: Event) -> (Message, u64) {
        self.head += 1;
        let msg = message(cursor(self.epoch, self.head), event);
        let size = event_bytes(&msg);
        if limits.len > 0 {
            self.history_bytes += size;
            self.history.push_back((self.head, msg.clone()));
        }
        while self.history.len() > 1
            && (self.history.len() > limits.len || self.history_bytes > limits.bytes)
        {
            if let Some((_, dropped)) = self.history.pop_front() {
                self.history_bytes = self.history_bytes.saturating_sub(event_bytes(&dropped));
            }
        }
        (msg, size)
    }

    /// Sends `msg` (the event just pushed) to the session's and the tenant's
    /// subscribers. Called under the shard's lock, after every change the event stands
    /// for is recorded: a durable engine's subscriber waits for those records to be on
    /// disk before it hands the event on.
    pub(super) fn publish(&self, msg: &Message) {
        // Sending fails only when nobody listens, which is fine.
        if let Some(events_tx) = &self.events_tx {
            let _ = events_tx.send(msg.clone());
        }
        let _ = self.tenant_tx.send(msg.clone());
    }

    /// The sequence number of the oldest event the history keeps (the head's next when
    /// it keeps none): what a store keeps of it starts there.
    pub(super) fn oldest_kept(&self) -> u64 {
        self.history.front().map_or(self.head + 1, |(seq, _)| *seq)
    }

    pub(super) fn head_cursor(&self) -> String {
        cursor(self.epoch, self.head)
    }

    /// The pending asks, oldest first.
    pub(super) fn snapshot(&self) -> impl Iterator<Item = &PendingAsk> {
        self.pending.values().map(|ask| &**ask)
    }

    /// The `requested` events of the pending asks, oldest first.
    pub(super) fn requested_all(&self) -> Vec<Requested> {
        self.snapshot()
            .filter_map(PendingAsk::requested)
            .cloned()
            .collect()
    }

    /// How many asks are pending.
    pub(super) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The pending ask `rpc_id`, or NOT_PENDING (with how it ended, when remembered).
    pub(super) fn pending(&self, rpc_id: &str) -> Result<&PendingAsk, Error> {
        self.by_rpc_id
            .get(rpc_id)
            .and_then(|seq| self.pending.get(seq))
            .map(|ask| &**ask)
            .ok_or_else(|| self.not_pending(rpc_id))
    }

    /// The pending ask `rpc_id` to change, or NOT_PENDING.
    pub(super) fn pending_mut(&mut self, rpc_id: &str) -> Result<&mut PendingAsk, Error> {
        match self.by_rpc_id.get(rpc_id).copied() {
            Some(seq) if self.pending.contains_key(&seq) => Ok(self
                .pending
                .get_mut(&seq)
                .map(|ask| &mut **ask)
                .expect("just found")),
            _ => Err(self.not_pending(rpc_id)),
        }
    }

    /// The `requested` event of the pending ask `rpc_id`, or NOT_PENDING.
    pub(super) fn requested(&self, rpc_id: &str) -> Result<&Requested, Error> {
        self.pending(rpc_id)?
            .requested()
            .ok_or_else(|| self.not_pending(rpc_id))
    }

    /// Joins a call to the pending ask `rpc_id`; false when it is not pending.
    pub(super) fn join(&mut self, rpc_id: &str, waiter: oneshot::Sender<Box<Outcome>>) -> bool {
        let Some(ask) = self
            .by_rpc_id
            .get(rpc_id)
            .and_then(|seq| self.pending.get_mut(seq))
        else {
            return false;
        };
        ask.waiters.retain(|w| !w.is_closed());
        ask.waiters.push(waiter);
        true
    }

    /// Refused with TOO_MANY_PENDING or PENDING_BYTES when one more ask of `bytes`
    /// would exceed the session's caps.
    pub(super) fn check_room(
        &self,
        max_pending: usize,
        max_bytes: u64,
        bytes: u64,
    ) -> Result<(), Error> {
        if self.pending.len() >= max_pending {
            return Err(Error::TooManyPending(format!(
                "at most {max_pending} pending asks per session"
            )));
        }
        if self.pending_bytes + bytes > max_bytes {
            return Err(Error::pending_bytes_full("session", max_bytes));
        }
        Ok(())
    }

    /// Adds an ask whose `requested` was just pushed (it is the head event).
    pub(super) fn add_pending(&mut self, rpc_id: &str, ask: PendingAsk) {
        self.pending_bytes += ask.bytes;
        self.by_rpc_id.insert(rpc_id.into(), self.head);
        self.pending.insert(self.head, Box::new(ask));
    }

    /// Takes the pending ask `rpc_id` out; None when it is not pending.
    pub(super) fn take_pending(&mut self, rpc_id: &str) -> Option<PendingAsk> {
        let seq = self.by_rpc_id.remove(rpc_id)?;
        let ask = *self.pending.remove(&seq)?;
        self.pending_bytes = self.pending_bytes.saturating_sub(ask.bytes);
        Some(ask)
    }

    /// The rpc_ids of every pending ask.
    pub(super) fn pending_rpc_ids(&self) -> Vec<String> {
        self.by_rpc_id.keys().map(|id| id.to_string()).collect()
    }

    /// Whether a retry can reattach to the pending ask `rpc_id` (it has a request_id).
    pub(super) fn reattachable(&self, rpc_id: &str) -> bool {
        self.pending(rpc_id)
            .is_ok_and(|ask| !ask.request_id.is_empty())
    }

    /// Whether a call still waits for the pending ask `rpc_id`.
    pub(super) fn waited_for(&self, rpc_id: &str) -> bool {
        self.pending(rpc_id)
            .is_ok_and(|ask| ask.waiters.iter().any(|w| !w.is_closed()))
    }

    /// What a subscriber gets first: the events after `after` (then `synced`) when the
    /// history still holds them, else `reset` (after a lag, or for a cursor it cannot
    /// resume) and a snapshot of the pending asks.
    pub(super) fn replay(&self, after: Option<&str>, lagged: bool) -> VecDeque<Message> {
        match after.and_then(|a| self.events_after(a)) {
            Some(missed) => events::resumed_replay(missed, self.head_cursor()),
            None => events::snapshot_replay(
                lagged || after.is_some(),
                self.snapshot().map(|p| p.requested.clone()),
                self.head_cursor(),
            ),
        }
    }

    /// The events after `after`, when the history still holds all of them.
    pub(super) fn events_after(&self, after: &str) -> Option<Vec<Message>> {
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

    pub(super) fn not_pending(&self, rpc_id: &str) -> Error {
        Error::NotPending {
            settled: self.settled(rpc_id),
        }
    }

    /// A new subscriber of the session (within `max` of them unless `lagged`: a
    /// resync keeps its place), holding the exclusive hold if `take_exclusive`.
    pub(super) fn subscribe(
        &mut self,
        max: usize,
        lagged: bool,
        take_exclusive: bool,
        buffer: usize,
    ) -> Result<broadcast::Receiver<Message>, Error> {
        if !lagged && self.subscribers() >= max {
            return Err(Error::too_many_subscribers(max));
        }
        if take_exclusive {
            if self.exclusive_held {
                return Err(Error::DuplicateProvider);
            }
            self.exclusive_held = true;
        }
        let receiver = self
            .events_tx
            .get_or_insert_with(|| broadcast::channel(buffer.max(1)).0)
            .subscribe();
        self.left_at = None;
        Ok(receiver)
    }

    /// A subscriber left (its receiver dropped already): the reconnect grace counts
    /// from the last one's leaving.
    pub(super) fn unsubscribed(&mut self, exclusive: bool) {
        if exclusive {
            self.exclusive_held = false;
        }
        if self.subscribers() == 0 {
            self.events_tx = None;
            self.left_at = Some(Instant::now());
        }
    }

    /// Someone subscribed to the session now or less than `grace` ago.
    pub(super) fn followed_within(&self, grace: Duration) -> bool {
        self.subscribers() > 0 || within(self.left_at, grace)
    }

    /// When the last subscriber left (None: never subscribed, or subscribed now).
    pub(super) fn left_at(&self) -> Option<Instant> {
        self.left_at
    }

    /// No pending ask, no subscriber, no exclusive hold.
    pub(super) fn is_unused(&self) -> bool {
        self.pending.is_empty() && self.subscribers() == 0 && !self.exclusive_held
    }

    /// The session's own subscribers (not its tenant's).
    pub(super) fn subscribers(&self) -> usize {
        self.events_tx.as_ref().map_or(0, |tx| tx.receiver_count())
    }
}
