//! A shard of the engine's state, behind one mutex: its sessions, the unused ones
//! waiting out their reconnect grace, and the asks by request id with the recorded
//! outcomes of finished ones.

use std::{
    collections::{HashMap, VecDeque, hash_map::Entry},
    sync::Arc,
};

use askgate_core::{backend::events::Message, domain::SessionKey};
use tokio::time::Instant;

use super::session::Session;

#[derive(Default)]
pub(super) struct Shard {
    sessions: HashMap<SessionKey, Session>,
    /// Unused sessions waiting out their reconnect grace, by when it ends.
    retiring: VecDeque<(Instant, SessionKey)>,
    /// Asks by (session, request_id), for retries.
    requests: HashMap<RequestKey, RequestState>,
    /// Recorded outcomes by when they expire.
    request_expiry: VecDeque<(Instant, RequestKey)>,
}

/// A request id in its session; the id shared by the map and the expiry queue.
pub(super) type RequestKey = (SessionKey, Arc<str>);

/// What a request id names.
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

impl Shard {
    pub(super) fn session(&self, key: &SessionKey) -> Option<&Session> {
        self.sessions.get(key)
    }

    pub(super) fn session_mut(&mut self, key: &SessionKey) -> Option<&mut Session> {
        self.sessions.get_mut(key)
    }

    /// The session's state, made by `make` when it has none yet.
    pub(super) fn session_or<E>(
        &mut self,
        key: &SessionKey,
        make: impl FnOnce() -> Result<Session, E>,
    ) -> Result<&mut Session, E> {
        match self.sessions.entry(key.clone()) {
            Entry::Occupied(session) => Ok(session.into_mut()),
            Entry::Vacant(vacant) => Ok(vacant.insert(make()?)),
        }
    }

    pub(super) fn sessions(&self) -> impl Iterator<Item = (&SessionKey, &Session)> {
        self.sessions.iter()
    }

    /// Forgets every session (their senders with them: subscribers receive what is
    /// queued, then their stream ends).
    pub(super) fn clear_sessions(&mut self) {
        self.sessions.clear();
    }

    /// Drops the session if it is unused and was last followed more than `grace` ago;
    /// an unused one within its grace is retired when the grace ends. True when it
    /// was dropped.
    pub(super) fn retire_if_unused(
        &mut self,
        key: &SessionKey,
        grace: std::time::Duration,
    ) -> bool {
        let Some(session) = self.sessions.get(key) else {
            return false;
        };
        if !session.is_unused() {
            return false;
        }
        match session.left_at() {
            Some(left_at) if left_at.elapsed() < grace => {
                self.retiring.push_back((left_at + grace, key.clone()));
                false
            }
            _ => {
                self.sessions.remove(key);
                true
            }
        }
    }

    /// The sessions whose reconnect grace ended by `now`, to retire if still unused.
    pub(super) fn due_retiring(&mut self, now: Instant) -> Vec<SessionKey> {
        let mut due = Vec::new();
        while self.retiring.front().is_some_and(|(at, _)| *at <= now) {
            due.extend(self.retiring.pop_front().map(|(_, key)| key));
        }
        due
    }

    /// What the request id names in the session, if anything.
    pub(super) fn request(&self, key: &SessionKey, request_id: &str) -> Option<&RequestState> {
        self.requests.get(&(key.clone(), Arc::from(request_id)))
    }

    /// The request id names the pending ask `rpc_id`.
    pub(super) fn record_pending(&mut self, key: &SessionKey, request_id: Arc<str>, rpc_id: &str) {
        let rpc_id = rpc_id.to_owned();
        self.requests
            .insert((key.clone(), request_id), RequestState::Pending { rpc_id });
    }

    /// The request id's ask ended with `resolved`, remembered until `expires`.
    pub(super) fn record_done(
        &mut self,
        key: &SessionKey,
        request_id: Arc<str>,
        resolved: Message,
        expires: Instant,
    ) {
        let request = (key.clone(), request_id);
        self.request_expiry.push_back((expires, request.clone()));
        self.requests
            .insert(request, RequestState::Done { resolved, expires });
    }

    /// Forgets the recorded outcomes that expired by `now`; hands them to `expired`.
    pub(super) fn expire_requests(&mut self, now: Instant, mut expired: impl FnMut(RequestKey)) {
        while self
            .request_expiry
            .front()
            .is_some_and(|(at, _)| *at <= now)
        {
            let Some((_, request)) = self.request_expiry.pop_front() else {
                break;
            };
            if let Some(RequestState::Done { expires, .. }) = self.requests.get(&request)
                && *expires <= now
            {
                self.requests.remove(&request);
                expired(request);
            }
        }
    }

    /// Puts a restored session in place, to retire when unused past `retire_at`.
    pub(super) fn restore_session(
        &mut self,
        key: SessionKey,
        session: Session,
        retire_at: Instant,
    ) {
        self.retiring.push_back((retire_at, key.clone()));
        self.sessions.insert(key, session);
    }
}
