//! Where the memory engine's changes go when its state is made durable (the sqlite
//! engine's write-ahead store): each change as it happens, under the locks that order
//! it, and what must wait until the changes before it are on disk.
//!
//! The journal is the sending half; a writer (the sqlite engine's) takes its entries
//! in order, makes each group of changes durable at once, and only then runs the
//! actions queued behind them: an outcome handed to a waiting call, an event reported
//! to the webhooks, an acknowledgement awaited by [`Journal::synced`]. A writer that
//! fails stops: nothing queued after the failure is acknowledged.

use std::{
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, AtomicUsize, Ordering},
        mpsc,
    },
    time::{Duration, SystemTime},
};

use askgate_core::{
    backend::{
        events::Message,
        hooks::records::{
            DeliveryRecord, EndpointRecord, GrantRecord, PersonRecord, PolicySetRecord, TimerRecord,
        },
    },
    domain::{Error, Fingerprint, SessionKey},
};
use tokio::sync::{Notify, oneshot, watch};

/// A change to the state, as the store keeps it.
#[derive(Debug)]
pub enum Change {
    /// A session got state: its incarnation.
    SessionOpened { key: SessionKey, epoch: u64 },
    /// A session was dropped with its history (its request records stay).
    SessionRetired { key: SessionKey },
    /// The session's event `seq`; the store keeps its history from `oldest_kept` on
    /// (past `seq`: none of it), which moved with this event when `trimmed`.
    Event {
        key: SessionKey,
        seq: u64,
        message: Message,
        oldest_kept: u64,
        trimmed: bool,
    },
    /// A new pending ask: its `requested` event is the session's event `seq`.
    AskAdded(Box<AddedAsk>),
    /// The ask is no longer pending (its votes go with it, when `voted`: it is a
    /// quorum ask on which a vote may have been recorded). `order` is the one it was
    /// added with.
    AskRemoved {
        key: SessionKey,
        rpc_id: String,
        order: u64,
        voted: bool,
    },
    /// The votes cast on a pending quorum ask so far.
    Votes {
        key: SessionKey,
        rpc_id: String,
        votes: askgate_core::domain::quorum::Votes,
    },
    /// The request id names the pending ask `rpc_id`, sent with `fingerprint`.
    RequestPending {
        key: SessionKey,
        request_id: Arc<str>,
        rpc_id: String,
        fingerprint: Option<Fingerprint>,
    },
    /// The request id's ask ended with `resolved`, remembered until `expires`.
    RequestDone {
        key: SessionKey,
        request_id: Arc<str>,
        resolved: Message,
        expires: SystemTime,
        fingerprint: Option<Fingerprint>,
    },
    /// The request id's record expired.
    RequestExpired {
        key: SessionKey,
        request_id: Arc<str>,
    },
    /// An agent's lease, replacing any before it.
    AgentAttached(AttachedAgent),
    /// The agent's lease ended.
    AgentDetached { tenant: Arc<str>, agent_id: String },
    /// A change to webhooks and channels.
    Hook(HookChange),
    /// A record appended to the tenant's audit log at `at`.
    Audit {
        tenant: String,
        at: SystemTime,
        record: askgate_core::backend::audit::AuditRecord,
    },
    /// The audit records appended before `before` are past their retention, and the
    /// receipts' uses remembered until before `consumed_before_ms`.
    AuditPruned {
        before: SystemTime,
        consumed_before_ms: u64,
    },
    /// The tenant's audit log went past its byte budget: its oldest records go until
    /// the rest hold at most `keep_bytes` (the newest always stays).
    AuditTrimmed { tenant: String, keep_bytes: u64 },
    /// What the store says of itself (`meta`): `key` is `value` now.
    Meta { key: String, value: String },
    /// A receipt was used (ConsumeReceipt).
    ReceiptConsumed {
        tenant: String,
        jti: String,
        spent: Spent,
    },
}

/// A receipt's use, in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    pub at_ms: u64,
    pub until_ms: u64,
}

