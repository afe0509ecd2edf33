//! A shard of the engine's state, behind one mutex: its sessions, the unused ones
//! waiting out their reconnect grace, and the asks by request id with the recorded
//! outcomes of finished ones.

use std::{
    collections::{HashMap, VecDeque, hash_map::Entry},
    sync::Arc,
    time::SystemTime,
};

use askgate_core::{
    backend::events::Message,
    backend::{Registered, RequestAbort, events},
    domain::{Error, Fingerprint, Outcome, SessionKey},
};
use askgate_proto::v1::subscribe_response::Event;
use tokio::{sync::oneshot, time::Instant};
use tracing::debug;

use super::{
    journal::{StoredRequest, StoredRequestState},
    session::{PendingAsk, Session},
};

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

/// What a request id names, with the fingerprint of the ask it was sent with (none
/// for an abort that came first, or a record an older askgate kept).
enum RequestState {
    Pending {
        rpc_id: String,
        fingerprint: Option<Fingerprint>,
    },
    /// The ask's `resolved` event, the one in the history (it holds the rpc_id and
    /// the outcome): a finished request costs its key and a reference.
    Done {
        resolved: Message,
        expires: Instant,
        /// What it counts against its tenant's byte budget until it expires.
        bytes: u64,
        fingerprint: Option<Fingerprint>,
    },
}

impl RequestState {
    fn fingerprint(&self) -> Option<Fingerprint> {
        match self {
            Self::Pending { fingerprint, .. } | Self::Done { fingerprint, .. } => *fingerprint,
        }
    }
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

    /// Forgets every session (their senders with them: subscribers receive what is
    /// queued, then their stream ends), telling the calls still waiting on their asks
    /// `outcome`.
    pub(super) fn clear_sessions(&mut self, outcome: &Outcome) {
        for session in self.sessions.values_mut() {
            session.hand_over(outcome);
        }
        self.sessions.clear();
    }

