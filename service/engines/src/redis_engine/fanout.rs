//! Cross-node fan-out: one RESP3 connection per node receives the Redis pub/sub
//! messages of every session this node follows (for its subscribers and its waiting
//! asks) and hands them to local broadcast channels. The connection is a redis-rs
//! `ConnectionManager` with automatic resubscription (on a Redis Cluster, a cluster
//! connection using sharded pub/sub, SSUBSCRIBE, one connection per shard), so after a
//! reconnect the node is subscribed again. Followers are told (`watch_disconnections`):
//! what was published meanwhile never arrived, so subscriptions end UNAVAILABLE and
//! resume from their cursor, and waiting calls re-read the history.
//!
//! A node subscribes to a session's channel before it reads the session's state, so no
//! event can fall between the read and the live stream; consumers drop live events
//! whose sequence number they already have.

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
};

use parking_lot::Mutex;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::{broadcast, mpsc};
use tracing::{debug, warn};

use super::store::{RedisConn, RedisStore, RedisTarget, StoredEvent, parse_event};
use askgate_core::domain::Error;

/// Live events of one session a local follower may fall behind before it must resync.
pub const SESSION_BUFFER: usize = 1024;
/// The same for a tenant's channel, which carries every session's events.
pub const TENANT_BUFFER: usize = 16 * 1024;

/// One live event of a session, as published by whichever node made it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    pub epoch: String,
    pub seq: u64,
    pub event: StoredEvent,
}

/// Parses a published message: `<epoch> <seq> <entry>`.
pub fn parse_live(payload: &[u8]) -> Result<LiveEvent, Error> {
    let bad = || Error::Internal("malformed pub/sub message".into());
    let space = payload.iter().position(|b| *b == b' ').ok_or_else(bad)?;
    let (epoch, rest) = (&payload[..space], &payload[space + 1..]);
    let space = rest.iter().position(|b| *b == b' ').ok_or_else(bad)?;
    let (seq, entry) = (&rest[..space], &rest[space + 1..]);
    Ok(LiveEvent {
        epoch: String::from_utf8(epoch.to_vec()).map_err(|_| bad())?,
        seq: std::str::from_utf8(seq)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?,
        event: parse_event(entry)?,
    })
}

/// One followed channel: the local broadcast and whether Redis confirmed the
/// subscription (changed only under `Fanout::changes`).
struct Channel {
    sender: broadcast::Sender<Arc<LiveEvent>>,
    subscribed: std::sync::atomic::AtomicBool,
}

type Channels = Arc<Mutex<HashMap<String, Arc<Channel>>>>;

/// This node's view of the sessions it follows.
pub struct Fanout {
    conn: RedisConn,
    channels: Channels,
    /// Serializes SUBSCRIBE and UNSUBSCRIBE, so that one for a channel can never
    /// overtake the other (an UNSUBSCRIBE arriving last would silently stop delivery),
    /// and makes every follower wait for the confirmation, not only the first.
    changes: tokio::sync::Mutex<()>,
    dispatcher: tokio::task::JoinHandle<()>,
    /// How many times the subscription was lost (a disconnection, a stall): followers
    /// watch it, since what was published meanwhile never reached them.
    disconnections: Arc<tokio::sync::watch::Sender<u64>>,
    probe: Arc<Probe>,
}

/// Detects a pub/sub connection that silently stopped delivering (a known failure
/// after a failover): the node publishes numbered probes to a channel of its own and
/// checks that they come back through its subscription.
struct Probe {
    channel: String,
    sent: std::sync::atomic::AtomicU64,
    seen: std::sync::atomic::AtomicU64,
    /// The last probe sent before the subscription was lost: one after it coming back
    /// proves the subscription (and every channel resubscribed with it) live again.
    floor: std::sync::atomic::AtomicU64,
    /// False from a loss of the subscription until a later probe came back.
    live: std::sync::atomic::AtomicBool,
}