/// A change to the hook store's records.
#[derive(Debug)]
pub enum HookChange {
    /// An endpoint, at `position` among its tenant's (oldest first).
    EndpointPut {
        position: u64,
        record: Box<EndpointRecord>,
    },
    EndpointDeleted {
        tenant: String,
        id: String,
    },
    /// A delivery (made at `position`, for listing in order), due at `due_ms` when
    /// pending.
    DeliveryPut {
        position: u64,
        due_ms: Option<u64>,
        record: Box<DeliveryRecord>,
    },
    /// A finished delivery trimmed away.
    DeliveryDeleted {
        id: String,
    },
    TimerPut {
        due_ms: u64,
        record: Box<TimerRecord>,
    },
    TimerDeleted {
        id: String,
    },
    NotePut {
        key: String,
        value: String,
        expires_ms: u64,
    },
    /// The notes that expired by `by_ms`.
    NotesExpired {
        by_ms: u64,
    },
    /// A person, added or replaced.
    PersonPut {
        record: Box<PersonRecord>,
    },
    PersonDeleted {
        tenant: String,
        id: String,
    },
    /// A tenant's policy set, in place of the one before.
    PoliciesPut {
        record: Box<PolicySetRecord>,
    },
    /// A standing grant.
    GrantPut {
        record: Box<GrantRecord>,
    },
    /// A grant revoked, or expired and dropped.
    GrantDeleted {
        tenant: String,
        id: String,
    },
}

/// A pending ask as the store keeps it.
#[derive(Debug, Clone)]
pub struct AddedAsk {
    pub key: SessionKey,
    pub rpc_id: String,
    pub seq: u64,
    /// Its place among the pending asks of every session, for `all_sessions` replay.
    pub order: u64,
    /// What it counts in its budgets.
    pub bytes: u64,
    /// Empty for none.
    pub request_id: Arc<str>,
    pub requested: Message,
    /// How long it stays answerable once its call has gone (Semantics 10).
    pub reattach_grace: Duration,
    /// The votes cast on it, for a quorum ask restored from a store.
    pub votes: Option<askgate_core::domain::quorum::Votes>,
}

/// An agent's lease as the store keeps it.
#[derive(Debug, Clone)]
pub struct AttachedAgent {
    pub tenant: Arc<str>,
    pub agent_id: String,
    pub incarnation: String,
    pub parent_agent_id: String,
    pub holder: String,
}

/// What a journal carries to its writer, in order.
pub enum Entry {
    Change(Change),
    /// Changes that are durable together or not at all (one transaction).
    Changes(Vec<Change>),
    /// Runs once every change before it is durable.
    Then(Box<dyn FnOnce() + Send>),
    /// Answered once every change before it is durable.
    Synced(oneshot::Sender<()>),
}

/// The entries the writer may have waiting before new work waits for it
/// ([`Journal::room`]): two of its largest groups, so that it always has the next
/// group at hand, while a burst faster than the disk holds a bounded queue.
pub const BACKLOG: usize = 32 * 1024;

/// The sending half: cheap to call under the state's locks (one channel send).
#[derive(Clone)]
pub struct Journal {
    entries: mpsc::Sender<Entry>,
    shared: Arc<Shared>,
}

/// The writer's half: the entries in order, and where it says how far it got.
pub struct JournalReader {
    pub entries: mpsc::Receiver<Entry>,
    shared: Arc<Shared>,
}

/// What the two halves share.
struct Shared {
    /// Why the writer stopped, once it did.
    failure: OnceLock<String>,
    /// Entries sent and not yet handled by the writer.
    backlog: AtomicUsize,
    /// Woken when the backlog falls under [`BACKLOG`], or the writer stops.
    drained: Notify,
    /// Entries sent so far, counted before each is sent.
    sent: AtomicU64,
    /// Entries the writer took and made durable so far (the channel hands them over
    /// in the order their sends completed); it stops moving when the writer fails,
    /// and `failure` says so.
    durable: watch::Sender<u64>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            failure: OnceLock::new(),
            backlog: AtomicUsize::new(0),
            drained: Notify::new(),
            sent: AtomicU64::new(0),
            durable: watch::channel(0).0,
        }
    }
}

