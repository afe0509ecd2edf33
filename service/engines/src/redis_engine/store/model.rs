//! What the store hands back, and the encodings of the events it keeps and publishes.

use askgate_proto::v1::{Requested, Resolved, SubscribeResponse, subscribe_response::Event};
use prost::Message as _;

use super::decode;
use askgate_core::domain::Error;

/// What registering an ask did.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// A new pending ask, whose `requested` event has this sequence number.
    New { seq: u64, epoch: String },
    /// The request_id names an ask that is still pending: join it.
    Joined { rpc_id: String },
    /// The request_id names an ask that was resolved: here is how.
    Recorded {
        rpc_id: String,
        resolved: Box<Resolved>,
    },
}

/// A new ask's place on its node's wait list, written by the registration script
/// itself where it can be (see [`super::RedisStore::register`]).
#[derive(Debug, Clone)]
pub struct Listing<'a> {
    pub node_id: &'a str,
    /// The ask's reattach grace, kept in its wait mark.
    pub grace: std::time::Duration,
    /// How long the wait mark lives.
    pub mark_ttl: std::time::Duration,
    /// `if_unattended = FAIL`: refuse a new ask (NO_PROVIDER) unless someone follows.
    pub must_be_attended: bool,
    /// Whether someone follows the session, when the node looked itself (on a cluster,
    /// where who follows is kept in other slots); `None`: the script looks.
    pub attended: Option<bool>,
}

/// A session's pending asks and the point of its history they reflect.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The history's epoch (empty before the session's first event).
    pub epoch: String,
    /// The sequence number of the last event the snapshot includes.
    pub head: u64,
    /// The pending asks with the sequence numbers of their `requested`, oldest first.
    pub pending: Vec<(u64, Requested)>,
}

/// One event of a session's history.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredEvent {
    Requested(Requested),
    Resolved(Resolved),
    /// A reminder or an escalation (stored as an encoded `SubscribeResponse`).
    Notice(Event),
}

impl StoredEvent {
    /// The session the event belongs to.
    pub fn session_id(&self) -> &str {
        match self {
            Self::Requested(r) => &r.session_id,
            Self::Resolved(r) => &r.session_id,
            Self::Notice(Event::Reminder(r)) => &r.session_id,
            Self::Notice(Event::Escalated(e)) => &e.session_id,
            Self::Notice(Event::Approval(a)) => &a.session_id,
            Self::Notice(_) => "",
        }
    }

    /// The ask the event is about.
    pub fn rpc_id(&self) -> &str {
        match self {
            Self::Requested(r) => &r.rpc_id,
            Self::Resolved(r) => &r.rpc_id,
            Self::Notice(Event::Reminder(r)) => &r.rpc_id,
            Self::Notice(Event::Escalated(e)) => &e.rpc_id,
            Self::Notice(Event::Approval(a)) => &a.rpc_id,
            Self::Notice(_) => "",
        }
    }

    /// The event as subscribers get it.
    pub fn to_event(&self) -> Event {
        match self {
            Self::Requested(r) => Event::Requested(r.clone()),
            Self::Resolved(r) => Event::Resolved(r.clone()),
            Self::Notice(event) => event.clone(),
        }
    }
}

/// How a notice is written to the history: `N` + an encoded `SubscribeResponse`.
pub fn encode_notice(event: &Event) -> Vec<u8> {
    SubscribeResponse {
        cursor: String::new(),
        event: Some(event.clone()),
    }
    .encode_to_vec()
}

/// A published message, as the scripts build it: `<epoch> <seq> <Q|R><encoded event>`.
pub(super) fn live_message(epoch: &str, seq: u64, kind: u8, event: &[u8]) -> Vec<u8> {
    let mut message = format!("{epoch} {seq} ").into_bytes();
    message.push(kind);
    message.extend_from_slice(event);
    message
}

/// A won claim: where its `resolved` event went in the session's history, and the
/// ask it removed (its encoded `Requested`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    pub seq: u64,
    pub epoch: String,
    pub asked: Vec<u8>,
}

/// Decodes a history entry (or the payload of a pub/sub message after its prefix).
pub fn parse_event(entry: &[u8]) -> Result<StoredEvent, Error> {
    match entry.split_first() {
        Some((b'Q', payload)) => Ok(StoredEvent::Requested(decode(payload)?)),
        Some((b'R', payload)) => Ok(StoredEvent::Resolved(decode(payload)?)),
        Some((b'N', payload)) => decode::<SubscribeResponse>(payload)?
            .event
            .map(StoredEvent::Notice)
            .ok_or_else(|| Error::Internal("empty notice in redis".into())),
        _ => Err(Error::Internal("corrupt history entry in redis".into())),
    }
}
