//! A subscriber's follow: the replay (a snapshot, or the history after a cursor), then
//! live events merged with the session's history by sequence number, with `reset` when
//! a gap cannot be filled; for one session or for a tenant's `all_sessions`.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_core::{
    backend::events::{self, Message, cursor, message, parse_cursor},
    domain::{Error, SessionKey},
};
use askgate_proto::v1::subscribe_response::Event;
use tokio::{
    sync::{broadcast, mpsc, watch},
    task::JoinHandle,
};
use tracing::debug;

use super::node::Node;
use crate::redis_engine::{fanout::LiveEvent, store::StoredEvent};

/// What a follower hands its subscriber's stream: a live event, or a whole replay at
/// once (one hand-over between tasks for thousands of pending asks, rather than one
/// per event once the buffer is full).
pub(super) enum Delivery {
    One(Message),
    Many(VecDeque<Message>),
}

type DeliveryTx = mpsc::Sender<Result<Delivery, Error>>;

/// The receiving end of a follower: what its subscriber's stream reads.
pub(super) type DeliveryRx = mpsc::Receiver<Result<Delivery, Error>>;

/// Where a subscriber's events go, and what it has sent so far.
pub(super) struct Follower {
    node: Arc<Node>,
    events_tx: DeliveryTx,
    /// Changes when this node's pub/sub connection is lost: what was published
    /// meanwhile never arrived, so the subscription ends UNAVAILABLE and the
    /// subscriber resumes from its cursor (through a healthy node, or once Redis is back).
    lost: watch::Receiver<u64>,
    /// Changes to true when the node drains.
    closing: watch::Receiver<bool>,
}

fn lost_subscription() -> Error {
    Error::BackendUnavailable(
        "this node lost its redis subscription; resume from the last cursor".into(),
    )
}

/// What an `all_sessions` follower does with one live event (see `tenant_step`).
enum TenantStep {
    /// It has the event already.
    Skip,
    /// Forward this event.
    This,
    /// Forward these events of its session, from the history, instead.
    History(Vec<(u64, StoredEvent)>),
    /// The history cannot fill the gap: reset and take a new snapshot.
    Reset,
}

fn session_of(event: &StoredEvent) -> &str {
    event.session_id()
}

/// How far before an `all_sessions` subscription's snapshot the events of a session it
/// did not cover still count: the nodes' clock skew and the events in flight.
const UNSEEN_MARGIN: Duration = Duration::from_secs(2);

