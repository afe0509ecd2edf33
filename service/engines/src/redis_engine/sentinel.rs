//! A connection to the primary that Redis Sentinels name, following its failovers.
//!
//! redis-rs finds the primary through the Sentinels (`SentinelClient`: it asks them for
//! the primary's address and checks with `ROLE` that the server is one) but has no
//! reconnecting connection for it, so this is one: a multiplexed connection to the
//! current primary, replaced when it breaks or when the server answers READONLY (it was
//! demoted: a failover happened while this node was still connected). The replacement
//! asks the Sentinels again, so it reaches the promoted replica. A pub/sub connection
//! is told of the loss (a `Disconnection` push, as the connection manager gives) and
//! subscribed again to its channels on the new primary.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use redis::{
    AsyncConnectionConfig, PushInfo, PushKind, RedisResult, Value, aio::MultiplexedConnection,
    sentinel::SentinelClient,
};
use tracing::{info, warn};

/// Where a connection's pub/sub messages go (RESP3 push messages).
pub type PushSender = tokio::sync::mpsc::UnboundedSender<PushInfo>;

/// A connection to the Sentinels' current primary. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct SentinelConn(Arc<Shared>);

struct Shared {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    config: AsyncConnectionConfig,
    /// The connection in use and its generation; `None` once it broke.
    current: parking_lot::Mutex<Option<(u64, MultiplexedConnection)>>,
    generation: AtomicU64,
    /// One reconnection at a time.
    reconnecting: tokio::sync::Mutex<()>,
    /// Where a pub/sub connection's messages go.
    push: Option<PushSender>,
    /// The channels to subscribe again on a new connection.
    channels: parking_lot::Mutex<HashSet<String>>,
}

/// Whether an error means the connection no longer reaches a usable primary.
fn breaks_connection(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
        || error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

impl SentinelConn {
    /// Connects to the primary `client` finds through its Sentinels; with `push`, a
    /// RESP3 connection whose pub/sub messages go there.
    pub async fn connect(
        client: SentinelClient,
        config: AsyncConnectionConfig,
        push: Option<PushSender>,
    ) -> RedisResult<Self> {
        let conn = Self(Arc::new(Shared {
            sentinels: tokio::sync::Mutex::new(client),
            config,
            current: parking_lot::Mutex::new(None),
            generation: AtomicU64::new(0),
            reconnecting: tokio::sync::Mutex::new(()),
            push,
            channels: parking_lot::Mutex::new(HashSet::new()),
        }));
        conn.connection().await?;
        Ok(conn)
    }

    /// The current connection, made anew (through the Sentinels) if it broke. (Boxed:
    /// a new connection starts a task that may call this again.)
    fn connection(&self) -> redis::RedisFuture<'_, (u64, MultiplexedConnection)> {
        Box::pin(self.connect_now())
    }

    async fn connect_now(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        if let Some(current) = self.0.current.lock().clone() {
            return Ok(current);
        }
        let _one = self.0.reconnecting.lock().await;
        if let Some(current) = self.0.current.lock().clone() {
            return Ok(current);
        }
        let generation = self.0.generation.fetch_add(1, Ordering::AcqRel) + 1;
        // During a failover the Sentinels may name no primary for a moment, or one
        // that is gone: both are a Redis out of reach for now.
        let client = self
            .0
            .sentinels
            .lock()
            .await
            .async_get_client()
            .await
            .map_err(|e| {
                redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no Redis primary reachable through the Sentinels",
                    e.to_string(),
                ))
            })?;
        let mut config = self.0.config.clone();
        let mut pushes = None;
        if self.0.push.is_some() {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            config = config.set_push_sender(tx);
            pushes = Some(rx);
        }
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let channels: Vec<String> = self.0.channels.lock().iter().cloned().collect();
        for channel in &channels {
            conn.subscribe(channel).await?;
        }
        // Only a connection made forwards its messages (and makes the next one when it
        // closes): a failed attempt leaves nothing behind.
        if let (Some(rx), Some(push)) = (pushes, &self.0.push) {
            tokio::spawn(forward(
                Arc::downgrade(&self.0),
                generation,
                rx,
                push.clone(),
            ));
        }
        if generation > 1 {
            info!(
                primary = %client.get_connection_info().addr(),
                "connected to the primary the Redis Sentinels name"
            );
        }
        *self.0.current.lock() = Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    /// Drops the connection of `generation` after `error`, if it broke it.
    fn check<T>(&self, generation: u64, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result
            && breaks_connection(error)
        {
            let mut current = self.0.current.lock();
            if current.as_ref().is_some_and(|(g, _)| *g == generation) {
                warn!(
                    "the connection to the Redis primary failed ({error}); asking the Sentinels again"
                );
                *current = None;
            }
        }
        result
    }

    pub async fn subscribe(&self, channel: &str) -> RedisResult<()> {
        self.0.channels.lock().insert(channel.to_owned());
        let (generation, mut conn) = self.connection().await?;
        let result = conn.subscribe(channel).await;
        self.check(generation, result)
    }

    pub async fn unsubscribe(&self, channel: &str) -> RedisResult<()> {
        self.0.channels.lock().remove(channel);
        let (generation, mut conn) = self.connection().await?;
        let result = conn.unsubscribe(channel).await;
        self.check(generation, result)
    }

    pub async fn command(&self, cmd: &redis::Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.connection().await?;
        let result = conn.send_packed_command(cmd).await;
        self.check(generation, result)
    }

    pub async fn pipeline(
        &self,
        pipeline: &redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.connection().await?;
        let result = conn.send_packed_commands(pipeline, offset, count).await;
        self.check(generation, result)
    }
}

/// Forwards a pub/sub connection's messages. When it closes, the subscriber is told and
/// a new connection is made (retried until one is), subscribed to the same channels.
async fn forward(
    shared: std::sync::Weak<Shared>,
    generation: u64,
    mut pushes: tokio::sync::mpsc::UnboundedReceiver<PushInfo>,
    to: PushSender,
) {
    while let Some(push) = pushes.recv().await {
        let disconnected = push.kind == PushKind::Disconnection;
        if to.send(push).is_err() {
            return;
        }
        if disconnected {
            break;
        }
    }
    // The connection is gone (closed, or dropped with its last clone): unless a newer
    // one serves already, make one.
    let mut pause = Duration::from_millis(50);
    loop {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let conn = SentinelConn(shared);
        {
            let mut current = conn.0.current.lock();
            match current.as_ref() {
                Some((g, _)) if *g == generation => *current = None,
                Some(_) => return,
                None => {}
            }
        }
        match conn.connection().await {
            Ok(_) => return,
            Err(e) => tracing::debug!("reconnecting to the Redis primary failed: {e}"),
        }
        drop(conn);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
