//! Connections to Redis: where it is (one server, a primary named by Sentinels, or a
//! cluster; TLS), and one connection type all kinds share. Redis URLs are shown only
//! redacted.
//!
//! Why redis-rs: it is the actively maintained Redis client for Rust (regular
//! releases), async on tokio, with a `ConnectionManager` that reconnects by itself,
//! Redis Cluster support, RESP3 push messages and sharded pub/sub (SSUBSCRIBE), which the
//! fan-out needs.

use std::time::Duration;

use redis::aio::ConnectionManager;

/// Where Redis is: its URL (`redis://`, or `rediss://` for TLS), or with `cluster` the
/// comma-separated URLs of some Redis Cluster nodes (the client discovers the rest and
/// follows resharding and failover), or with `sentinel_master` the comma-separated URLs
/// of Redis Sentinels and the name of the primary they watch (the connection follows
/// their failovers; the URLs' credentials, database and TLS serve for the primary too),
/// and for TLS a CA certificate (PEM) to trust besides the system's roots.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisTarget {
    pub url: String,
    pub cluster: bool,
    pub sentinel_master: Option<String>,
    pub ca_pem: Option<Vec<u8>>,
    /// The longest wait for one reply (longer than any `WAIT` the store sends).
    pub response_timeout: Duration,
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTarget")
            .field("url", &redacted_url(&self.url))
            .field("cluster", &self.cluster)
            .field("sentinel_master", &self.sentinel_master)
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .finish()
    }
}

/// A Redis URL (or a comma-separated list of them) as logs and errors may show it:
/// any password replaced by `***` (`redis://user:***@host:6379/0`). A user info
/// without a `:` is hidden whole, in case it is a password written without its colon.
pub fn redacted_url(url: &str) -> String {
    url.split(',')
        .map(|one| {
            let Some((scheme, rest)) = one.split_once("://") else {
                return one.to_owned();
            };
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let Some((userinfo, host)) = authority.rsplit_once('@') else {
                return one.to_owned();
            };
            let userinfo = match userinfo.split_once(':') {
                Some((user, _password)) => format!("{user}:***"),
                None => "***".to_owned(),
            };
            format!("{scheme}://{userinfo}@{host}{path}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl From<&str> for RedisTarget {
    fn from(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            cluster: false,
            sentinel_master: None,
            ca_pem: None,
            response_timeout: RESPONSE_TIMEOUT,
        }
    }
}

impl From<&String> for RedisTarget {
    fn from(url: &String) -> Self {
        url.as_str().into()
    }
}

pub use super::sentinel::PushSender;

impl RedisTarget {
    fn tls(&self) -> bool {
        self.url
            .split(',')
            .any(|u| u.trim().starts_with("rediss://"))
    }

    fn certificates(&self) -> redis::TlsCertificates {
        // rustls needs a process-wide crypto provider: ring, as for the gRPC side. An
        // error means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        redis::TlsCertificates {
            client_tls: None,
            root_cert: self.ca_pem.clone(),
        }
    }

    /// A client for one server, speaking RESP3 when `resp3` (pub/sub push messages).
    pub fn client(&self, resp3: bool) -> redis::RedisResult<redis::Client> {
        use redis::IntoConnectionInfo;
        let mut info = self.url.as_str().into_connection_info()?;
        if resp3 {
            let settings = info
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3);
            info = info.set_redis_settings(settings);
        }
        match self.tls() {
            true => redis::Client::build_with_tls(info, self.certificates()),
            false => redis::Client::open(info),
        }
    }

    /// A connection for commands and scripts; with `push`, a RESP3 connection whose
    /// pub/sub messages go there and whose subscriptions survive reconnects.
    pub async fn connect(&self, push: Option<PushSender>) -> redis::RedisResult<RedisConn> {
        if let Some(master) = &self.sentinel_master {
            return self.connect_sentinel(master, push).await;
        }
        if !self.cluster {
            let mut config = manager_config().set_response_timeout(Some(self.response_timeout));
            if let Some(push) = push.clone() {
                config = config.set_push_sender(push).set_automatic_resubscription();
            }
            let client = self.client(push.is_some())?;
            return Ok(RedisConn::Single(
                client.get_connection_manager_with_config(config).await?,
            ));
        }
        let seeds: Vec<&str> = self.url.split(',').map(str::trim).collect();
        let mut builder = redis::cluster::ClusterClientBuilder::new(seeds)
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(self.response_timeout)
            .retries(3)
            .min_retry_wait(50)
            .max_retry_wait(1000)
            // A node that refuses a few reconnections in a row is dropped, and the
            // requests for its slots rebuild the slot map from the others: that is how
            // a killed primary's promoted replica is found. Without a limit the client
            // would try the dead address for ever (its slots never re-read).
            .max_connection_attempts(CLUSTER_NODE_ATTEMPTS);
        if self.tls() {
            builder = builder.certs(self.certificates());
        }
        if let Some(push) = push.clone() {
            builder = builder
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(push);
        }
        let conn = ClusterConn::connect(builder.build()?, push).await?;
        Ok(RedisConn::Cluster(conn))
    }

    /// A connection to the primary the Sentinels of `url` name `master`.
    async fn connect_sentinel(
        &self,
        master: &str,
        push: Option<PushSender>,
    ) -> redis::RedisResult<RedisConn> {
        use redis::{IntoConnectionInfo, ProtocolVersion, TlsMode, sentinel::*};
        let infos = self
            .url
            .split(',')
            .map(|url| url.trim().into_connection_info())
            .collect::<redis::RedisResult<Vec<_>>>()?;
        let Some(first) = infos.first().map(|i| i.redis_settings().clone()) else {
            return Err((redis::ErrorKind::InvalidClientConfig, "no Sentinel URL").into());
        };
        let addrs = infos.iter().map(|i| i.addr().clone());
        let mut builder = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)?
            .set_client_to_redis_db(first.db());
        if let Some(user) = first.username() {
            builder = builder
                .set_client_to_redis_username(user)
                .set_client_to_sentinel_username(user);
        }
        if let Some(password) = first.password() {
            builder = builder
                .set_client_to_redis_password(password)
                .set_client_to_sentinel_password(password);
        }
        if push.is_some() {
            builder = builder.set_client_to_redis_protocol(ProtocolVersion::RESP3);
        }
        if self.tls() {
            builder = builder
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure)
                .set_client_to_redis_certificates(self.certificates())
                .set_client_to_sentinel_certificates(self.certificates());
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(self.response_timeout));
        let conn = super::sentinel::SentinelConn::connect(builder.build()?, config, push).await?;
        Ok(RedisConn::Sentinel(conn))
    }
}

