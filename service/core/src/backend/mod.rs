//! Storage and fan-out of pending asks behind one trait, so that the handlers and the
//! rules do not care whether state lives in this process or is shared between nodes.
//!
//! A backend owns the atomicity of askgate: `register` stores an ask and only then
//! broadcasts `requested`; `claim` lets exactly one resolution win. Validation happens
//! before either, in `domain`.

pub mod audit;
pub mod audit_log;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod events;
pub mod hooks;
pub mod people;
mod state_config;

use std::{pin::Pin, sync::Arc};

use askgate_proto::v1::{Requested, Resolved, SubscribeResponse, subscribe_response::Event};
use async_trait::async_trait;
use tokio::sync::oneshot;
use tokio_stream::Stream;

use crate::domain::{Error, NewAsk, Outcome, SessionKey};

pub use state_config::StateConfig;

/// A notice sent about a pending ask.
#[derive(Debug, Clone)]
pub struct Noticed {
    /// The notice with its cursor, as subscribers got it.
    pub message: events::Message,
    pub requested: Requested,
}

/// An event an engine committed, reported to the [`Tap`] for webhooks and reminders
/// (docs/webhooks.md): by the node that committed it, once.
#[derive(Debug, Clone)]
pub struct Committed {
    pub tenant: Arc<str>,
    /// The event with its cursor, as subscribers get it.
    pub message: events::Message,
    /// For a `resolved` event: the ask it ended (its labels and notify policy, which
    /// `resolved` does not repeat).
    pub asked: Option<Asked>,
    /// Where the engine keeps the event until its deliveries are queued (an outbox, on
    /// Redis): given back through [`Backend::queued`] once they are.
    pub outbox: Option<OutboxEntry>,
}

impl Committed {
    /// An event no outbox keeps.
    pub fn new(tenant: Arc<str>, message: events::Message, asked: Option<Asked>) -> Self {
        Self {
            tenant,
            message,
            asked,
            outbox: None,
        }
    }
}

/// An event in an engine's outbox: its session and its id there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub key: SessionKey,
    pub id: String,
}

/// The ask a `resolved` event ended, as the engine holds it.
#[derive(Debug, Clone)]
pub enum Asked {
    /// Its `requested` event (the memory engine keeps it).
    Event(events::Message),
    /// Its encoded `Requested`, as the Redis claim script removed it: decoded by the
    /// webhook intake, off the claim's path.
    Encoded(Vec<u8>),
}

impl Asked {
    /// The ask's `requested` event; `None` if it cannot be read.
    pub fn requested(&self) -> Option<std::borrow::Cow<'_, Requested>> {
        use prost::Message as _;
        match self {
            Self::Event(message) => match &message.event {
                Some(Event::Requested(requested)) => Some(std::borrow::Cow::Borrowed(requested)),
                _ => None,
            },
            Self::Encoded(bytes) => Requested::decode(bytes.as_slice())
                .ok()
                .map(std::borrow::Cow::Owned),
        }
    }
}

/// Where an engine reports the events it commits. Reporting never waits: an event
/// that finds the queue full is dropped, counted and logged (the queue is drained by
/// one task per node, far faster than asks arrive).
#[derive(Clone)]
pub struct Tap {
    events: tokio::sync::mpsc::Sender<Committed>,
    queued: Arc<dyn Fn() + Send + Sync>,
    dropped: Arc<dyn Fn() + Send + Sync>,
}

impl Tap {
    /// `queued` runs for each event that goes into the queue, `dropped` for each that
    /// finds it full.
    pub fn new(
        events: tokio::sync::mpsc::Sender<Committed>,
        queued: impl Fn() + Send + Sync + 'static,
        dropped: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        Self {
            events,
            queued: Arc::new(queued),
            dropped: Arc::new(dropped),
        }
    }

    pub fn report(&self, committed: Committed) {
        // Counted before it is sent, so a flush never sees it sent but not counted.
        (self.queued)();
        if self.events.try_send(committed).is_err() {
            (self.dropped)();
        }
    }
}

/// Events of a subscription: the replay, `synced`, then live events, each with its
/// cursor. The backend ends the stream itself at shutdown, and with an error when it
/// can no longer follow the session (its store became unreachable): the subscriber
/// then resumes from its last cursor, elsewhere or later.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Arc<SubscribeResponse>, Error>> + Send>>;

