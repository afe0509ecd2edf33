//! A subscription as a stream of typed events.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use tokio_stream::Stream;
use tonic::Streaming;

use crate::{
    Error,
    proto::{
        Approval, Escalated, Reminder, Requested, Resolved, SubscribeResponse, subscribe_response,
    },
};

/// One event of a subscription. `cursor` is what to pass as `after` to resume. New
/// kinds may be added: match with a wildcard arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A question batch waits for an answer (live, or replayed on (re)connect).
    Requested {
        /// Resume point.
        cursor: String,
        /// The batch.
        requested: Requested,
    },
    /// A batch was resolved: answered, cancelled, aborted, expired or disposed.
    Resolved {
        /// Resume point.
        cursor: String,
        /// How and by whom.
        resolved: Resolved,
    },
    /// The replay is complete; live events follow. `resumed` is true when the server
    /// sent only the events missed since `after`.
    Synced {
        /// Resume point: the session's latest event.
        cursor: String,
        /// Whether the subscription resumed from `after`.
        resumed: bool,
    },
    /// Drop what you hold for this scope: a fresh snapshot follows.
    Reset,
    /// A pending batch is due a reminder (its ask's `notify` schedule).
    Reminder {
        /// Resume point.
        cursor: String,
        /// Which ask, and which reminder.
        reminder: Reminder,
    },
    /// A pending batch went unanswered past its escalation time.
    Escalated {
        /// Resume point.
        cursor: String,
        /// Which ask.
        escalated: Escalated,
    },
    /// A quorum ask recorded one more approver; it stays pending until the quorum is
    /// reached.
    Approval {
        /// Resume point.
        cursor: String,
        /// Who approved, and how many approvals the ask has and needs.
        approval: Approval,
    },
}

impl Event {
    /// The event's cursor (none for [`Event::Reset`]).
    pub fn cursor(&self) -> Option<&str> {
        match self {
            Self::Requested { cursor, .. }
            | Self::Resolved { cursor, .. }
            | Self::Synced { cursor, .. }
            | Self::Reminder { cursor, .. }
            | Self::Escalated { cursor, .. }
            | Self::Approval { cursor, .. } => Some(cursor),
            Self::Reset => None,
        }
    }

    fn from_wire(message: SubscribeResponse) -> Option<Self> {
        let cursor = message.cursor;
        Some(match message.event? {
            subscribe_response::Event::Requested(requested) => {
                Self::Requested { cursor, requested }
            }
            subscribe_response::Event::Resolved(resolved) => Self::Resolved { cursor, resolved },
            subscribe_response::Event::Synced(s) => Self::Synced {
                cursor,
                resumed: s.resumed,
            },
            subscribe_response::Event::Reset(_) => Self::Reset,
            subscribe_response::Event::Reminder(reminder) => Self::Reminder { cursor, reminder },
            subscribe_response::Event::Escalated(escalated) => {
                Self::Escalated { cursor, escalated }
            }
            subscribe_response::Event::Approval(approval) => Self::Approval { cursor, approval },
        })
    }
}

/// The events of one subscription. Ends when the server ends the subscription
/// (shutdown); yields an error when the stream breaks.
pub struct Events {
    inner: Streaming<SubscribeResponse>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    pub(crate) fn new(inner: Streaming<SubscribeResponse>) -> Self {
        Self { inner }
    }
}

impl Stream for Events {
    type Item = Result<Event, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => match Event::from_wire(message) {
                    Some(event) => Poll::Ready(Some(Ok(event))),
                    // An event kind this client does not know: newer server.
                    None => continue,
                },
                Poll::Ready(Some(Err(status))) => Poll::Ready(Some(Err(status.into()))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}
