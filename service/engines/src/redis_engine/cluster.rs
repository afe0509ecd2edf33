//! A Redis Cluster connection that follows the cluster's own failover: what
//! [`super::connection::RedisConn`] holds for a cluster.

use std::time::Duration;

use super::sentinel::PushSender;

/// A Redis Cluster connection that follows the cluster's own failover. The client
/// library reconnects to a node that went away and re-reads the slot map on MOVED, but
/// a node whose primary was killed could stay stuck on a map naming the dead primary,
/// every command timing out, while a connection made afresh found the promoted
/// replica at once. So an error that says the cluster changed or a node is out of
/// reach (a timeout, a refused or broken connection, CLUSTERDOWN, MOVED, TRYAGAIN)
/// makes a fresh connection from the seeds, in the background, at most once per
/// [`CLUSTER_REBUILD_EVERY`]; calls go on meanwhile on the current one. The fresh one
/// takes over once the cluster settled (one made before the cluster promoted a
/// replica would map the dead primary). A connection
/// with pub/sub subscribes the fresh one to its channels before it takes over, then
/// reports a disconnection to its push receiver: what was published in between was
/// missed, and whoever follows re-reads (as after any pub/sub disconnection).
#[derive(Clone)]
pub struct ClusterConn(std::sync::Arc<ClusterShared>);

struct ClusterShared {
    client: redis::cluster::ClusterClient,
    current: std::sync::RwLock<redis::cluster_async::ClusterConnection>,
    /// Whether a fresh connection is being made, and when the last one was.
    rebuild: std::sync::Mutex<Rebuild>,
    /// Where pub/sub messages go (a connection that subscribes), and its channels.
    push: Option<PushSender>,
    /// Held while a channel is subscribed or unsubscribed, and while a fresh connection
    /// is subscribed and put in place: no channel is subscribed on the connection being
    /// replaced only.
    channels: tokio::sync::Mutex<std::collections::HashSet<String>>,
    /// Bumped when a fresh connection takes over: calls still waiting on the one it
    /// replaced give up (see [`ClusterConn::call`]).
    generation: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct Rebuild {
    running: bool,
    last: Option<std::time::Instant>,
}

/// The least time between two fresh cluster connections.
const CLUSTER_REBUILD_EVERY: Duration = Duration::from_secs(1);

impl ClusterConn {
    pub(super) async fn connect(
        client: redis::cluster::ClusterClient,
        push: Option<PushSender>,
    ) -> redis::RedisResult<Self> {
        let conn = client.get_async_connection().await?;
        Ok(Self(std::sync::Arc::new(ClusterShared {
            client,
            current: std::sync::RwLock::new(conn),
            rebuild: std::sync::Mutex::default(),
            push,
            channels: tokio::sync::Mutex::default(),
            generation: tokio::sync::watch::Sender::new(0),
        })))
    }

    /// Runs `call` on the current connection. A call still waiting when a fresh
    /// connection takes over fails at once, as a timeout would (the command may or may
    /// not have run, and callers retry either way): calls that went to a dead primary
    /// would otherwise each wait out the response timeout.
    pub(super) async fn call<T, F>(
        &self,
        call: impl FnOnce(redis::cluster_async::ClusterConnection) -> F,
    ) -> redis::RedisResult<T>
    where
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let (conn, mut replaced) = {
            let current = self
                .0
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (current.clone(), self.0.generation.subscribe())
        };
        tokio::select! {
            result = call(conn) => self.seen(result),
            // Not a sign of a changing cluster (it is the cure of one): no rebuild.
            _ = replaced.changed() => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "the cluster connection was replaced while the call waited",
            ))),
        }
    }

    pub(super) async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        let mut channels = self.0.channels.lock().await;
        self.seen(self.current().ssubscribe(channel).await)?;
        channels.insert(channel.to_owned());
        Ok(())
    }

    pub(super) async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        let mut channels = self.0.channels.lock().await;
        channels.remove(channel);
        self.seen(self.current().sunsubscribe(channel).await)
    }

    /// The connection calls go to now.
    pub(super) fn current(&self) -> redis::cluster_async::ClusterConnection {
        self.0
            .current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Looks at a call's error: one that says the cluster changed or a node is out of
    /// reach starts a fresh connection, unless one is being made or was made lately.
    fn failed(&self, error: &redis::RedisError) {
        if topology_suspect(error) {
            self.rebuild();
        }
    }

    /// Makes a fresh connection in the background, unless one is being made or was
    /// made lately.
    pub(super) fn rebuild(&self) {
        {
            let mut rebuild = self
                .0
                .rebuild
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let recent = rebuild
                .last
                .is_some_and(|last| last.elapsed() < CLUSTER_REBUILD_EVERY);
            if rebuild.running || recent {
                return;
            }
            rebuild.running = true;
        }
        let shared = self.0.clone();
        tokio::spawn(async move {
            // A connection made while the cluster is still failing over may map the dead
            // primary: one takes over once the cluster settled, or at the last try (a
            // fresh map is no worse than the current one; a shard may be down for good).
            // Each take-over costs the calls then waiting and a pub/sub resync: no more
            // than needed.
            for attempt in 1..=CLUSTER_REBUILDS {
                let mut fresh = match shared.client.get_async_connection().await {
                    Ok(fresh) => fresh,
                    Err(e) => {
                        tracing::warn!("redis cluster: reconnecting from the seeds failed: {e}");
                        tokio::time::sleep(CLUSTER_REBUILD_PAUSE).await;
                        continue;
                    }
                };
                let settled = cluster_settled(&mut fresh).await;
                if !settled && attempt < CLUSTER_REBUILDS {
                    tokio::time::sleep(CLUSTER_REBUILD_PAUSE).await;
                    continue;
                }
                // The map is read afresh now that the cluster settled.
                if settled && let Ok(after) = shared.client.get_async_connection().await {
                    fresh = after;
                }
                if shared.take_over(fresh).await && settled {
                    break;
                }
                tokio::time::sleep(CLUSTER_REBUILD_PAUSE).await;
            }
            let mut rebuild = shared
                .rebuild
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            rebuild.running = false;
            rebuild.last = Some(std::time::Instant::now());
        });
    }

    /// `result`, after [`Self::failed`] looked at its error.
    pub(super) fn seen<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let Err(e) = &result {
            self.failed(e);
        }
        result
    }
}

