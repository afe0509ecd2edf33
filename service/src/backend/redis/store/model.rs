//! What the store hands back, and the encodings of the events it keeps and publishes.

use askgate_proto::v1::{Requested, Resolved};

use super::decode;
use crate::domain::AskError;

/// What registering an ask did.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// A new pending ask, whose `requested` event has this sequence number.
    New { seq: u64, epoch: String },
    /// The request_id names an ask that is still pending: join it.
    Joined { rpc_id: String },
    /// The request_id names an ask that was resolved: here is how.
    Recorded { rpc_id: String, resolved: Resolved },
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
}

pub(super) fn parse_seq(text: &str) -> Result<u64, AskError> {
    text.parse()
        .map_err(|_| AskError::Internal("bad seq".into()))
}

/// A published message, as the scripts build it: `<epoch> <seq> <Q|R><encoded event>`.
pub(super) fn live_message(epoch: &str, seq: u64, kind: u8, event: &[u8]) -> Vec<u8> {
    let mut message = format!("{epoch} {seq} ").into_bytes();
    message.push(kind);
    message.extend_from_slice(event);
    message
}

/// Decodes a history entry (or the payload of a pub/sub message after its prefix).
pub fn parse_event(entry: &[u8]) -> Result<StoredEvent, AskError> {
    match entry.split_first() {
        Some((b'Q', payload)) => Ok(StoredEvent::Requested(decode(payload)?)),
        Some((b'R', payload)) => Ok(StoredEvent::Resolved(decode(payload)?)),
        _ => Err(AskError::Internal("corrupt history entry in redis".into())),
    }
}