/// Reconnections to a cluster node (50 ms apart, doubling) before it is dropped and the
/// slot map read again from the other nodes.
const CLUSTER_NODE_ATTEMPTS: std::num::NonZeroUsize = std::num::NonZeroUsize::new(3).unwrap();

/// A connection to one Redis server (reconnecting by itself) or to a Redis Cluster
/// (routing each command to the shard of its key's slot). Cheap to clone; clones share
/// the connection.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(ClusterConn),
    Sentinel(super::sentinel::SentinelConn),
}

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
    async fn connect(
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
    async fn call<T, F>(
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

    async fn subscribe(&self, channel: &str) -> redis::RedisResult<()> {
        let mut channels = self.0.channels.lock().await;
        self.seen(self.current().ssubscribe(channel).await)?;
        channels.insert(channel.to_owned());
        Ok(())
    }

    async fn unsubscribe(&self, channel: &str) -> redis::RedisResult<()> {
        let mut channels = self.0.channels.lock().await;
        channels.remove(channel);
        self.seen(self.current().sunsubscribe(channel).await)
    }

    /// The connection calls go to now.
    fn current(&self) -> redis::cluster_async::ClusterConnection {
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
    fn rebuild(&self) {
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
    fn seen<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
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
/// took over ([`RedisConn::pubsub_lost`] ignores it: it is the reconnection).
const RECONNECTED: &str = "askgate: reconnected from the seeds";

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

impl RedisConn {
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// The publish command for a session's channel: sharded pub/sub on a cluster (the
    /// message goes to the channel's shard only, not to every node of the cluster).
    pub fn publish_command(&self) -> &'static str {
        match self {
            Self::Single(_) | Self::Sentinel(_) => "PUBLISH",
            Self::Cluster(_) => "SPUBLISH",
        }
    }

    pub async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(conn) => conn.subscribe(channel).await,
            Self::Cluster(conn) => conn.subscribe(channel).await,
            Self::Sentinel(conn) => conn.subscribe(channel).await,
        }
    }

    pub async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        match self {
            Self::Single(conn) => conn.unsubscribe(channel).await,
            Self::Cluster(conn) => conn.unsubscribe(channel).await,
            Self::Sentinel(conn) => conn.unsubscribe(channel).await,
        }
    }

    /// The pub/sub connection reported `info`, a disconnection: on a cluster, one of
    /// its node connections was lost (a shard's primary may have died), so a fresh
    /// connection is made unless the report is of one that just took over.
    pub fn pubsub_lost(&self, info: &redis::PushInfo) {
        let reconnected = matches!(
            info.data.as_slice(),
            [redis::Value::SimpleString(what)] if what == RECONNECTED
        );
        if let Self::Cluster(conn) = self
            && !reconnected
        {
            conn.rebuild();
        }
    }

    /// Runs commands whose keys may live in different slots: one pipeline on a single
    /// server; on a cluster, each command on its own (concurrently), since a pipeline
    /// must stay within one slot there. Replies are ignored; the first error is returned.
    pub async fn run_all(&self, commands: Vec<redis::Cmd>) -> redis::RedisResult<()> {
        match self {
            Self::Single(_) | Self::Sentinel(_) => {
                let mut pipe = redis::pipe();
                for command in commands {
                    pipe.add_command(command).ignore();
                }
                if pipe.is_empty() {
                    return Ok(());
                }
                pipe.query_async::<()>(&mut self.clone()).await
            }
            Self::Cluster(conn) => {
                let mut running = tokio::task::JoinSet::new();
                for command in commands {
                    let conn = conn.clone();
                    running.spawn(async move {
                        conn.seen(command.exec_async(&mut conn.current()).await)
                    });
                }
                let mut outcome = Ok(());
                while let Some(done) = running.join_next().await {
                    if let Ok(Err(e)) = done
                        && outcome.is_ok()
                    {
                        outcome = Err(e);
                    }
                }
                outcome
            }
        }
    }
}