impl Journal {
    pub fn new() -> (Self, JournalReader) {
        let (entries, received) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let reader = JournalReader {
            entries: received,
            shared: shared.clone(),
        };
        (Self { entries, shared }, reader)
    }

    fn send(&self, entry: Entry) {
        self.shared.backlog.fetch_add(1, Ordering::AcqRel);
        // Counted before it is sent: see `Journal::sent`.
        self.shared.sent.fetch_add(1, Ordering::AcqRel);
        // A writer that is gone has failed (and said so) or the engine is closing.
        let _ = self.entries.send(entry);
    }

    /// Records a change. Called in the order the changes happen: under the lock that
    /// orders them.
    pub fn record(&self, change: Change) {
        self.send(Entry::Change(change));
    }

    /// Records changes that must be durable together: they are written in one
    /// transaction.
    pub fn record_all(&self, changes: Vec<Change>) {
        self.send(Entry::Changes(changes));
    }

    /// Runs `action` once every change recorded so far is durable; never, when the
    /// writer fails first.
    pub fn then(&self, action: impl FnOnce() + Send + 'static) {
        self.send(Entry::Then(Box::new(action)));
    }

    /// Once every change recorded so far is durable: BACKEND_UNAVAILABLE when the
    /// writer failed.
    pub async fn synced(&self) -> Result<(), Error> {
        use tracing::Instrument;
        let (done, synced) = oneshot::channel();
        self.send(Entry::Synced(done));
        // With --otlp-backend-calls, the wait for SQLite's commit is a span.
        let span = tracing::debug_span!(
            target: askgate_core::TRACE_TARGET,
            "askgate.sqlite",
            otel.kind = "client",
            db.system.name = "sqlite",
            db.operation.name = "COMMIT",
        );
        synced.instrument(span).await.map_err(|_| self.failed())
    }

    /// Waits while the writer has [`BACKLOG`] entries or more waiting: work that comes
    /// faster than the disk takes it waits here, before it takes any lock, instead of
    /// queueing without bound. At once when the writer has stopped (the work then
    /// fails).
    pub async fn room(&self) {
        loop {
            let drained = self.shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            let backlog = self.shared.backlog.load(Ordering::Acquire);
            if backlog < BACKLOG || self.shared.failure.get().is_some() {
                return;
            }
            drained.await;
        }
    }

    /// How many entries were sent so far. Read after an entry's send completed, it
    /// names a point at or past that entry: once [`Self::durable_at`] that count, the
    /// entry is on disk (the writer takes entries in the order their sends
    /// completed, and at most this many had started).
    pub fn sent(&self) -> u64 {
        self.shared.sent.load(Ordering::Acquire)
    }

    /// Whether the first `count` entries the writer took are durable.
    pub fn is_durable(&self, count: u64) -> bool {
        *self.shared.durable.borrow() >= count
    }

    /// Completes once the first `count` entries are durable; BACKEND_UNAVAILABLE when
    /// the writer failed first.
    pub fn durable_at(
        &self,
        count: u64,
    ) -> impl std::future::Future<Output = Result<(), Error>> + Send + 'static {
        let mut durable = self.shared.durable.subscribe();
        let journal = self.clone();
        async move {
            loop {
                if *durable.borrow_and_update() >= count {
                    return Ok(());
                }
                journal.check()?;
                if durable.changed().await.is_err() {
                    return Err(journal.failed());
                }
            }
        }
    }

    /// BACKEND_UNAVAILABLE with why the writer stopped, when it did.
    pub fn check(&self) -> Result<(), Error> {
        match self.shared.failure.get() {
            Some(_) => Err(self.failed()),
            None => Ok(()),
        }
    }

    fn failed(&self) -> Error {
        let why = self
            .shared
            .failure
            .get()
            .map_or("the store's writer stopped", String::as_str);
        Error::BackendUnavailable(format!("{why}; restart the node"))
    }
}