/// A stored ask (or the one a retry with the same request_id joined): its id and where
/// its outcome will arrive.
#[derive(Debug)]
pub struct Registered {
    pub rpc_id: String,
    /// Receives the winning outcome exactly once (at once for a recorded outcome).
    pub outcome: oneshot::Receiver<Box<Outcome>>,
}

/// A live agent lease from `Agents.Attach`.
#[derive(Debug)]
pub struct Attached {
    /// Fresh per attach; asks must name it.
    pub incarnation: String,
    /// Completes when a newer attach with the same agent_id replaces this one.
    pub superseded: oneshot::Receiver<()>,
}

/// Who attaches an agent. A lease belongs to the subject that attached it: while it
/// is live, another subject of the tenant may not replace it unless it is an admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The credential's subject.
    pub subject: String,
    /// May replace another subject's lease (the `admin` role).
    pub may_take_over: bool,
}

/// Counts for the metrics gauges, read at scrape time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub pending: usize,
    pub subscribers: usize,
}

/// What a subscription covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One session.
    Session(SessionKey),
    /// Every session of a tenant.
    Tenant(Arc<str>),
}

/// What a new subscription asks for besides its scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// Resume after this cursor when the backend still holds it.
    pub after: Option<String>,
    /// Hold the session as its only exclusive subscriber.
    pub exclusive: bool,
    /// The subscription does not count as following its scope for the unattended
    /// rule (Semantics 8): one that sees only some of a tenant's sessions.
    pub passive: bool,
}

/// A per-tenant budget of things held at once, counted over every node: what one
/// tenant may hold of a node's (or a deployment's) memory, whatever its credentials
/// do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    /// Open Subscribe streams, of one session or of all (`--max-streams-per-tenant`).
    Streams,
    /// MCP sessions on `/mcp` (`--max-mcp-sessions-per-tenant`).
    McpSessions,
}

impl Budget {
    /// Its name in storage keys.
    pub fn name(self) -> &'static str {
        match self {
            Self::Streams => "streams",
            Self::McpSessions => "mcp",
        }
    }

    /// The refusal once `max` are held.
    pub fn exhausted(self, max: usize) -> Error {
        match self {
            Self::Streams => Error::TooManySubscribers(format!(
                "at most {max} Subscribe streams per tenant (--max-streams-per-tenant)"
            )),
            Self::McpSessions => Error::TooManySessions(format!(
                "at most {max} MCP sessions per tenant (--max-mcp-sessions-per-tenant): \
                 close unused ones with DELETE, or let them expire"
            )),
        }
    }
}

/// What an [`Backend::abort_request`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestAbort {
    /// The ask is pending under this rpc_id.
    Pending(String),
    /// The ask already ended (its outcome is kept for retries).
    Ended,
    /// No ask was known: the abort is recorded as its outcome.
    Recorded,
}

/// One unit of a tenant's [`Budget`], given back when dropped (on Redis, a dead node's
/// units expire with its lease).
pub type BudgetHold = Box<dyn Send + Sync>;