impl ClusterShared {
    /// Puts `fresh` in place of the current connection, once it is subscribed to every
    /// channel the current one has (one at a time: one SSUBSCRIBE names one slot), and
    /// reports a disconnection to the push receiver; false when it could not take
    /// every channel (it does not take over then).
    async fn take_over(&self, mut fresh: redis::cluster_async::ClusterConnection) -> bool {
        let channels = self.channels.lock().await;
        for channel in channels.iter() {
            if let Err(e) = fresh.ssubscribe(channel).await {
                tracing::warn!("redis cluster: resubscribing failed: {e}");
                return false;
            }
        }
        {
            let mut current = self
                .current
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *current = fresh;
            self.generation.send_modify(|n| *n += 1);
        }
        drop(channels);
        if let Some(push) = &self.push {
            let _ = push.send(redis::PushInfo {
                kind: redis::PushKind::Disconnection,
                data: vec![redis::Value::SimpleString(RECONNECTED.into())],
            });
        }
        tracing::warn!("redis cluster: reconnected from the seeds after an error");
        true
    }
}

/// The data of the disconnection a cluster connection reports once a fresh connection
/// took over (`RedisConn::pubsub_lost` ignores it: it is the reconnection).
pub(super) const RECONNECTED: &str = "askgate: reconnected from the seeds";

/// Fresh connections one error may make, a [`CLUSTER_REBUILD_PAUSE`] apart, until
/// the cluster settled (15 s at least: more than a failover takes with a
/// `cluster-node-timeout` of a few seconds); a later error starts over.
const CLUSTER_REBUILDS: usize = 60;

/// The pause between two fresh connections of one rebuild.
const CLUSTER_REBUILD_PAUSE: Duration = Duration::from_millis(250);

/// Whether the cluster, as a node of it reached through `conn` sees it, serves every
/// slot it serves from a primary that is up: none failing (`fail`, `fail?`) or cut
/// from that node (its link `disconnected`). Right after a primary dies it is still
/// listed with its slots until a replica takes them over: a connection made before
/// that would map the dead primary.
async fn cluster_settled(conn: &mut redis::cluster_async::ClusterConnection) -> bool {
    let command = redis::cmd("CLUSTER").arg("NODES").to_owned();
    let nodes = command.query_async::<String>(conn);
    match tokio::time::timeout(Duration::from_secs(1), nodes).await {
        Ok(Ok(nodes)) => nodes.lines().all(primary_serves),
        _ => false,
    }
}

/// For one line of `CLUSTER NODES` (`<id> <addr> <flags> <primary> <ping> <pong>
/// <epoch> <link> <slot>...`): false for a primary holding slots that fails or is
/// out of the reporting node's reach.
fn primary_serves(line: &str) -> bool {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (Some(flags), Some(link)) = (fields.get(2), fields.get(7)) else {
        return true;
    };
    let flags: Vec<&str> = flags.split(',').collect();
    let holds_slots = fields.len() > 8;
    if !flags.contains(&"master") || !holds_slots {
        return true;
    }
    let failing = flags.iter().any(|f| f.starts_with("fail"));
    let reached = flags.contains(&"myself") || *link == "connected";
    !failing && reached
}

/// Whether `error` may mean the cluster's shape changed under the connection.
fn topology_suspect(error: &redis::RedisError) -> bool {
    use redis::ErrorKind;
    error.is_timeout()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
        || matches!(
            error.kind(),
            ErrorKind::Io | ErrorKind::ClusterConnectionNotFound
        )
        || matches!(
            error.kind(),
            ErrorKind::Server(
                redis::ServerErrorKind::ClusterDown
                    | redis::ServerErrorKind::Moved
                    | redis::ServerErrorKind::TryAgain
                    | redis::ServerErrorKind::MasterDown
            )
        )
}
