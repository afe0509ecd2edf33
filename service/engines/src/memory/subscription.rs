//! A subscriber's stream: the replay first, then live events from the broadcast
//! channel. A subscriber that falls behind gets `reset` and a fresh snapshot.
//!
//! On a durable engine an event is handed on only once what it stands for is on disk
//! (an ask is published after its records are sent to the journal, and the stream
//! waits for the journal to have made them durable): a question a human saw is never
//! lost by a crash.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use askgate_core::{
    backend::{Scope, SubscribeOptions, events::Message},
    domain::Error,
};
use tokio_stream::{
    Stream,
    wrappers::{BroadcastStream, errors::BroadcastStreamRecvError},
};
use tracing::warn;

use super::{journal::Journal, state::Inner};

/// A wait for the journal to make an event's records durable.
type DurableWait = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// A subscriber's stream: the replay first, then live events from the broadcast
/// channel. A subscriber that falls behind gets `reset` and a fresh snapshot.
pub(super) struct Subscription {
    inner: Arc<Inner>,
    scope: Scope,
    exclusive: bool,
    passive: bool,
    replay: VecDeque<Message>,
    live: Option<BroadcastStream<Message>>,
    /// On a durable engine: the journal, and how many entries it had been sent when
    /// the replay was taken (every event of the replay is recorded by then).
    journal: Option<Journal>,
    replay_mark: u64,
    /// The event waiting for its records to be durable, and that wait.
    held: Option<(Message, DurableWait)>,
}

impl Subscription {
    /// Starts following `scope` as `options` say.
    pub(super) fn start(
        inner: Arc<Inner>,
        scope: Scope,
        options: &SubscribeOptions,
    ) -> Result<Self, Error> {
        let (replay, receiver) = match &scope {
            Scope::Session(key) => {
                inner.follow_session(key, options.after.as_deref(), false, options.exclusive)?
            }
            Scope::Tenant(tenant) => {
                inner.follow_tenant(tenant, options.after.is_some(), false, options.passive)?
            }
        };
        let journal = inner.journal();
        let replay_mark = journal.as_ref().map_or(0, Journal::sent);
        Ok(Self {
            inner,
            scope,
            exclusive: options.exclusive,
            passive: options.passive,
            replay,
            live: Some(BroadcastStream::new(receiver)),
            journal,
            replay_mark,
            held: None,
        })
    }

    /// After a lag: `reset`, a fresh snapshot, and a new receiver; false when the
    /// scope cannot be followed any more (shutdown).
    fn resync(&mut self) -> bool {
        let follow = match &self.scope {
            Scope::Session(key) => self.inner.follow_session(key, None, true, false),
            Scope::Tenant(tenant) => self.inner.follow_tenant(tenant, true, true, self.passive),
        };
        match follow {
            Ok((replay, receiver)) => {
                self.replay = replay;
                self.live = Some(BroadcastStream::new(receiver));
                self.replay_mark = self.journal.as_ref().map_or(0, Journal::sent);
                true
            }
            Err(_) => false,
        }
    }
}

impl Stream for Subscription {
    /// Never an error: the memory backend cannot become unreachable.
    type Item = Result<Message, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some((_, wait)) = self.held.as_mut() {
                let waited = std::task::ready!(wait.as_mut().poll(cx));
                let (message, _) = self.held.take().expect("held");
                return Poll::Ready(Some(match waited {
                    Ok(()) => Ok(message),
                    Err(error) => {
                        // The store failed: nothing more is handed on.
                        self.live = None;
                        self.replay.clear();
                        Err(error)
                    }
                }));
            }
            if let Some(message) = self.replay.pop_front() {
                let mark = self.replay_mark;
                match self.once_durable(message, mark) {
                    Some(message) => return Poll::Ready(Some(Ok(message))),
                    None => continue,
                }
            }
            let Some(live) = self.live.as_mut() else {
                return Poll::Ready(None);
            };
            match Pin::new(live).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    // Its records were sent before it was published: this many entries
                    // take them in.
                    let mark = self.journal.as_ref().map_or(0, Journal::sent);
                    match self.once_durable(message, mark) {
                        Some(message) => return Poll::Ready(Some(Ok(message))),
                        None => continue,
                    }
                }
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

impl Subscription {
    /// `message`, when its records (among the first `mark` entries of the journal)
    /// are durable or the engine keeps nothing; else held until they are.
    fn once_durable(&mut self, message: Message, mark: u64) -> Option<Message> {
        match &self.journal {
            Some(journal) if !journal.is_durable(mark) => {
                self.held = Some((message, Box::pin(journal.durable_at(mark))));
                None
            }
            _ => Some(message),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Release the receiver first so the scope can be seen as unsubscribed.
        self.live = None;
        self.inner
            .unsubscribed(&self.scope, self.exclusive, self.passive);
    }
}