    /// The pending asks `which` keeps: (session, rpc_id).
    pub(super) fn pending_asks(
        &self,
        which: impl Fn(&Session, &str) -> bool,
    ) -> Vec<(SessionKey, String)> {
        self.sessions
            .iter()
            .flat_map(|(key, session)| {
                let ids = session.pending_rpc_ids().into_iter();
                ids.filter(|id| which(session, id))
                    .map(|id| (key.clone(), id))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The pending asks of the tenant's sessions.
    pub(super) fn pending_of<'a>(
        &'a self,
        tenant: &'a str,
    ) -> impl Iterator<Item = &'a PendingAsk> {
        self.sessions
            .iter()
            .filter(move |(key, _)| &*key.tenant == tenant)
            .flat_map(|(_, session)| session.snapshot())
    }

    /// The pending asks and the sessions' own subscribers.
    pub(super) fn counts(&self) -> (usize, usize) {
        self.sessions
            .values()
            .fold((0, 0), |(pending, subscribers), s| {
                (pending + s.pending_len(), subscribers + s.subscribers())
            })
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
    fn request(&self, key: &SessionKey, request_id: &str) -> Option<&RequestState> {
        self.requests.get(&(key.clone(), Arc::from(request_id)))
    }

    /// What aborting an ask by its request id finds: its pending ask, or that it ended
    /// (its outcome still kept); None when the request id is free.
    pub(super) fn known_request(&self, key: &SessionKey, request_id: &str) -> Option<RequestAbort> {
        match self.request(key, request_id)? {
            RequestState::Pending { rpc_id, .. } => Some(RequestAbort::Pending(rpc_id.clone())),
            RequestState::Done { expires, .. } if *expires > Instant::now() => {
                Some(RequestAbort::Ended)
            }
            RequestState::Done { .. } => None,
        }
    }

    /// The fingerprint the request id's ask was sent with, if it has one.
    pub(super) fn fingerprint_of(
        &self,
        key: &SessionKey,
        request_id: &Arc<str>,
    ) -> Option<Fingerprint> {
        // The ask's own id: the key is two reference counts, no copy of the id.
        let request = (key.clone(), request_id.clone());
        self.requests.get(&request)?.fingerprint()
    }

    /// The request id names the pending ask `rpc_id`, sent with `fingerprint`.
    pub(super) fn record_pending(
        &mut self,
        key: &SessionKey,
        request_id: Arc<str>,
        rpc_id: &str,
        fingerprint: Option<Fingerprint>,
    ) {
        let rpc_id = rpc_id.to_owned();
        let state = RequestState::Pending {
            rpc_id,
            fingerprint,
        };
        self.requests.insert((key.clone(), request_id), state);
    }

    /// The request id's ask ended with `resolved`, remembered until `expires`.
    /// `bytes`: what the outcome holds (its encoded size), which counts against its
    /// tenant's budget until it expires.
    pub(super) fn record_done(
        &mut self,
        key: &SessionKey,
        request_id: Arc<str>,
        resolved: Message,
        expires: Instant,
        bytes: u64,
        fingerprint: Option<Fingerprint>,
    ) {
        let request = (key.clone(), request_id);
        self.request_expiry.push_back((expires, request.clone()));
        self.requests.insert(
            request,
            RequestState::Done {
                resolved,
                expires,
                bytes,
                fingerprint,
            },
        );
    }

    /// Forgets the recorded outcomes that expired by `now`; hands each to `expired`
    /// with the bytes it held.
    pub(super) fn expire_requests(
        &mut self,
        now: Instant,
        mut expired: impl FnMut(RequestKey, u64),
    ) {
        while self
            .request_expiry
            .front()
            .is_some_and(|(at, _)| *at <= now)
        {
            let Some((_, request)) = self.request_expiry.pop_front() else {
                break;
            };
            if let Some(RequestState::Done { expires, bytes, .. }) = self.requests.get(&request)
                && *expires <= now
            {
                let bytes = *bytes;
                self.requests.remove(&request);
                expired(request, bytes);
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

    /// A retry of a known request: joins its pending ask or returns its recorded
    /// outcome; REQUEST_ID_REUSED when the request id was sent with another ask.
    /// `None` when the request is new (or its record expired).
    pub(super) fn rejoin(
        &mut self,
        key: &SessionKey,
        request_id: &str,
        fingerprint: Fingerprint,
    ) -> Option<Result<Registered, Error>> {
        let (outcome_tx, outcome) = oneshot::channel();
        let request = self.request(key, request_id)?;
        if let RequestState::Done { expires, .. } = request
            && *expires <= Instant::now()
        {
            return None;
        }
        if !fingerprint.matches(request.fingerprint()) {
            debug!(request_id, "a request id was sent again with another ask");
            return Some(Err(Error::RequestIdReused));
        }
        match request {
            RequestState::Pending { rpc_id, .. } => {
                let rpc_id = rpc_id.clone();
                if !self.session_mut(key)?.join(&rpc_id, outcome_tx) {
                    return None;
                }
                debug!(%rpc_id, request_id, "a retry joined its pending ask");
                Some(Ok(Registered { rpc_id, outcome }))
            }
            RequestState::Done {
                resolved, expires, ..
            } if *expires > Instant::now() => {
                let Some(Event::Resolved(resolved)) = &resolved.event else {
                    return None;
                };
                let _ = outcome_tx.send(Box::new(events::outcome_of(resolved)));
                debug!(rpc_id = %resolved.rpc_id, request_id, "a retry got its recorded outcome");
                Some(Ok(Registered {
                    rpc_id: resolved.rpc_id.clone(),
                    outcome,
                }))
            }
            RequestState::Done { .. } => None,
        }
    }

    /// A request record as a store kept it; one that expired meanwhile is dropped.
    /// Returns the bytes a restored outcome holds (0 for none).
    pub(super) fn restore_request(
        &mut self,
        request: StoredRequest,
        now: Instant,
        wall: SystemTime,
    ) -> u64 {
        let fingerprint = request.fingerprint;
        match request.state {
            StoredRequestState::Pending { rpc_id } => {
                self.record_pending(&request.key, request.request_id, &rpc_id, fingerprint);
                0
            }
            StoredRequestState::Done { resolved, expires } => match expires.duration_since(wall) {
                Ok(left) => {
                    let bytes = outcome_bytes(&resolved);
                    let (key, id) = (request.key, request.request_id);
                    self.record_done(&key, id, resolved, now + left, bytes, fingerprint);
                    bytes
                }
                Err(_) => 0,
            },
        }
    }
}

/// What a recorded outcome counts against its tenant's byte budget: its encoded size.
fn outcome_bytes(resolved: &Message) -> u64 {
    prost::Message::encoded_len(&**resolved) as u64
}

/// A new `all_sessions` subscriber's replay: `reset` first if asked, then the pending
/// asks of every session of the tenant, oldest first, then `synced`.
pub(super) fn tenant_replay(
    shards: &[&Shard],
    tenant: &str,
    reset_first: bool,
) -> VecDeque<Message> {
    let mut pending: Vec<&PendingAsk> = shards
        .iter()
        .flat_map(|shard| shard.pending_of(tenant))
        .collect();
    pending.sort_by_key(|p| p.order);
    let pending = pending.into_iter().map(|p| p.requested.clone());
    events::snapshot_replay(reset_first, pending, String::new())
}