impl redis::aio::ConnectionLike for RedisConn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        let call = match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => Box::pin(
                conn.call(move |mut current| async move { current.req_packed_command(cmd).await }),
            ),
            Self::Sentinel(conn) => Box::pin(conn.command(cmd)),
        };
        traced(call, || match cmd.args_iter().next() {
            Some(redis::Arg::Simple(name)) => String::from_utf8_lossy(name).into_owned(),
            _ => String::new(),
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        let call = match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => Box::pin(conn.call(move |mut current| async move {
                current.req_packed_commands(pipeline, offset, count).await
            })),
            Self::Sentinel(conn) => Box::pin(conn.pipeline(pipeline, offset, count)),
        };
        traced(call, || "PIPELINE".to_owned())
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.current().get_db(),
            Self::Sentinel(_) => 0,
        }
    }
}

/// `call` under a span of its own when backend calls are traced (`--otlp-backend-calls`):
/// as it is, at no cost, otherwise. `operation`: the command's name.
fn traced<'a, T: 'a>(
    call: redis::RedisFuture<'a, T>,
    operation: impl FnOnce() -> String,
) -> redis::RedisFuture<'a, T> {
    use tracing::Instrument;
    let span = tracing::debug_span!(
        target: askgate_core::TRACE_TARGET,
        "askgate.redis",
        otel.kind = "client",
        db.system.name = "redis",
        db.operation.name = tracing::field::Empty,
    );
    if span.is_disabled() {
        return call;
    }
    span.record("db.operation.name", operation());
    Box::pin(call.instrument(span))
}

/// How every askgate connection to Redis reconnects: quickly, and never backing off
/// past a second, so a node recovers within moments of Redis coming back. A reply may
/// take up to 5 s (redis-rs's default, 500 ms, turns a busy moment into failed calls).
pub fn manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_secs(1))
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
}

/// The longest wait for one reply from Redis, unless a longer `WAIT` needs more.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_passwords() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
            (
                "rediss://app:hunter2@cache:6380",
                "rediss://app:***@cache:6380",
            ),
            ("redis://hunter2@cache", "redis://***@cache"),
            (
                "redis://:a@n1:7000,redis://:b@n2:7001",
                "redis://:***@n1:7000,redis://:***@n2:7001",
            ),
            ("redis://:p@ss@host/1?x=y", "redis://:***@host/1?x=y"),
        ] {
            assert_eq!(redacted_url(url), shown, "{url}");
        }
        let target = RedisTarget::from("redis://:hunter2@cache:6379");
        assert!(!format!("{target:?}").contains("hunter2"));
    }
}
