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
        let conn = super::cluster::ClusterConn::connect(builder.build()?, push).await?;
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
    Cluster(super::cluster::ClusterConn),
    Sentinel(super::sentinel::SentinelConn),
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
            [redis::Value::SimpleString(what)] if what == super::cluster::RECONNECTED
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