impl Probe {
    /// The subscription was lost: probes in flight are gone with it, and nothing
    /// published counts as delivered until a new probe comes back.
    fn lost(&self) {
        use std::sync::atomic::Ordering;
        self.live.store(false, Ordering::Release);
        let sent = self.sent.load(Ordering::Acquire);
        self.floor.fetch_max(sent, Ordering::AcqRel);
        self.seen.fetch_max(sent, Ordering::AcqRel);
    }

    fn came_back(&self, n: u64) {
        use std::sync::atomic::Ordering;
        self.seen.fetch_max(n, Ordering::AcqRel);
        if n > self.floor.load(Ordering::Acquire) {
            self.live.store(true, Ordering::Release);
        }
    }
}

/// Probes that may be in flight before the subscription counts as stalled.
const PROBES_IN_FLIGHT: u64 = 2;

impl Drop for Fanout {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

impl Fanout {
    pub async fn connect(target: impl Into<RedisTarget>) -> anyhow::Result<Self> {
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let conn = target.into().connect(Some(push_tx)).await?;
        let channels: Channels = Arc::default();
        let disconnections = Arc::new(tokio::sync::watch::Sender::new(0));
        let probe = Arc::new(Probe {
            channel: format!("ag:probe:{}", uuid::Uuid::new_v4().simple()),
            sent: std::sync::atomic::AtomicU64::new(0),
            seen: std::sync::atomic::AtomicU64::new(0),
            floor: std::sync::atomic::AtomicU64::new(0),
            live: std::sync::atomic::AtomicBool::new(true),
        });
        let dispatcher = tokio::spawn(dispatch(
            push_rx,
            conn.clone(),
            Arc::downgrade(&channels),
            disconnections.clone(),
            probe.clone(),
        ));
        conn.clone().subscribe(&probe.channel).await?;
        Ok(Self {
            conn,
            channels,
            changes: tokio::sync::Mutex::new(()),
            dispatcher,
            disconnections,
            probe,
        })
    }

    /// Publishes the next probe through the store (`publisher`). Returns
    /// false when earlier probes did not come back: the subscription is stalled. Then
    /// every channel is subscribed again and followers are told to re-read the history
    /// (as after a disconnection); the probe reports healthy again once probes flow.
    pub async fn probe(&self, publisher: &RedisStore) -> bool {
        use std::sync::atomic::Ordering;
        let seen = self.probe.seen.load(Ordering::Acquire);
        let sent = self.probe.sent.load(Ordering::Acquire);
        let stalled = sent.saturating_sub(seen) > PROBES_IN_FLIGHT;
        if stalled {
            warn!(
                sent,
                seen, "redis pub/sub stopped delivering; resubscribing"
            );
            self.probe.lost();
            self.disconnections.send_modify(|n| *n += 1);
            let _changing = self.changes.lock().await;
            let mut channels: Vec<String> = self.channels.lock().keys().cloned().collect();
            channels.push(self.probe.channel.clone());
            // One at a time: on a cluster, one SSUBSCRIBE may only name one slot.
            for channel in &channels {
                if let Err(e) = self.conn.clone().subscribe(channel).await {
                    warn!("resubscribing failed: {e}");
                    break;
                }
            }
        }
        // Only a probe Redis accepted counts as sent: while Redis is down none are, so
        // its return is not mistaken for a stall.
        let next = sent + 1;
        let published = publisher.publish(&self.probe.channel, next).await;
        if published.is_ok() {
            self.probe.sent.fetch_max(next, Ordering::AcqRel);
        }
        published.is_ok() && !stalled && self.is_live()
    }