impl JournalReader {
    /// The writer handled `count` more entries.
    pub fn handled(&self, count: usize) {
        let before = self.shared.backlog.fetch_sub(count, Ordering::AcqRel);
        if before.saturating_sub(count) < BACKLOG {
            self.shared.drained.notify_waiters();
        }
    }

    /// The first `count` entries the writer took are durable.
    pub fn durable(&self, count: u64) {
        self.shared.durable.send_replace(count);
    }

    /// The writer stopped for `why`: nothing after this is acknowledged.
    pub fn fail(&self, why: String) {
        let _ = self.shared.failure.set(why);
        self.shared.drained.notify_waiters();
        // Wakes whoever waits for durability, to find the failure.
        self.shared.durable.send_modify(|_| {});
    }
}

/// The state a store kept, to restore before the engine serves.
#[derive(Debug, Default)]
pub struct Stored {
    pub sessions: Vec<StoredSession>,
    pub requests: Vec<StoredRequest>,
    pub agents: Vec<AttachedAgent>,
}

/// A session as the store kept it.
#[derive(Debug)]
pub struct StoredSession {
    pub key: SessionKey,
    pub epoch: u64,
    /// Sequence number of its last event.
    pub head: u64,
    /// Its last events, oldest first.
    pub history: Vec<(u64, Message)>,
    pub asks: Vec<AddedAsk>,
}

/// A request id's record as the store kept it.
#[derive(Debug)]
pub struct StoredRequest {
    pub key: SessionKey,
    pub request_id: Arc<str>,
    pub state: StoredRequestState,
    /// The fingerprint of the ask it was sent with (none when the store kept none).
    pub fingerprint: Option<Fingerprint>,
}

#[derive(Debug)]
pub enum StoredRequestState {
    Pending {
        rpc_id: String,
    },
    Done {
        resolved: Message,
        expires: SystemTime,
    },
}

/// The hook store's records as the store kept them.
#[derive(Debug, Default)]
pub struct StoredHooks {
    /// (position, endpoint), in order.
    pub endpoints: Vec<(u64, EndpointRecord)>,
    /// (position, due_ms, delivery), in order.
    pub deliveries: Vec<(u64, Option<u64>, DeliveryRecord)>,
    /// (due_ms, timer)
    pub timers: Vec<(u64, TimerRecord)>,
    /// (key, value, expires_ms)
    pub notes: Vec<(String, String, u64)>,
    pub people: Vec<PersonRecord>,
    pub policies: Vec<PolicySetRecord>,
    pub grants: Vec<GrantRecord>,
}

#[cfg(test)]
mod tests {
    use std::{
        future::Future,
        task::{Context, Poll, Waker},
        time::Duration,
    };

    use super::*;

    /// Whether `future` completes at its first poll.
    fn ready_now(future: impl Future) -> bool {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(future.as_mut().poll(&mut cx), Poll::Ready(_))
    }

    #[tokio::test]
    async fn work_waits_for_room_while_the_writer_is_a_backlog_behind() {
        let (journal, reader) = Journal::new();
        assert!(ready_now(journal.room()), "an empty journal has room");
        for _ in 0..BACKLOG {
            journal.then(|| {});
        }
        assert!(!ready_now(journal.room()), "a full backlog has none");
        let waiting = tokio::spawn({
            let journal = journal.clone();
            async move { journal.room().await }
        });
        // The test's runtime has one thread: the waiter runs (and waits) now.
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "it waits");
        reader.handled(1);
        tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the waiter is woken once the writer catches up")
            .expect("join");
        assert!(ready_now(journal.room()));
    }

    #[tokio::test]
    async fn a_stopped_writer_lets_work_through_to_fail() {
        let (journal, reader) = Journal::new();
        for _ in 0..BACKLOG {
            journal.then(|| {});
        }
        reader.fail("disk full".into());
        assert!(ready_now(journal.room()));
        let refused = journal.check().expect_err("refused");
        assert!(refused.to_string().contains("disk full"), "{refused}");
    }
}
