//! One session's state under its shard's lock: pending asks, the bounded history of
//! its events (for cursor resume), recorded outcomes of request ids.

use super::*;

#[derive(Default)]
pub(super) struct Shard {
    pub(super) sessions: HashMap<SessionKey, Session>,
    /// Unused sessions waiting out their reconnect grace, by when it ends.
    pub(super) retiring: VecDeque<(Instant, SessionKey)>,
    /// Asks by (session, request_id), for retries.
    pub(super) requests: HashMap<RequestKey, RequestState>,
    /// Recorded outcomes by when they expire.
    pub(super) request_expiry: VecDeque<(Instant, RequestKey)>,
}

/// A request id in its session; the id shared by the map and the expiry queue.
pub(super) type RequestKey = (SessionKey, Arc<str>);

pub(super) enum RequestState {
    Pending {
        rpc_id: String,
    },
    /// The ask's `resolved` event, the one in the history (it holds the rpc_id and
    /// the outcome): a finished request costs its key and a reference.
    Done {
        resolved: Message,
        expires: Instant,
    },
}

pub(super) struct Session {
    pub(super) epoch: u64,
    /// Sequence number of the last event.
    pub(super) head: u64,
    /// Pending asks by the sequence number of their `requested` event: oldest first.
    /// Boxed, so a tree node's eleven slots cost a pointer each, not an ask each
    /// (most sessions hold one or two asks).
    pub(super) pending: BTreeMap<u64, Box<PendingAsk>>,
    pub(super) by_rpc_id: HashMap<Arc<str>, u64>,
    /// The last `history_len` events, oldest first, with their sequence numbers.
    pub(super) history: VecDeque<(u64, Message)>,
    /// The channel to the session's own subscribers, made by the first of them and
    /// dropped with the last: a channel preallocates its whole buffer, and most
    /// sessions are only ever followed through their tenant's channel.
    pub(super) events_tx: Option<broadcast::Sender<Message>>,
    pub(super) tenant_tx: broadcast::Sender<Message>,
    pub(super) exclusive_held: bool,
    /// Bytes its pending asks hold (their encoded `requested`).
    pub(super) pending_bytes: u64,
    /// When the last subscriber left (None: never subscribed, or subscribed now).
    pub(super) left_at: Option<Instant>,
}

pub(super) struct PendingAsk {
    pub(super) order: u64,
    /// The encoded size of its `requested`: what it counts in its budgets.
    pub(super) bytes: u64,
    /// The `requested` event, replayed as is (same rpc_id, same cursor).
    pub(super) requested: Message,
    /// The calls waiting for the outcome: the Ask, and retries that joined it.
    pub(super) waiters: Vec<oneshot::Sender<Outcome>>,
    /// Empty when the ask has none.
    pub(super) request_id: Arc<str>,
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

pub(super) fn within(since: Option<Instant>, grace: Duration) -> bool {
    since.is_some_and(|t| t.elapsed() < grace)
}

impl Session {
    pub(super) fn push(&mut self, history_len: usize, event: Event) -> Message {
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

    pub(super) fn head_cursor(&self) -> String {
        cursor(self.epoch, self.head)
    }

    /// The pending asks, oldest first.
    pub(super) fn snapshot(&self) -> impl Iterator<Item = &PendingAsk> {
        self.pending.values().map(|ask| &**ask)
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
    pub(super) fn settled(&self, rpc_id: &str) -> Option<Settled> {
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

    /// No pending ask, no subscriber, no exclusive hold.
    pub(super) fn is_unused(&self) -> bool {
        self.pending.is_empty() && self.subscribers() == 0 && !self.exclusive_held
    }

    /// The session's own subscribers (not its tenant's).
    pub(super) fn subscribers(&self) -> usize {
        self.events_tx.as_ref().map_or(0, |tx| tx.receiver_count())
    }
}