    /// Whether the subscription delivers: false from its loss until a probe sent
    /// after it came back. A channel followed meanwhile could miss what is published
    /// before Redis has it subscribed again, so [`Fanout::follow`] refuses then.
    pub fn is_live(&self) -> bool {
        self.probe.live.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many times the pub/sub connection was lost: messages published meanwhile
    /// were missed, so whoever depends on them re-reads the history.
    pub fn disconnections(&self) -> u64 {
        *self.disconnections.borrow()
    }

    /// Changes each time the subscription is lost (see [`Fanout::disconnections`]).
    pub fn watch_disconnections(&self) -> tokio::sync::watch::Receiver<u64> {
        self.disconnections.subscribe()
    }

    /// Live events of `channel` from now on. The subscription is confirmed by Redis
    /// before this returns, so reading the session's state afterwards misses nothing.
    pub async fn follow(
        &self,
        channel: &str,
        capacity: usize,
    ) -> Result<broadcast::Receiver<Arc<LiveEvent>>, Error> {
        loop {
            let entry = self
                .channels
                .lock()
                .entry(channel.to_owned())
                .or_insert_with(|| {
                    Arc::new(Channel {
                        sender: broadcast::channel(capacity.max(1)).0,
                        subscribed: std::sync::atomic::AtomicBool::new(false),
                    })
                })
                .clone();
            let receiver = entry.sender.subscribe();
            let _changing = self.changes.lock().await;
            let current = self
                .channels
                .lock()
                .get(channel)
                .is_some_and(|c| Arc::ptr_eq(c, &entry));
            if !current {
                // Released meanwhile: start over with the channel's new entry.
                continue;
            }
            if !entry.subscribed.load(std::sync::atomic::Ordering::Acquire) {
                self.subscribe_retrying(channel).await?;
                entry
                    .subscribed
                    .store(true, std::sync::atomic::Ordering::Release);
                debug!(channel, "following a session");
            }
            if !self.is_live() {
                return Err(Error::BackendUnavailable(
                    "redis pub/sub is reconnecting".into(),
                ));
            }
            return Ok(receiver);
        }
    }

    /// SUBSCRIBE, tried again a few times when the connection just failed: after an
    /// outage the connection manager replaces a broken connection on its first error.
    async fn subscribe_retrying(&self, channel: &str) -> Result<(), Error> {
        let mut pause = std::time::Duration::from_millis(50);
        let mut attempts = 0;
        loop {
            match self.conn.clone().subscribe(channel).await {
                Ok(()) => return Ok(()),
                Err(e) if attempts < 4 && (e.is_connection_dropped() || e.is_io_error()) => {
                    attempts += 1;
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                Err(e) => {
                    return Err(Error::BackendUnavailable(format!("redis subscribe: {e}")));
                }
            }
        }
    }

    /// Stops following `channel` once nobody on this node listens to it.
    pub async fn release(&self, channel: &str) {
        let Some(entry) = self.channels.lock().get(channel).cloned() else {
            return;
        };
        let _changing = self.changes.lock().await;
        {
            let mut channels = self.channels.lock();
            let current = channels
                .get(channel)
                .is_some_and(|c| Arc::ptr_eq(c, &entry));
            if !current || entry.sender.receiver_count() > 0 {
                return;
            }
            channels.remove(channel);
        }
        if entry
            .subscribed
            .swap(false, std::sync::atomic::Ordering::AcqRel)
            && let Err(e) = self.conn.clone().unsubscribe(channel).await
        {
            warn!(channel, "redis unsubscribe failed: {e}");
        }
    }
}

async fn dispatch(
    mut push_rx: mpsc::UnboundedReceiver<PushInfo>,
    conn: RedisConn,
    channels: Weak<Mutex<HashMap<String, Arc<Channel>>>>,
    disconnections: Arc<tokio::sync::watch::Sender<u64>>,
    probe: Arc<Probe>,
) {
    while let Some(push) = push_rx.recv().await {
        let Some(channels) = channels.upgrade() else {
            return;
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                let [Value::BulkString(channel), Value::BulkString(payload)] = push.data.as_slice()
                else {
                    continue;
                };
                let channel = String::from_utf8_lossy(channel);
                if channel == probe.channel {
                    if let Some(n) = std::str::from_utf8(payload)
                        .ok()
                        .and_then(|p| p.parse().ok())
                    {
                        probe.came_back(n);
                    }
                    continue;
                }
                let event = match parse_live(payload) {
                    Ok(event) => Arc::new(event),
                    Err(e) => {
                        warn!(%channel, "dropping a pub/sub message: {e}");
                        continue;
                    }
                };
                if let Some(entry) = channels.lock().get(channel.as_ref()) {
                    let _ = entry.sender.send(event);
                }
            }
            PushKind::Disconnection => {
                conn.pubsub_lost(&push);
                probe.lost();
                disconnections.send_modify(|n| *n += 1);
                warn!("redis pub/sub connection lost; it resubscribes on reconnect");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use askgate_core::{backend::StateConfig, domain::SessionKey};
    use askgate_proto::v1::{Requested, Resolution, Resolved};
    use askgate_testing::RedisServer;

    use super::*;
    use crate::redis_engine::store::{RedisStore, SessionKeys};

    #[tokio::test]
    async fn events_written_by_one_node_reach_another_nodes_followers_in_order() {
        let redis = RedisServer::start().await;
        let writer = RedisStore::connect(&redis.url, StateConfig::default())
            .await
            .expect("writer node");
        let reader = Fanout::connect(&redis.url).await.expect("reader node");
        let key = SessionKey::new("acme", "s");
        let channel = SessionKeys::new(&key).channel();
        let mut live = reader
            .follow(&channel, SESSION_BUFFER)
            .await
            .expect("follow");

        let requested = Requested {
            rpc_id: "r1".into(),
            session_id: "s".into(),
            ..Default::default()
        };
        writer
            .register(&key, &requested, "", None, None)
            .await
            .expect("register");
        let resolved = Resolved {
            rpc_id: "r1".into(),
            session_id: "s".into(),
            reason: Resolution::Answered.into(),
            resolved_by: "ana".into(),
            ..Default::default()
        };
        writer.claim(&key, &resolved).await.expect("claim");

        let first = tokio::time::timeout(std::time::Duration::from_secs(10), live.recv())
            .await
            .expect("within 10 s")
            .expect("an event");
        assert_eq!(first.seq, 1);
        assert_eq!(first.event, StoredEvent::Requested(requested));
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), live.recv())
            .await
            .expect("within 10 s")
            .expect("an event");
        assert_eq!((second.seq, &second.epoch), (2, &first.epoch));
        assert_eq!(second.event, StoredEvent::Resolved(resolved));

        drop(live);
        reader.release(&channel).await;
        assert!(reader.channels.lock().is_empty());
    }

    #[tokio::test]
    async fn a_subscription_that_silently_stops_delivering_is_detected_and_repaired() {
        let redis = RedisServer::start().await;
        let fanout = Fanout::connect(&redis.url).await.expect("fanout");
        let publisher = RedisStore::connect(RedisTarget::from(&redis.url), StateConfig::default())
            .await
            .expect("publisher");
        healthy_soon(&fanout, &publisher).await;

        // Stop delivery behind the node's back: its subscription is gone, nothing says so.
        fanout
            .conn
            .clone()
            .unsubscribe(&fanout.probe.channel)
            .await
            .expect("unsubscribe");
        let before = fanout.disconnections();
        let mut stalled = false;
        for _ in 0..(PROBES_IN_FLIGHT + 2) {
            stalled |= !fanout.probe(&publisher).await;
        }
        assert!(stalled, "the stall was not detected");
        assert!(
            fanout.disconnections() > before,
            "followers are told to resync"
        );
        healthy_soon(&fanout, &publisher).await;
    }

    /// Probes until one reports healthy, within 10 s.
    async fn healthy_soon(fanout: &Fanout, publisher: &RedisStore) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !fanout.probe(publisher).await {
            assert!(std::time::Instant::now() < deadline, "never healthy");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        for bad in [
            &b""[..],
            b"epoch",
            b"epoch 1",
            b"epoch x Qabc",
            b"epoch 1 Zabc",
        ] {
            assert!(parse_live(bad).is_err(), "{bad:?}");
        }
    }
}
