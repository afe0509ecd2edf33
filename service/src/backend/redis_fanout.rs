//! Cross-node fan-out: one RESP3 connection per node receives the Redis pub/sub
//! messages of every session this node follows (for its subscribers and its waiting
//! asks) and hands them to local broadcast channels. The connection is a redis-rs
//! `ConnectionManager` with automatic resubscription, so after a reconnect the node is
//! subscribed again; what it missed meanwhile comes from the session history, which is
//! why every live event carries its epoch and sequence number.
//!
//! A node subscribes to a session's channel before it reads the session's state, so no
//! event can fall between the read and the live stream; consumers drop live events
//! whose sequence number they already have.

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
};

use parking_lot::Mutex;
use redis::{
    IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, Value,
    aio::{ConnectionManager, ConnectionManagerConfig},
};
use tokio::sync::{broadcast, mpsc};
use tracing::{debug, warn};

use super::redis::{StoredEvent, parse_event};
use crate::domain::AskError;

/// Live events a local follower may fall behind before it must resync from history.
const FOLLOWER_BUFFER: usize = 1024;

/// One live event of a session, as published by whichever node made it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    pub epoch: String,
    pub seq: u64,
    pub event: StoredEvent,
}

/// Parses a published message: `<epoch> <seq> <entry>`.
pub fn parse_live(payload: &[u8]) -> Result<LiveEvent, AskError> {
    let bad = || AskError::Internal("malformed pub/sub message".into());
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

type Channels = Arc<Mutex<HashMap<String, broadcast::Sender<Arc<LiveEvent>>>>>;

/// This node's view of the sessions it follows.
pub struct Fanout {
    conn: ConnectionManager,
    channels: Channels,
    dispatcher: tokio::task::JoinHandle<()>,
}

impl Drop for Fanout {
    fn drop(&mut self) {
        self.dispatcher.abort();
    }
}

impl Fanout {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let info = url.into_connection_info()?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(push_tx)
            .set_automatic_resubscription();
        let conn = client.get_connection_manager_with_config(config).await?;
        let channels: Channels = Arc::default();
        let dispatcher = tokio::spawn(dispatch(push_rx, Arc::downgrade(&channels)));
        Ok(Self {
            conn,
            channels,
            dispatcher,
        })
    }

    /// Live events of `channel` from now on. The subscription is confirmed by Redis
    /// before this returns, so reading the session's state afterwards misses nothing.
    pub async fn follow(
        &self,
        channel: &str,
    ) -> Result<broadcast::Receiver<Arc<LiveEvent>>, AskError> {
        let (receiver, new) = {
            let mut channels = self.channels.lock();
            match channels.get(channel) {
                Some(sender) => (sender.subscribe(), false),
                None => {
                    let (sender, receiver) = broadcast::channel(FOLLOWER_BUFFER);
                    channels.insert(channel.to_owned(), sender);
                    (receiver, true)
                }
            }
        };
        if new {
            self.conn
                .clone()
                .subscribe(channel)
                .await
                .map_err(|e| AskError::Internal(format!("redis subscribe: {e}")))?;
            debug!(channel, "following a session");
        }
        Ok(receiver)
    }

    /// Stops following `channel` once nobody on this node listens to it.
    pub async fn release(&self, channel: &str) {
        let idle = {
            let mut channels = self.channels.lock();
            match channels.get(channel) {
                Some(sender) if sender.receiver_count() == 0 => {
                    channels.remove(channel);
                    true
                }
                _ => false,
            }
        };
        if idle && let Err(e) = self.conn.clone().unsubscribe(channel).await {
            warn!(channel, "redis unsubscribe failed: {e}");
        }
    }
}

async fn dispatch(
    mut push_rx: mpsc::UnboundedReceiver<PushInfo>,
    channels: Weak<Mutex<HashMap<String, broadcast::Sender<Arc<LiveEvent>>>>>,
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
                let event = match parse_live(payload) {
                    Ok(event) => Arc::new(event),
                    Err(e) => {
                        warn!(%channel, "dropping a pub/sub message: {e}");
                        continue;
                    }
                };
                if let Some(sender) = channels.lock().get(channel.as_ref()) {
                    let _ = sender.send(event);
                }
            }
            PushKind::Disconnection => {
                warn!("redis pub/sub connection lost; it resubscribes on reconnect")
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Requested, Resolution, Resolved};

    use super::*;
    use crate::{
        backend::redis::{RedisConfig, RedisStore, SessionKeys},
        domain::SessionKey,
        testing::RedisServer,
    };

    #[tokio::test]
    async fn events_written_by_one_node_reach_another_nodes_followers_in_order() {
        let redis = RedisServer::start().await;
        let writer = RedisStore::connect(&redis.url, RedisConfig::default())
            .await
            .expect("writer node");
        let reader = Fanout::connect(&redis.url).await.expect("reader node");
        let key = SessionKey::new("acme", "s");
        let channel = SessionKeys::new(&key).channel();
        let mut live = reader.follow(&channel).await.expect("follow");

        let requested = Requested {
            rpc_id: "r1".into(),
            session_id: "s".into(),
            ..Default::default()
        };
        writer
            .register(&key, &requested, "")
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