#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Takes one unit of the tenant's `budget`, of which it may hold `max` at once over
    /// every node; refused with [`Budget::exhausted`] past that.
    async fn hold(&self, tenant: &str, budget: Budget, max: usize) -> Result<BudgetHold, Error>;

    /// Stores a validated ask, then broadcasts its `requested` event. In the same atomic
    /// step it checks the calling agent (CALLER_NOT_LIVE, DELEGATED_CALLER) and that
    /// someone follows the session (NO_PROVIDER, unless HOLD). A request_id already
    /// known in the session joins its pending ask (no second `requested`) or gets its
    /// recorded outcome.
    async fn register(&self, ask: NewAsk) -> Result<Registered, Error>;

    /// A pending ask, to check an answer batch (or a cancel) against it before the
    /// claim: its questions, its allowed channels, its quorum.
    async fn pending(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error>;

    /// First wins: removes the pending ask atomically, hands `outcome` to the waiting
    /// `Ask` and broadcasts `resolved`. A later or duplicate claim gets `NotPending`.
    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error>;

    /// Casts `vote` on the pending quorum ask `rpc_id`, which needs `needed` approvers,
    /// in one atomic step (docs/approvals.md; the tally is `Votes::cast`). A vote that
    /// completes the quorum or disagrees closes the tally: the caller then claims the
    /// outcome, first-wins as ever. `record` is the vote's audit record: an engine
    /// whose audit log shares its store writes it in the vote's own commit when the
    /// vote is recorded (the caller appends it as well; it is kept once).
    async fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: crate::domain::quorum::Vote,
        needed: u32,
        record: Option<audit::AuditEntry>,
    ) -> Result<crate::domain::quorum::Voted, Error>;

    /// Resolves the ask ABORTED unless a call still waits for it (one reattached
    /// through its request_id). Used when a dropped call's reattach grace runs out.
    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error>;

    /// Replay then follow: pending asks (or the events after `options.after`), `synced`,
    /// then live events, with no gap and no duplicate between replay and live.
    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, Error>;

    /// The pending asks of a session, oldest first.
    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error>;

    /// An `Abort` of `request_id` in the session, in one atomic step: the rpc_id of its
    /// pending ask (which the caller then claims ABORTED), or that it already ended, or,
    /// when no ask with that request_id is known yet, `resolved` (an ABORTED outcome) is
    /// recorded for it as a resolved ask's is, so that an Ask arriving with it later (an
    /// abort that overtook its ask) gets ASK_ABORTED at once and is never broadcast.
    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error>;

    /// Makes `agent_id` live under a fresh incarnation; a previous attach of the same
    /// agent is superseded and its pending asks are ABORTED. A live lease held by
    /// another subject is PERMISSION_DENIED unless `holder` may take it over; the check
    /// and the replacement are one atomic step.
    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error>;

    /// Ends the lease `incarnation` of `agent_id` (when it is still the live one) and
    /// resolves its pending asks ABORTED.
    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str);

    /// Whether the backend can serve now (Redis reachable); drives health.
    async fn healthy(&self) -> bool;

    /// Pending asks and open subscriptions on this node, for the metrics.
    async fn stats(&self) -> Stats;

    /// Appends `notice` (a `reminder` or `escalated` event) to the session of a pending
    /// ask and sends it to the session's subscribers; with the ask's `requested`.
    /// `None` when the ask is not pending: nothing is sent.
    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Result<Option<Noticed>, Error>;

    /// Reports every event committed from now on to `tap` (set once; later calls are
    /// ignored).
    fn set_tap(&self, tap: Tap);

    /// The deliveries of these reported events are queued: an engine that keeps
    /// committed events in an outbox until then forgets them (one that does not has
    /// nothing to do). An event never given back here is reported again later.
    async fn queued(&self, _done: Vec<OutboxEntry>) {}

    /// Shutdown: refuses new asks and subscriptions, resolves every pending ask
    /// `DISPOSED` and ends every subscription once its last events are delivered.
    async fn dispose_all(&self);
}

/// Semantics 7, the part both engines share: given the lease the engine found for the
/// claimed agent (its incarnation and parent, if the agent is attached), whether the
/// caller is the live agent: `CALLER_NOT_LIVE` if not, else the parent whose being
/// attached makes the ask `DELEGATED_CALLER` (none for a root agent). The engine
/// looks the parent up under its own locking or storage.
pub fn live_caller<'a>(
    claimed: &askgate_proto::v1::AgentRef,
    lease: Option<(&str, &'a str)>,
) -> Result<Option<&'a str>, Error> {
    match lease {
        Some((incarnation, parent)) if incarnation == claimed.incarnation => {
            Ok(Some(parent).filter(|p| !p.is_empty()))
        }
        _ => Err(Error::CallerNotLive),
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::AgentRef;

    use super::*;

    #[test]
    fn only_the_live_incarnation_is_the_caller_and_its_parent_is_named() {
        let claimed = AgentRef {
            agent_id: "worker".into(),
            incarnation: "2".into(),
        };
        assert_eq!(live_caller(&claimed, Some(("2", ""))), Ok(None));
        assert_eq!(
            live_caller(&claimed, Some(("2", "planner"))),
            Ok(Some("planner"))
        );
        for stale in [None, Some(("1", "")), Some(("", "planner"))] {
            assert_eq!(live_caller(&claimed, stale), Err(Error::CallerNotLive));
        }
    }
}