/// The events of a session first seen by an `all_sessions` subscriber: those since
/// `since` (by the ask's own timestamps), never a `resolved` without its `requested`,
/// and every ask the history leaves pending, however old: the snapshot did not cover
/// the session (a registration whose tenant part ran late, after a failover, had not
/// put it in the sessions index yet), so this is the subscriber's only sight of it.
/// The history holds the live event that revealed the session (the scripts write
/// before they publish).
fn since_subscribed(events: Vec<(u64, StoredEvent)>, since: SystemTime) -> Vec<(u64, StoredEvent)> {
    let at = |t: &Option<prost_types::Timestamp>| {
        t.and_then(|t| SystemTime::try_from(t).ok())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    let resolved: HashSet<&str> = events
        .iter()
        .filter(|(_, event)| matches!(event, StoredEvent::Resolved(_)))
        .map(|(_, event)| event.rpc_id())
        .collect();
    let earlier: HashSet<String> = events
        .iter()
        .filter_map(|(_, event)| match event {
            StoredEvent::Requested(r)
                if at(&r.requested_at) < since && resolved.contains(r.rpc_id.as_str()) =>
            {
                Some(r.rpc_id.clone())
            }
            _ => None,
        })
        .collect();
    events
        .into_iter()
        .filter(|(_, event)| !earlier.contains(event.rpc_id()))
        .collect()
}

/// What forwarding a live event did.
enum Forwarded {
    Sent,
    /// The subscriber's buffer is full: it fell behind and must be reset.
    Behind,
    Closed,
}

impl Follower {
    /// A follower on `node` with room for `buffer` deliveries, and its receiving end.
    pub(super) fn new(node: Arc<Node>, buffer: usize) -> (Self, DeliveryRx) {
        let (events_tx, events_rx) = mpsc::channel(buffer.max(1));
        let follower = Self {
            lost: node.fanout().watch_disconnections(),
            closing: node.closing(),
            node,
            events_tx,
        };
        (follower, events_rx)
    }

    /// Follows one session on a task of its own (see [`Follower::session`]).
    pub(super) fn spawn_session(
        self,
        key: SessionKey,
        after: Option<String>,
        live: broadcast::Receiver<Arc<LiveEvent>>,
    ) -> JoinHandle<()> {
        let events_tx = self.events_tx.clone();
        tokio::spawn(async move {
            let ended = self.session(key, after, live).await;
            fail_subscription(&events_tx, ended).await;
        })
    }

    /// Follows every session of a tenant on a task of its own (see [`Follower::tenant`]).
    pub(super) fn spawn_tenant(
        self,
        tenant: String,
        reset_first: bool,
        live: broadcast::Receiver<Arc<LiveEvent>>,
    ) -> JoinHandle<()> {
        let events_tx = self.events_tx.clone();
        tokio::spawn(async move {
            let ended = self.tenant(tenant, reset_first, live).await;
            fail_subscription(&events_tx, ended).await;
        })
    }

    /// Sends, waiting for room (replays and snapshots).
    async fn send(&self, message: Message) -> bool {
        self.events_tx
            .send(Ok(Delivery::One(message)))
            .await
            .is_ok()
    }

    /// Sends a replay as one delivery, waiting for room.
    async fn send_all(&self, messages: VecDeque<Message>) -> bool {
        messages.is_empty()
            || self
                .events_tx
                .send(Ok(Delivery::Many(messages)))
                .await
                .is_ok()
    }

    /// Forwards a live event without waiting: a subscriber that cannot keep up gets
    /// `reset` and a snapshot instead of an ever-growing queue.
    fn forward(&self, message: Message) -> Forwarded {
        match self.events_tx.try_send(Ok(Delivery::One(message))) {
            Ok(()) => Forwarded::Sent,
            Err(mpsc::error::TrySendError::Full(_)) => Forwarded::Behind,
            Err(mpsc::error::TrySendError::Closed(_)) => Forwarded::Closed,
        }
    }

    /// The pending asks of a session as `requested` events with their own cursors, then
    /// `synced`; returns the epoch and sequence number the snapshot reflects, or None
    /// when the subscriber is gone.
    async fn snapshot_session(&self, key: &SessionKey) -> Result<Option<(String, u64)>, Error> {
        let snapshot = self.node.store().snapshot(key).await?;
        let pending = snapshot.pending.into_iter().map(|(seq, requested)| {
            message(cursor(&snapshot.epoch, seq), Event::Requested(requested))
        });
        let replay =
            events::snapshot_replay(false, pending, cursor(&snapshot.epoch, snapshot.head));
        Ok(self
            .send_all(replay)
            .await
            .then_some((snapshot.epoch, snapshot.head)))
    }

    /// Sends the stored events after `last` (a gap in the live stream, or the final
    /// catch-up at shutdown); returns the new last sequence number, or None when the
    /// history no longer holds them (the caller resets).
    async fn catch_up(
        &self,
        key: &SessionKey,
        epoch: &str,
        last: u64,
    ) -> Result<Option<u64>, Error> {
        let Some(events) = self.node.store().events_after(key, epoch, last).await? else {
            return Ok(None);
        };
        let last = events.last().map_or(last, |(seq, _)| *seq);
        let replay = events
            .into_iter()
            .map(|(seq, event)| message(cursor(epoch, seq), event.to_event()))
            .collect();
        self.send_all(replay).await;
        Ok(Some(last))
    }

    /// Replay then follow one session, merging live events with the history by
    /// sequence number: no gap, no duplicate; `reset` and a snapshot when the history
    /// cannot fill a gap or the epoch changed.
    async fn session(
        mut self,
        key: SessionKey,
        after: Option<String>,
        mut live: broadcast::Receiver<Arc<LiveEvent>>,
    ) -> Result<(), Error> {
        let Some((mut epoch, mut last)) = self.start_session(&key, after).await? else {
            return Ok(());
        };
        loop {
            let event = tokio::select! {
                () = self.events_tx.closed() => return Ok(()),
                _ = self.lost.changed() => return Err(lost_subscription()),
                _ = self.closing.changed() => {
                    // Shutdown: deliver what was written up to now, then end.
                    if !epoch.is_empty() {
                        self.catch_up(&key, &epoch, last).await?;
                    }
                    return Ok(());
                }
                event = live.recv() => event,
            };
            let event = match event {
                Ok(event) => event,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let Some(at) = self.resync_session(&key).await? else {
                        return Ok(());
                    };
                    (epoch, last) = at;
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            };
            if epoch.is_empty() {
                epoch = event.epoch.clone();
            }
            match self.take_live(&key, &epoch, last, &event).await? {
                Step::Went(to) => last = to,
                Step::Resync => match self.resync_session(&key).await? {
                    Some(at) => (epoch, last) = at,
                    None => return Ok(()),
                },
                Step::End => return Ok(()),
            }
        }
    }

    /// Where a session's subscription starts: after the cursor it resumes from (the
    /// events missed since, then `synced`), or a snapshot (after a `reset` when the
    /// cursor could not be resumed). None when the subscriber left meanwhile.
    async fn start_session(
        &mut self,
        key: &SessionKey,
        after: Option<String>,
    ) -> Result<Option<(String, u64)>, Error> {
        let resumed = match after.as_deref().and_then(parse_cursor) {
            Some((e, seq)) => self
                .node
                .store()
                .events_after(key, e, seq)
                .await?
                .map(|events| (e.to_owned(), seq, events)),
            None => None,
        };
        match resumed {
            Some((epoch, last, events)) => {
                let last = events.last().map_or(last, |(seq, _)| *seq);
                let missed = events
                    .into_iter()
                    .map(|(seq, event)| message(cursor(&epoch, seq), event.to_event()));
                let replay = events::resumed_replay(missed, cursor(&epoch, last));
                Ok(self.send_all(replay).await.then_some((epoch, last)))
            }
            None => {
                if after.is_some() && !self.send(events::reset()).await {
                    return Ok(None);
                }
                self.snapshot_session(key).await
            }
        }
    }

    /// One live event of the session, at `last` of `epoch`: skipped when held
    /// already, forwarded when it is the next, the history's events up to it when some
    /// are missing; a resync when the epoch changed, the history cannot fill the gap,
    /// or the subscriber fell behind.
    async fn take_live(
        &mut self,
        key: &SessionKey,
        epoch: &str,
        last: u64,
        event: &LiveEvent,
    ) -> Result<Step, Error> {
        if event.epoch != epoch {
            return Ok(Step::Resync);
        }
        if event.seq <= last {
            return Ok(Step::Went(last));
        }
        if event.seq > last + 1 {
            return Ok(match self.catch_up(key, epoch, last).await? {
                Some(to) => Step::Went(to),
                None => Step::Resync,
            });
        }
        Ok(
            match self.forward(message(cursor(epoch, event.seq), event.event.to_event())) {
                Forwarded::Sent => Step::Went(event.seq),
                Forwarded::Behind => Step::Resync,
                Forwarded::Closed => Step::End,
            },
        )
    }

    /// `reset`, then a fresh snapshot of the session; None when the subscriber left.
    async fn resync_session(&mut self, key: &SessionKey) -> Result<Option<(String, u64)>, Error> {
        if !self.send(events::reset()).await {
            return Ok(None);
        }
        self.snapshot_session(key).await
    }

    /// What an `all_sessions` subscriber gets for one live event of the tenant's channel:
    /// nothing if it has it already, the event itself when it follows the last one of
    /// its session, or the session's history from there when events are missing (on a
    /// Redis Cluster each node publishes to the tenant's channel after its script, so
    /// events of one session can arrive out of order). For a session the snapshot did
    /// not cover, the history's events since `since`, keeping each ask's `requested`
    /// before its `resolved`. A reset when the history cannot fill a gap.
    async fn tenant_step(
        &self,
        tenant: &str,
        seen: &HashMap<String, (String, u64)>,
        event: &LiveEvent,
        since: SystemTime,
    ) -> Result<TenantStep, Error> {
        let session_id = session_of(&event.event);
        let key = || SessionKey::new(tenant, session_id);
        let store = self.node.store();
        Ok(match seen.get(session_id) {
            Some((epoch, last)) if *epoch == event.epoch => {
                if event.seq <= *last {
                    TenantStep::Skip
                } else if event.seq == last + 1 {
                    TenantStep::This
                } else {
                    match store.events_after(&key(), epoch, *last).await? {
                        Some(events) => TenantStep::History(events),
                        None => TenantStep::Reset,
                    }
                }
            }
            // On one server the scripts publish in order and the sessions index is
            // exact: a session the snapshot did not cover starts with this event.
            None if !store.is_cluster() => TenantStep::This,
            None => match store.recent_events(&key(), &event.epoch).await? {
                Some(events) => TenantStep::History(since_subscribed(events, since)),
                None => TenantStep::This,
            },
            Some(_) => TenantStep::This,
        })
    }

    /// Forwards one event of a session to an `all_sessions` subscriber and notes it as
    /// the last one of its session.
    fn forward_tenant(
        &self,
        seen: &mut HashMap<String, (String, u64)>,
        epoch: &str,
        seq: u64,
        stored: &StoredEvent,
    ) -> Forwarded {
        let session_id = session_of(stored);
        match seen.get_mut(session_id) {
            Some(last) => *last = (epoch.to_owned(), seq),
            None => {
                seen.insert(session_id.to_owned(), (epoch.to_owned(), seq));
            }
        }
        self.forward(message(cursor(epoch, seq), stored.to_event()))
    }

    /// Sends the pending asks of every session of the tenant, oldest first, then
    /// `synced`, noting in `seen` where each session's snapshot stands; false when the
    /// subscriber left.
    async fn snapshot_tenant(
        &mut self,
        tenant: &str,
        seen: &mut HashMap<String, (String, u64)>,
    ) -> Result<bool, Error> {
        seen.clear();
        let mut pending = Vec::new();
        for session_id in self.node.store().tenant_sessions(tenant).await? {
            let key = SessionKey::new(tenant, session_id.as_str());
            let snapshot = self.node.store().snapshot(&key).await?;
            for (seq, requested) in snapshot.pending {
                pending.push((snapshot.epoch.clone(), seq, requested));
            }
            seen.insert(session_id, (snapshot.epoch, snapshot.head));
        }
        pending.sort_by_key(|(_, _, r)| r.requested_at.map(|t| (t.seconds, t.nanos)));
        let pending = pending.into_iter().map(|(epoch, seq, requested)| {
            message(cursor(&epoch, seq), Event::Requested(requested))
        });
        let replay = events::snapshot_replay(false, pending, String::new());
        Ok(self.send_all(replay).await)
    }

    /// All sessions of a tenant: a snapshot of every session's pending asks (oldest
    /// first), then live events, skipping those the snapshot already covered.
    async fn tenant(
        mut self,
        tenant: String,
        reset_first: bool,
        mut live: broadcast::Receiver<Arc<LiveEvent>>,
    ) -> Result<(), Error> {
        // session_id → (epoch, last sequence number sent or covered)
        let mut seen: HashMap<String, (String, u64)> = HashMap::new();
        let mut first = reset_first;
        loop {
            if first && !self.send(events::reset()).await {
                return Ok(());
            }
            first = true;
            // Events of sessions the snapshot does not cover count from here on (less a
            // margin for the nodes' clocks and the events in flight).
            let since = SystemTime::now() - UNSEEN_MARGIN;
            if !self.snapshot_tenant(&tenant, &mut seen).await? {
                return Ok(());
            }
            loop {
                let event = tokio::select! {
                    () = self.events_tx.closed() => return Ok(()),
                    _ = self.lost.changed() => return Err(lost_subscription()),
                    _ = self.closing.changed() => {
                        for (session_id, (epoch, last)) in seen.clone() {
                            let key = SessionKey::new(tenant.as_str(), session_id.as_str());
                            if !epoch.is_empty() {
                                self.catch_up(&key, &epoch, last).await?;
                            }
                        }
                        return Ok(());
                    }
                    event = live.recv() => event,
                };
                match event {
                    Ok(event) => {
                        let epoch = &event.epoch;
                        let forwarded =
                            match self.tenant_step(&tenant, &seen, &event, since).await? {
                                TenantStep::Skip => continue,
                                TenantStep::Reset => break,
                                TenantStep::This => {
                                    self.forward_tenant(&mut seen, epoch, event.seq, &event.event)
                                }
                                TenantStep::History(events) => {
                                    let mut forwarded = Forwarded::Sent;
                                    for (seq, stored) in &events {
                                        forwarded =
                                            self.forward_tenant(&mut seen, epoch, *seq, stored);
                                        if !matches!(forwarded, Forwarded::Sent) {
                                            break;
                                        }
                                    }
                                    forwarded
                                }
                            };
                        match forwarded {
                            Forwarded::Sent => {}
                            Forwarded::Behind => break,
                            Forwarded::Closed => return Ok(()),
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                }
            }
        }
    }
}

/// What one live event did to a session's subscription.
enum Step {
    /// The subscriber has everything up to this sequence number.
    Went(u64),
    /// It must start over from a snapshot.
    Resync,
    /// It is gone.
    End,
}

/// Ends a subscription whose follower failed with its error (the subscriber gets the
/// status, e.g. UNAVAILABLE, instead of a clean end it would take for a shutdown).
async fn fail_subscription(events_tx: &DeliveryTx, ended: Result<(), Error>) {
    if let Err(e) = ended {
        debug!("subscription failed: {e}");
        let _ = events_tx.send(Err(e)).await;
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Requested, Resolved};

    use super::*;

    fn requested(rpc_id: &str, at: SystemTime) -> StoredEvent {
        StoredEvent::Requested(Requested {
            rpc_id: rpc_id.into(),
            requested_at: Some(at.into()),
            ..Default::default()
        })
    }

    fn resolved(rpc_id: &str) -> StoredEvent {
        StoredEvent::Resolved(Resolved {
            rpc_id: rpc_id.into(),
            ..Default::default()
        })
    }

    /// A session the snapshot missed: what came before the subscription and ended is
    /// history, but an ask still pending is shown however old (before: dropped, and
    /// the subscriber never saw the ask).
    #[test]
    fn an_unseen_session_shows_its_pending_asks_however_old() {
        let since = SystemTime::now();
        let old = since - Duration::from_secs(60);
        let events = vec![
            (1, requested("ended", old)),
            (2, resolved("ended")),
            (3, requested("waiting", old)),
            (4, requested("new", since + Duration::from_secs(1))),
            (5, resolved("new")),
        ];
        let kept = since_subscribed(events, since);
        let kept: Vec<(u64, &str)> = kept
            .iter()
            .map(|(seq, event)| (*seq, event.rpc_id()))
            .collect();
        assert_eq!(kept, [(3, "waiting"), (4, "new"), (5, "new")]);
    }
}
