//! The engine's state and its operations: register, claim, abandon, replay, agents,
//! the sweep of expired state. Every mutation of a session happens under its shard's
//! mutex, never across an `.await`.
//!
//! Lock order: one shard (or every shard, in index order), then the agents, then the
//! tenants, then (a durable engine's) audit log; each step optional, never the other
//! way round.

use std::{
    collections::VecDeque,
    hash::{BuildHasher, RandomState},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use askgate_core::{
    backend::{
        Asked, Attached, Committed, Holder, Registered, RequestAbort, StateConfig, Stats, Tap,
        audit::{self, AuditEntry},
        events::{self, Message, message},
    },
    domain::{Error, Fingerprint, NewAsk, Outcome, SessionKey},
};
use askgate_proto::v1::{Requested, Resolved, Unattended, subscribe_response::Event};
use parking_lot::{Mutex, MutexGuard};
use tokio::{
    sync::{broadcast, oneshot},
    time::Instant,
};
use tracing::debug;
use uuid::Uuid;

use super::{
    MemoryAuditStore,
    agents::{Agents, AskKeys},
    durable::Durable,
    journal::{AddedAsk, Change, Journal},
    session::{HistoryLimits, PendingAsk, Session},
    shard::Shard,
    tenants::Tenants,
};

mod follow;
mod pending;
mod restore;

/// A replay and the receiver of the live events after it, taken under the same lock.
pub(super) type Followed = (VecDeque<Message>, broadcast::Receiver<Message>);

pub(super) struct Inner {
    config: StateConfig,
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    tenants: Tenants,
    agents: Agents,
    /// Set once at shutdown; checked under a shard lock before anything is stored.
    closed: AtomicBool,
    /// Distinguishes incarnations of a session's state, so a cursor from a session
    /// that was dropped and re-created (or from another process) is never trusted.
    next_epoch: AtomicU64,
    /// Orders pending asks across sessions for `all_sessions` replay.
    next_order: AtomicU64,
    /// Where changes and committed events go.
    durable: Durable,
}

impl Inner {
    /// New state, with nothing in it (see `restore`); a durable one's changes go to
    /// its journal, and its resolutions' records to its audit log with them.
    pub(super) fn new(
        config: StateConfig,
        durable: Option<(Journal, Arc<MemoryAuditStore>)>,
    ) -> Arc<Self> {
        let journal = durable.as_ref().map(|(journal, _)| journal.clone());
        let shards = (0..config.shards.max(1))
            .map(|_| Mutex::new(Shard::default()))
            .collect();
        let epoch_base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        Arc::new(Self {
            tenants: Tenants::new(config.tenant_buffer),
            config,
            shards,
            hasher: RandomState::new(),
            agents: Agents::new(journal.clone()),
            durable: Durable::new(durable),
            closed: AtomicBool::new(false),
            next_epoch: AtomicU64::new(epoch_base),
            next_order: AtomicU64::new(0),
        })
    }

    fn shard(&self, key: &SessionKey) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % self.shards.len();
        self.shards[index].lock()
    }

    /// SHUTTING_DOWN once closed; BACKEND_UNAVAILABLE once the store failed.
    fn check_open(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        self.durable.check()
    }

    pub(super) fn set_tap(&self, tap: Tap) {
        self.durable.set_tap(tap);
    }

    /// Once every change so far is durable: what acknowledges a change waits for this.
    pub(super) async fn synced(&self) -> Result<(), Error> {
        self.durable.synced().await
    }

    /// The journal, on a durable engine (subscribers wait on it).
    pub(super) fn journal(&self) -> Option<Journal> {
        self.durable.journal()
    }

    /// Waits while a durable engine's writer is behind (see `Journal::room`).
    pub(super) async fn room(&self) {
        self.durable.room().await;
    }

    /// Whether the store still takes changes.
    pub(super) fn healthy(&self) -> bool {
        self.durable.check().is_ok()
    }

    /// Appends an event to the session, recorded; the caller publishes it once every
    /// change it stands for is recorded too ([`Session::publish`]).
    fn push(&self, session: &mut Session, key: &SessionKey, event: Event) -> Message {
        let oldest_before = session.oldest_kept();
        let (message, _) = session.push(self.history_limits(), event);
        self.durable
            .record(|| self.event_change(key, session, &message, oldest_before));
        message
    }

    fn history_limits(&self) -> HistoryLimits {
        HistoryLimits {
            len: self.config.history_len,
            bytes: self.config.history_bytes,
        }
    }

    /// What records the session's newest event, `message`, pushed when the oldest event
    /// its history kept was `oldest_before`.
    fn event_change(
        &self,
        key: &SessionKey,
        session: &Session,
        message: &Message,
        oldest_before: u64,
    ) -> Change {
        let oldest_kept = session.oldest_kept();
        Change::Event {
            key: key.clone(),
            seq: session.head(),
            message: message.clone(),
            oldest_kept,
            trimmed: oldest_kept != oldest_before,
        }
    }

    pub(super) fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        let key = ask.key.clone();
        let mut shard = self.shard(&key);
        self.check_open()?;
        let fingerprint = (!ask.request_id.is_empty()).then(|| ask.fingerprint());
        if let Some(fingerprint) = fingerprint
            && let Some(joined) = shard.rejoin(&key, &ask.request_id, fingerprint)
        {
            return joined;
        }
        let stored = self.store(&mut shard, ask, fingerprint);
        if stored.is_err() {
            self.retire_if_unused(&mut shard, &key);
        }
        stored
    }

    pub(super) fn pending(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error> {
        let shard = self.shard(key);
        let session = shard.session(key).ok_or_else(Error::not_pending)?;
        Ok(session.requested(rpc_id)?.clone())
    }

    pub(super) fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        self.settle(&mut self.shard(key), key, rpc_id, outcome)
    }

    /// ABORTED unless a call still waits for the ask.
    pub(super) fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        let mut shard = self.shard(key);
        let session = shard.session(key).ok_or_else(Error::not_pending)?;
        match session.waited_for(rpc_id) {
            true => Ok(()),
            false => self.settle(&mut shard, key, rpc_id, Outcome::aborted()),
        }
    }

    /// Resolves the ask, then retires its session if nothing holds it any more.
    fn settle(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        self.resolve(shard, key, rpc_id, outcome)?;
        self.retire_if_unused(shard, key);
        Ok(())
    }

    pub(super) fn list_pending(&self, key: &SessionKey) -> Vec<Requested> {
        let shard = self.shard(key);
        shard
            .session(key)
            .map(Session::requested_all)
            .unwrap_or_default()
    }

    /// Records `resolved` for a request id no ask holds, so that the ask it would make
    /// ends at once.
    pub(super) fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        self.check_open()?;
        let mut shard = self.shard(key);
        if let Some(known) = shard.known_request(key, request_id) {
            return Ok(known);
        }
        let retention = self.config.request_retention;
        let recorded = message(String::new(), Event::Resolved(resolved));
        // Recorded before any ask: it must fit the tenant's budget.
        let size = prost::Message::encoded_len(&*recorded) as u64;
        self.tenants
            .admit_outcome(&key.tenant, size, self.config.max_pending_bytes_per_tenant)?;
        let request_id: Arc<str> = request_id.into();
        self.durable.record(|| Change::RequestDone {
            key: key.clone(),
            request_id: request_id.clone(),
            resolved: recorded.clone(),
            expires: SystemTime::now() + retention,
            fingerprint: None,
        });
        let expires = Instant::now() + retention;
        shard.record_done(key, request_id, recorded, expires, size, None);
        Ok(RequestAbort::Recorded)
    }

    pub(super) fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        self.check_open()?;
        let (attached, replaced) = self.agents.attach(
            &self.tenants,
            tenant,
            agent_id,
            parent_agent_id,
            holder,
            self.config.max_agents_per_tenant,
        )?;
        self.abort_all(replaced);
        Ok(attached)
    }

    pub(super) fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        if let Some(asks) = self
            .agents
            .detach(&self.tenants, tenant, agent_id, incarnation)
        {
            debug!(
                agent_id,
                incarnation,
                pending = asks.len(),
                "agent detached"
            );
            self.abort_all(asks);
        }
    }

    pub(super) fn stats(&self) -> Stats {
        let mut stats = Stats {
            pending: 0,
            subscribers: self.tenants.subscribers(),
        };
        for shard in self.shards.iter() {
            let (pending, subscribers) = shard.lock().counts();
            stats.pending += pending;
            stats.subscribers += subscribers;
        }
        stats
    }

    /// Shutdown: pending asks end DISPOSED, every session and lease goes. On a durable
    /// engine an ask with a request_id is handed over instead: its calls are told it
    /// was DISPOSED (they retry with its request_id) and it stays in the store, pending.
    pub(super) fn dispose_all(&self) {
        self.closed.store(true, Ordering::Release);
        let mut disposed = 0usize;
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let durable = self.durable.is_durable();
            let pending = shard.pending_asks(|s, id| !durable || !s.reattachable(id));
            disposed += pending.len();
            for (key, rpc_id) in pending {
                let _ = self.resolve(&mut shard, &key, &rpc_id, Outcome::disposed());
            }
            // What is left is handed over: its calls retry with the request_id.
            shard.clear_sessions(&Outcome::disposed());
        }
        self.tenants.clear();
        self.agents.clear();
        debug!(disposed, "memory backend disposed");
    }

    /// The session's state, made if it has none yet and its tenant may hold one more.
    fn session<'a>(
        &self,
        shard: &'a mut Shard,
        key: &SessionKey,
    ) -> Result<&'a mut Session, Error> {
        shard.session_or(key, || {
            let tenant_tx = self
                .tenants
                .admit_session(&key.tenant, self.config.max_sessions_per_tenant)?;
            let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
            self.durable.record(|| Change::SessionOpened {
                key: key.clone(),
                epoch,
            });
            Ok(Session::new(epoch, tenant_tx))
        })
    }

    /// Someone follows the session: a subscriber of it or an `all_sessions` subscriber
    /// of its tenant, now or less than the reconnect grace ago (Semantics 8).
    fn attended(&self, session: &Session, tenant: &str) -> bool {
        let grace = self.config.reconnect_grace;
        session.followed_within(grace) || self.tenants.attended_within(tenant, grace)
    }

    /// Drops an unused session once its reconnect grace is over; until then it stays
    /// (with its history, so a reconnecting subscriber can resume).
    fn retire_if_unused(&self, shard: &mut Shard, key: &SessionKey) {
        if shard.retire_if_unused(key, self.config.reconnect_grace) {
            self.tenants.session_gone(&key.tenant);
            self.durable
                .record(|| Change::SessionRetired { key: key.clone() });
        }
    }

    /// Retires the sessions whose grace is over and forgets the expired outcomes.
    pub(super) fn sweep(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for key in shard.due_retiring(now) {
                self.retire_if_unused(&mut shard, &key);
            }
            shard.expire_requests(now, |(key, request_id), held| {
                self.tenants.release_outcome(&key.tenant, held);
                self.durable
                    .record(|| Change::RequestExpired { key, request_id });
            });
        }
    }

    /// Removes the ask, hands its outcome to every waiting call, records it for
    /// retries, releases it from its agent's lease and broadcasts `resolved`;
    /// NOT_PENDING when it is not pending.
    fn resolve(
        &self,
        shard: &mut Shard,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), Error> {
        let session = shard.session_mut(key).ok_or_else(Error::not_pending)?;
        let ask = session
            .take_pending(rpc_id)
            .ok_or_else(|| session.not_pending(rpc_id))?;
        let fingerprint = match ask.request_id.is_empty() {
            true => None,
            false => shard.fingerprint_of(key, &ask.request_id),
        };
        let session = shard.session_mut(key).ok_or_else(Error::not_pending)?;
        let resolved = events::resolved(key, rpc_id, &outcome);
        debug!(%rpc_id, reason = ?outcome.resolution, "ask resolved");
        let oldest_before = session.oldest_kept();
        let (message, size) = session.push(self.history_limits(), Event::Resolved(resolved));
        // Its outcome, kept for retries, counts against the tenant's bytes in its place.
        let kept = match ask.request_id.is_empty() {
            true => 0,
            false => size,
        };
        self.tenants.release_pending(&key.tenant, ask.bytes, kept);
        let event = self.event_change(key, session, &message, oldest_before);
        let retention = self.config.request_retention;
        // The ask's removal, its `resolved`, its request's record and its audit record
        // are durable together.
        self.durable.record_audited(
            || {
                let mut changes = vec![
                    Change::AskRemoved {
                        key: key.clone(),
                        rpc_id: rpc_id.to_owned(),
                        order: ask.order,
                        voted: ask.votes.is_some(),
                    },
                    event,
                ];
                if !ask.request_id.is_empty() {
                    changes.push(Change::RequestDone {
                        key: key.clone(),
                        request_id: ask.request_id.clone(),
                        resolved: message.clone(),
                        expires: SystemTime::now() + retention,
                        fingerprint,
                    });
                }
                changes
            },
            || audit_entry(key, &message, &ask.requested),
        );
        session.publish(&message);
        if let Some(agent) = ask.agent() {
            self.agents.release_ask(key, rpc_id, agent);
        }
        if !ask.request_id.is_empty() {
            let expires = Instant::now() + retention;
            let id = ask.request_id;
            shard.record_done(key, id, message.clone(), expires, size, fingerprint);
        }
        // Calls that went away (aborted, or waiting out a reattach grace) are skipped.
        let waiters = ask.waiters;
        self.durable.once_durable(move || {
            for waiter in waiters {
                let _ = waiter.send(Box::new(outcome.clone()));
            }
        });
        let tenant = key.tenant.clone();
        let asked = Some(Asked::Event(ask.requested));
        self.durable
            .report(move || Committed::new(tenant, message, asked));
        Ok(())
    }

    /// Resolves the given asks ABORTED: their agent's lease ended.
    fn abort_all(&self, asks: AskKeys) {
        for (key, rpc_id) in asks {
            // NOT_PENDING when it was resolved meanwhile: nothing to do.
            let _ = self.settle(&mut self.shard(&key), &key, &rpc_id, Outcome::aborted());
        }
    }

    /// Stores a new ask after every check; the shard is locked by the caller.
    /// `fingerprint`: the ask's, when it has a request_id.
    fn store(
        &self,
        shard: &mut Shard,
        mut ask: NewAsk,
        fingerprint: Option<Fingerprint>,
    ) -> Result<Registered, Error> {
        let key = ask.key.clone();
        let config = &self.config;
        let session = self.session(shard, &key)?;
        // The caller first, then the provider, then capacity. The agents stay locked
        // until the ask is recorded under its lease, so a detach cannot slip between.
        let mut caller = match &ask.agent {
            Some(agent) => Some(self.agents.check_caller(&key.tenant, agent)?),
            None => None,
        };
        if ask.if_unattended == Unattended::Fail && !self.attended(session, &key.tenant) {
            return Err(Error::NoProvider);
        }
        let rpc_id = Uuid::now_v7().to_string();
        let requested = events::requested(&rpc_id, &mut ask);
        // What the ask holds while pending, as the Redis engine counts it.
        let bytes = prost::Message::encoded_len(&requested) as u64;
        session.check_room(
            config.max_pending_per_session,
            config.max_pending_bytes_per_session,
            bytes,
        )?;
        self.tenants.count_pending(
            &key.tenant,
            bytes,
            config.max_pending_per_tenant,
            config.max_pending_bytes_per_tenant,
        )?;
        let message = self.push(session, &key, Event::Requested(requested));
        let (tenant, reported) = (key.tenant.clone(), message.clone());
        let (outcome_tx, outcome) = oneshot::channel();
        let request_id: Arc<str> = ask.request_id.as_str().into();
        let order = self.next_order.fetch_add(1, Ordering::Relaxed);
        self.durable.record(|| {
            Change::AskAdded(Box::new(AddedAsk {
                key: key.clone(),
                rpc_id: rpc_id.clone(),
                seq: session.head(),
                order,
                bytes,
                request_id: request_id.clone(),
                requested: message.clone(),
                reattach_grace: ask.reattach_grace,
                votes: None,
            }))
        });
        session.add_pending(
            &rpc_id,
            PendingAsk {
                order,
                bytes,
                requested: message,
                waiters: vec![outcome_tx],
                request_id: request_id.clone(),
                votes: None,
            },
        );
        if !request_id.is_empty() {
            self.durable.record(|| Change::RequestPending {
                key: key.clone(),
                request_id: request_id.clone(),
                rpc_id: rpc_id.clone(),
                fingerprint,
            });
        }
        // Subscribers see it once all of it is recorded, and (a durable engine's) on
        // disk: a question a human saw is never lost by a crash.
        session.publish(&reported);
        if let (Some(caller), Some(agent)) = (caller.as_mut(), &ask.agent) {
            caller.record(&key, &rpc_id, agent);
        }
        if !request_id.is_empty() {
            shard.record_pending(&key, request_id, &rpc_id, fingerprint);
        }
        // Reported once everything above is durable (on a durable engine).
        self.durable
            .report(move || Committed::new(tenant, reported, None));
        Ok(Registered { rpc_id, outcome })
    }
}

/// The audit record of the `resolved` event `message` of the ask `requested`.
fn audit_entry(key: &SessionKey, message: &Message, requested: &Message) -> Option<AuditEntry> {
    let asked = match &requested.event {
        Some(Event::Requested(requested)) => Some(requested),
        _ => None,
    };
    match &message.event {
        Some(Event::Resolved(resolved)) => Some(audit::resolution(&key.tenant, resolved, asked)),
        _ => None,
    }
}
