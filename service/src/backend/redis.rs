//! Shared state in Redis, for several askgate nodes behind one load balancer.
//!
//! This module is the storage layer: the Redis key layout and the two server-side
//! scripts that make askgate's semantics hold across nodes: registration (store, append
//! the event, publish it) and claim (check it is pending, remove it, record the outcome,
//! append the event, publish it), each one atomic script, so the first claim wins
//! whatever node it arrives on. [`super::redis_fanout`] carries the published events to
//! the other nodes, and [`super::redis_backend`] builds the `Backend` on both.
//!
//! Why redis-rs: it is the actively maintained Redis client for Rust (regular
//! releases), async on tokio, with a `ConnectionManager` that reconnects by itself,
//! Redis Cluster support, RESP3 push messages and sharded pub/sub (SSUBSCRIBE), which the
//! fan-out needs. Scripts are sent by SHA with EVALSHA and reloaded on NOSCRIPT.
//!
//! Key layout: every key of a session carries the hash tag `{<tenant>/<session>}`, so a
//! session's keys live in one Redis Cluster slot and its scripts run on one shard. The
//! tenant is written with `{`, `}`, `/` and `%` percent-encoded and the session with
//! `{`, `}` and `%`, so no two (tenant, session) pairs ever share a tag, whatever
//! characters they hold (see `escape`):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `ag:{t/s}:asks` | hash | rpc_id → encoded `Requested` of each pending ask |
//! | `ag:{t/s}:order` | zset | rpc_id → sequence number of its `requested` (oldest first) |
//! | `ag:{t/s}:rids` | hash | rpc_id → request_id, for asks that have one |
//! | `ag:{t/s}:events` | list | the last N events, `Q`/`R` + encoded `Requested`/`Resolved` |
//! | `ag:{t/s}:head` | string | sequence number of the last event |
//! | `ag:{t/s}:epoch` | string | the history's epoch: a new one if the keys were lost |
//! | `ag:{t/s}:settled` | hash | rpc_id → `RESOLUTION resolved_by`, for NOT_PENDING |
//! | `ag:{t/s}:req:<request_id>` | hash | `rpc`, `state` (`P` pending, `D` done), `resolved` |
//! | `ag:{t/s}:attended`, `ag:{t/s}:w:<rpc>`, `ag:{t/s}:exclusive`, `ag:{t/s}:subs` | | leases of [`super::redis_backend`] |
//! | `ag:tenant:{t}:live`, `:sessions`, `:pending`, `:attended`, `:agent:<id>` | | the tenant's channel, its sessions with pending asks (a set; on a cluster a sorted set, see TENANT_REGISTERED), their count, presence, agents |
//! | `ag:waits` | zset | every waiting ask of every node, for the dead-node sweep |
//!
//! The event of sequence number `n` is the list element `n - (head - len + 1)`: the
//! scripts append and trim in the same step as they bump `head`, so the mapping holds.
//!
//! On one server the scripts also update the tenant's keys and publish to the tenant's
//! channel, atomically. On a Redis Cluster (`RedisTarget::cluster`) those live in the
//! tenant's slot, so the scripts keep to the session's slot (publishing with SPUBLISH,
//! sharded pub/sub) and the node runs the tenant's part right after (TENANT_REGISTERED,
//! TENANT_CLAIMED).

use std::time::Duration;

use askgate_proto::v1::{Requested, Resolved};
use prost::Message as _;
use redis::{AsyncCommands, Script, aio::ConnectionManager};

use super::Holder;
use crate::domain::{AskError, SessionKey, Settled};

/// Where Redis is: its URL (`redis://`, or `rediss://` for TLS), or with `cluster` the
/// comma-separated URLs of some Redis Cluster nodes (the client discovers the rest and
/// follows resharding and failover), and for TLS a CA certificate (PEM) to trust besides
/// the system's roots.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisTarget {
    pub url: String,
    pub cluster: bool,
    pub ca_pem: Option<Vec<u8>>,
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTarget")
            .field("url", &redacted_url(&self.url))
            .field("cluster", &self.cluster)
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
            ca_pem: None,
        }
    }
}

impl From<&String> for RedisTarget {
    fn from(url: &String) -> Self {
        url.as_str().into()
    }
}

/// Where a connection's pub/sub messages go (RESP3 push messages).
pub type PushSender = tokio::sync::mpsc::UnboundedSender<redis::PushInfo>;

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
        if !self.cluster {
            let mut config = manager_config();
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
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(3)
            .min_retry_wait(50)
            .max_retry_wait(1000);
        if self.tls() {
            builder = builder.certs(self.certificates());
        }
        if let Some(push) = push {
            builder = builder
                .use_protocol(redis::ProtocolVersion::RESP3)
                .push_sender(push);
        }
        Ok(RedisConn::Cluster(
            builder.build()?.get_async_connection().await?,
        ))
    }
}

/// A connection to one Redis server (reconnecting by itself) or to a Redis Cluster
/// (routing each command to the shard of its key's slot). Cheap to clone; clones share
/// the connection.
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl RedisConn {
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// The publish command for a session's channel: sharded pub/sub on a cluster (the
    /// message goes to the channel's shard only, not to every node of the cluster).
    pub fn publish_command(&self) -> &'static str {
        match self {
            Self::Single(_) => "PUBLISH",
            Self::Cluster(_) => "SPUBLISH",
        }
    }

    pub async fn subscribe(&mut self, channels: impl redis::ToRedisArgs) -> redis::RedisResult<()> {
        match self {
            Self::Single(conn) => conn.subscribe(channels).await,
            Self::Cluster(conn) => conn.ssubscribe(channels).await,
        }
    }

    pub async fn unsubscribe(
        &mut self,
        channels: impl redis::ToRedisArgs,
    ) -> redis::RedisResult<()> {
        match self {
            Self::Single(conn) => conn.unsubscribe(channels).await,
            Self::Cluster(conn) => conn.sunsubscribe(channels).await,
        }
    }

    /// Runs commands whose keys may live in different slots: one pipeline on a single
    /// server; on a cluster, each command on its own (concurrently), since a pipeline
    /// must stay within one slot there. Replies are ignored; the first error is returned.
    pub async fn run_all(&self, commands: Vec<redis::Cmd>) -> redis::RedisResult<()> {
        match self {
            Self::Single(conn) => {
                let mut pipe = redis::pipe();
                for command in commands {
                    pipe.add_command(command).ignore();
                }
                if pipe.is_empty() {
                    return Ok(());
                }
                pipe.query_async::<()>(&mut conn.clone()).await
            }
            Self::Cluster(conn) => {
                let mut running = tokio::task::JoinSet::new();
                for command in commands {
                    let mut conn = conn.clone();
                    running.spawn(async move { command.exec_async(&mut conn).await });
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
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
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

/// The longest wait for one reply from Redis.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sizes and windows of the Redis state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// Events each session keeps for cursor resume.
    pub history_len: usize,
    /// Pending asks one session may hold.
    pub max_pending_per_session: usize,
    /// Pending asks all sessions of one tenant may hold together.
    pub max_pending_per_tenant: usize,
    /// Sessions one tenant may hold state in (a kept history, or a subscriber).
    pub max_sessions_per_tenant: usize,
    /// Agents one tenant may have attached at once, over every node.
    pub max_agents_per_tenant: usize,
    /// How long a request_id's outcome, and NOT_PENDING's memory of a resolution, stay.
    pub retention: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            history_len: 1000,
            max_pending_per_session: 1024,
            max_pending_per_tenant: 10_000,
            max_sessions_per_tenant: 10_000,
            max_agents_per_tenant: 10_000,
            retention: Duration::from_secs(600),
        }
    }
}

/// The keys of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKeys {
    tag: String,
}

impl SessionKeys {
    pub fn new(key: &SessionKey) -> Self {
        Self {
            tag: format!(
                "ag:{{{}/{}}}",
                escape(&key.tenant, TENANT_RESERVED),
                escape(&key.session_id, SESSION_RESERVED)
            ),
        }
    }

    pub fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.tag)
    }

    /// The pub/sub channel of the session's events (same hash slot as its keys).
    pub fn channel(&self) -> String {
        self.key("events:live")
    }

    fn request(&self, request_id: &str) -> String {
        self.key(&format!("req:{request_id}"))
    }

    /// Which nodes' calls wait on the ask, each with the ask's reattach grace (ms);
    /// deleted by the claim that resolves it.
    pub fn wait_mark(&self, rpc_id: &str) -> String {
        self.key(&format!("w:{rpc_id}"))
    }
}

/// What a tenant name may not hold inside a key: the hash tag's braces, the `/` that
/// ends it within a session's tag, and the escape character itself.
const TENANT_RESERVED: &[char] = &['{', '}', '/', '%'];
/// What a session id may not hold inside a key: the braces that end its hash tag, and
/// the escape character itself.
const SESSION_RESERVED: &[char] = &['{', '}', '%'];
/// What an agent id may not hold inside its key: the `:` that separates the parts
/// after it, and the escape character itself.
const AGENT_RESERVED: &[char] = &[':', '%'];

/// Percent-encodes every character of `reserved` (which must hold `%`). Injective:
/// `%` itself is encoded, so distinct texts give distinct results, and none of them
/// holds a reserved character, so a reserved character after it delimits it.
///
/// This is what makes the (tenant, session) → key mapping injective whatever either
/// holds: the tenant ends at the first `/` of the tag, the session at the first `}`.
/// Names the validation accepts (`[A-Za-z0-9._-]` tenants, `[A-Za-z0-9._:@/-]`
/// sessions) pass through unchanged.
fn escape(text: &str, reserved: &[char]) -> String {
    debug_assert!(reserved.contains(&'%'));
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if reserved.contains(&c) {
            escaped.push_str(&format!("%{:02X}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    escaped
}

/// The keys of one tenant: its `all_sessions` channel and the index of its sessions
/// with pending asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantKeys {
    tag: String,
}

impl TenantKeys {
    pub fn new(tenant: &str) -> Self {
        Self {
            tag: format!("ag:tenant:{{{}}}", escape(tenant, TENANT_RESERVED)),
        }
    }

    /// Every event of every session of the tenant.
    pub fn channel(&self) -> String {
        format!("{}:live", self.tag)
    }

    /// Sessions that (may) have pending asks, for an `all_sessions` snapshot.
    pub fn sessions(&self) -> String {
        format!("{}:sessions", self.tag)
    }

    /// How many asks of the tenant are pending, for its quota.
    pub fn pending(&self) -> String {
        format!("{}:pending", self.tag)
    }

    /// Set (with a short expiry) while some node has an `all_sessions` subscriber.
    pub fn attended(&self) -> String {
        format!("{}:attended", self.tag)
    }

    /// The tenant's sessions that hold state, scored by when that ends (their history
    /// expires, or their subscribers' lease), for the per-tenant session cap.
    pub fn held_sessions(&self) -> String {
        format!("{}:held", self.tag)
    }

    /// The tenant's `all_sessions` subscriber slots, over every node.
    pub fn all_sessions_subscribers(&self) -> String {
        format!("{}:subs", self.tag)
    }

    /// The tenant's attached agents, scored by when their lease ends.
    pub fn agents(&self) -> String {
        format!("{}:agents", self.tag)
    }

    /// An agent's lease (its incarnation, parent and holder).
    pub fn agent(&self, agent_id: &str) -> String {
        format!("{}:agent:{}", self.tag, escape(agent_id, AGENT_RESERVED))
    }

    /// The pending asks of one incarnation of an agent.
    pub fn agent_asks(&self, agent_id: &str, incarnation: &str) -> String {
        format!("{}:asks:{incarnation}", self.agent(agent_id))
    }
}

/// What registering an ask did.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// A new pending ask, whose `requested` event has this sequence number.
    New { seq: u64, epoch: String },
    /// The request_id names an ask that is still pending: join it.
    Joined { rpc_id: String },
    /// The request_id names an ask that was resolved: here is how.
    Recorded { rpc_id: String, resolved: Resolved },
}

/// A session's pending asks and the point of its history they reflect.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The history's epoch (empty before the session's first event).
    pub epoch: String,
    /// The sequence number of the last event the snapshot includes.
    pub head: u64,
    /// The pending asks with the sequence numbers of their `requested`, oldest first.
    pub pending: Vec<(u64, Requested)>,
}

/// One event of a session's history.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredEvent {
    Requested(Requested),
    Resolved(Resolved),
}

const REGISTER: &str = r#"
-- KEYS: asks order rids events head epoch request
--       [tenant_sessions tenant_pending tenant_held]
-- ARGV: rpc_id requested request_id history_len max_pending new_epoch channel
--       tenant_channel session_id idle_ttl_s max_tenant_pending publish_command
--       now_ms max_tenant_sessions
-- Without the tenant's keys (on a Redis Cluster, where they live in another slot) the
-- node checks the tenant's caps before (ADMIT_ASK) and does the tenant's part after
-- the script (TENANT_REGISTERED).
local tenant = KEYS[8] ~= nil
if ARGV[3] ~= '' then
  local state = redis.call('HGET', KEYS[7], 'state')
  if state == 'P' then
    return {'joined', redis.call('HGET', KEYS[7], 'rpc')}
  elseif state == 'D' then
    return {'recorded', redis.call('HGET', KEYS[7], 'rpc'), redis.call('HGET', KEYS[7], 'resolved')}
  end
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then
  return {'full'}
end
if tenant then
  redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', ARGV[13])
  if not redis.call('ZSCORE', KEYS[10], ARGV[9])
      and redis.call('ZCARD', KEYS[10]) >= tonumber(ARGV[14]) then
    return {'sessions_full'}
  end
  if tonumber(redis.call('GET', KEYS[9]) or '0') >= tonumber(ARGV[11]) then
    return {'tenant_full'}
  end
  redis.call('INCR', KEYS[9])
  -- The session holds state as long as its history: the idle TTL from now.
  redis.call('ZADD', KEYS[10], 'GT', tonumber(ARGV[13]) + 1000 * tonumber(ARGV[10]), ARGV[9])
  redis.call('PEXPIRE', KEYS[10], 1000 * tonumber(ARGV[10]))
end
local epoch = redis.call('GET', KEYS[6])
if not epoch then
  epoch = ARGV[6]
  redis.call('SET', KEYS[6], epoch)
end
local seq = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
local event = 'Q' .. ARGV[2]
redis.call('RPUSH', KEYS[4], event)
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
  redis.call('HSET', KEYS[7], 'state', 'P', 'rpc', ARGV[1])
  redis.call('PERSIST', KEYS[7])
end
if tenant then
  redis.call('SADD', KEYS[8], ARGV[9])
end
-- A session's history lives as long as it is used, then expires.
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6]}) do
  redis.call('EXPIRE', key, ARGV[10])
end
local message = epoch .. ' ' .. seq .. ' ' .. event
redis.call(ARGV[12], ARGV[7], message)
if tenant then
  redis.call('PUBLISH', ARGV[8], message)
end
local now = redis.call('TIME')
return {'new', seq, epoch, now[1] .. string.format('%06d', now[2])}
"#;

const CLAIM: &str = r#"
-- KEYS: asks order rids events head epoch settled
--       [tenant_sessions tenant_pending tenant_held]
-- ARGV: rpc_id resolved settled_text history_len retention_s channel request_key_prefix
--       tenant_channel session_id idle_ttl_s publish_command wait_mark now_ms
-- Without the tenant's keys, the node does the tenant's part after (TENANT_CLAIMED).
-- The wait mark shares the session's hash tag, so it lives in this slot.
local tenant = KEYS[8] ~= nil
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return {'gone', redis.call('HGET', KEYS[7], ARGV[1]) or ''}
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', ARGV[12])
redis.call('ZREM', KEYS[2], ARGV[1])
-- The tenant's count goes when it reaches zero, like its set of sessions.
if tenant and redis.call('DECR', KEYS[9]) <= 0 then
  redis.call('DEL', KEYS[9])
end
local seq = redis.call('INCR', KEYS[5])
local epoch = redis.call('GET', KEYS[6]) or ''
local event = 'R' .. ARGV[2]
redis.call('RPUSH', KEYS[4], event)
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[7], ARGV[5])
local request_id = redis.call('HGET', KEYS[3], ARGV[1])
if request_id then
  redis.call('HDEL', KEYS[3], ARGV[1])
  -- The request key shares the session's hash tag, so it lives in this slot.
  local request = ARGV[7] .. request_id
  redis.call('HSET', request, 'state', 'D', 'rpc', ARGV[1], 'resolved', ARGV[2])
  redis.call('EXPIRE', request, ARGV[5])
end
local remaining = redis.call('HLEN', KEYS[1])
if tenant and remaining == 0 then
  redis.call('SREM', KEYS[8], ARGV[9])
end
if tenant then
  redis.call('ZADD', KEYS[10], 'GT', tonumber(ARGV[13]) + 1000 * tonumber(ARGV[10]), ARGV[9])
  redis.call('PEXPIRE', KEYS[10], 1000 * tonumber(ARGV[10]))
end
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6]}) do
  redis.call('EXPIRE', key, ARGV[10])
end
local message = epoch .. ' ' .. seq .. ' ' .. event
redis.call(ARGV[11], ARGV[6], message)
if tenant then
  redis.call('PUBLISH', ARGV[8], message)
end
local now = redis.call('TIME')
return {'claimed', seq, epoch, remaining, now[1] .. string.format('%06d', now[2])}
"#;

/// A Redis Cluster's tenant part of a registration, after REGISTER (the tenant's keys
/// and channel share the tenant's hash tag, so this is one slot). The sessions index is
/// a sorted set scored by the session shard's clock at the last registration, so that
/// TENANT_CLAIMED never drops a session that a later registration filled again.
const TENANT_REGISTERED: &str = r#"
-- KEYS: tenant_sessions tenant_pending tenant_held
-- ARGV: session_id time_us tenant_channel message session_now_empty held_until_ms
--       held_ttl_ms
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
redis.call('INCR', KEYS[2])
redis.call('SPUBLISH', ARGV[3], ARGV[4])
"#;

/// Attaches an agent: one script, so that the holder check, the tenant's agent cap and
/// the replacement are one step (the agent's keys share the tenant's hash tag).
const ATTACH_AGENT: &str = r#"
-- KEYS: agent tenant_agents
-- ARGV: incarnation parent_agent_id holder may_take_over lease_ms agent_id now_ms
--       max_agents
-- A live lease belongs to the subject that attached it: another one may replace it
-- only with may_take_over (the admin role).
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= ARGV[3] and ARGV[4] ~= '1' then
  return {'held'}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[7])
if not redis.call('ZSCORE', KEYS[2], ARGV[6])
    and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[8]) then
  return {'full'}
end
local previous = redis.call('HGET', KEYS[1], 'inc') or ''
redis.call('HSET', KEYS[1], 'inc', ARGV[1], 'parent', ARGV[2], 'holder', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], tonumber(ARGV[7]) + tonumber(ARGV[5]), ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {'attached', previous}
"#;

/// Admits a session to its tenant's sessions holding state (ARGV[2] is already among
/// them, or there is room), marking it held until ARGV[3]. On a cluster the
/// registration runs it first, with the pending count (ADMIT_ASK); a subscription
/// runs it for its session.
const ADMIT_SESSION: &str = r#"
-- KEYS: tenant_held   ARGV: session_id now_ms held_until_ms max_sessions held_ttl_ms
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[1], ARGV[1])
    and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"#;

/// On a cluster, before REGISTER: the tenant's pending count and session cap (its
/// keys live in the tenant's slot). Concurrent registrations may overshoot the
/// pending count by their number; the count itself is taken after (TENANT_REGISTERED).
const ADMIT_ASK: &str = r#"
-- KEYS: tenant_pending tenant_held
-- ARGV: session_id now_ms held_until_ms max_sessions held_ttl_ms max_pending
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[6]) then
  return 'tenant_full'
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[2], ARGV[1])
    and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return 'sessions_full'
end
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 'ok'
"#;

/// The tenant part of a claim on a Redis Cluster, after CLAIM.
const TENANT_CLAIMED: &str = r#"
-- KEYS: tenant_sessions tenant_pending tenant_held
-- ARGV: session_id time_us tenant_channel message session_now_empty held_until_ms
--       held_ttl_ms
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
if redis.call('DECR', KEYS[2]) <= 0 then
  redis.call('DEL', KEYS[2])
end
if ARGV[5] == '1' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if score and tonumber(score) <= tonumber(ARGV[2]) then
    redis.call('ZREM', KEYS[1], ARGV[1])
  end
end
redis.call('SPUBLISH', ARGV[3], ARGV[4])
"#;

/// A session's pending asks with its epoch and head, read at one instant (a script:
/// unlike MULTI, a script that meets a resharding is redirected like any command).
static READ_SNAPSHOT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS: epoch head order asks
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]),
        redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[4])}
"#,
    )
});

/// A session's history with its epoch and head, read at one instant.
static READ_HISTORY: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        r#"
-- KEYS: epoch head events
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1)}
"#,
    )
});

/// The session state of every node, in Redis.
#[derive(Clone)]
pub struct RedisStore {
    conn: RedisConn,
    config: RedisConfig,
    register: Script,
    claim: Script,
    tenant_registered: Script,
    tenant_claimed: Script,
    attach_agent: Script,
    admit_session: Script,
    admit_ask: Script,
}

/// Milliseconds since the epoch on this node's clock: lease expiries are scored by it.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Maps a Redis failure: an unreachable server is UNAVAILABLE (retry), anything else
/// is a fault of ours.
pub fn unavailable(error: redis::RedisError) -> AskError {
    if error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
    {
        AskError::BackendUnavailable(error.to_string())
    } else {
        AskError::Internal(format!("redis: {error}"))
    }
}

fn decode<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, AskError> {
    M::decode(bytes).map_err(|e| AskError::Internal(format!("corrupt entry in redis: {e}")))
}

/// Field `i` of a script's reply, as `T`.
fn reply_field<T: redis::FromRedisValue>(reply: &[redis::Value], i: usize) -> Result<T, AskError> {
    redis::from_redis_value_ref(reply.get(i).unwrap_or(&redis::Value::Nil))
        .map_err(|e| AskError::Internal(format!("unexpected script reply: {e}")))
}

fn parse_settled(text: &str) -> Option<Settled> {
    let (resolution, resolved_by) = text.split_once(' ')?;
    Some(Settled {
        resolution: askgate_proto::v1::Resolution::from_str_name(resolution)?,
        resolved_by: resolved_by.to_owned(),
    })
}

impl RedisStore {
    /// Connects to the target; reconnects by itself later.
    pub async fn connect(
        target: impl Into<RedisTarget>,
        config: RedisConfig,
    ) -> anyhow::Result<Self> {
        let conn = target.into().connect(None).await?;
        Ok(Self {
            conn,
            config,
            register: Script::new(REGISTER),
            claim: Script::new(CLAIM),
            tenant_registered: Script::new(TENANT_REGISTERED),
            tenant_claimed: Script::new(TENANT_CLAIMED),
            attach_agent: Script::new(ATTACH_AGENT),
            admit_session: Script::new(ADMIT_SESSION),
            admit_ask: Script::new(ADMIT_ASK),
        })
    }

    /// Makes `incarnation` the agent's live lease for `lease` (renewed by the node),
    /// unless another subject holds it and `holder` may not take it over. Returns the
    /// incarnation it replaced, if any.
    pub async fn attach_agent(
        &self,
        tenant: &str,
        agent_id: &str,
        incarnation: &str,
        parent_agent_id: &str,
        holder: &Holder,
        lease: Duration,
    ) -> Result<Option<String>, AskError> {
        let keys = TenantKeys::new(tenant);
        let max = self.config.max_agents_per_tenant;
        let reply: Vec<String> = self
            .attach_agent
            .key(keys.agent(agent_id))
            .key(keys.agents())
            .arg(incarnation)
            .arg(parent_agent_id)
            .arg(&holder.subject)
            .arg(if holder.may_take_over { "1" } else { "0" })
            .arg(lease.as_millis() as u64)
            .arg(agent_id)
            .arg(now_ms())
            .arg(max)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        match reply.as_slice() {
            [state] if state == "held" => Err(AskError::lease_held()),
            [state] if state == "full" => Err(AskError::too_many_agents(max)),
            [state, previous] if state == "attached" => {
                Ok(Some(previous.clone()).filter(|p| !p.is_empty()))
            }
            _ => Err(AskError::Internal(format!(
                "unexpected reply of the attach script: {reply:?}"
            ))),
        }
    }

    /// Counts `key`'s session among its tenant's sessions holding state until `until`
    /// (or later, if it already is), unless the tenant holds as many as it may.
    pub async fn admit_session(&self, key: &SessionKey, until_ms: u64) -> Result<(), AskError> {
        let admitted: i64 = self
            .admit_session
            .key(TenantKeys::new(&key.tenant).held_sessions())
            .arg(&*key.session_id)
            .arg(now_ms())
            .arg(until_ms)
            .arg(self.config.max_sessions_per_tenant)
            .arg(self.idle_ttl_secs() * 1000)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        match admitted {
            1 => Ok(()),
            _ => Err(self.sessions_full()),
        }
    }

    fn sessions_full(&self) -> AskError {
        AskError::too_many_sessions(self.config.max_sessions_per_tenant)
    }

    /// On a cluster, the tenant's part of a registration or a claim (TENANT_REGISTERED
    /// or TENANT_CLAIMED), after the session's script. That one stands whatever happens
    /// here (its caller must not be told otherwise): a failure is logged.
    async fn tenant_part(
        &self,
        script: &Script,
        key: &SessionKey,
        time_us: String,
        message: Vec<u8>,
        session_emptied: bool,
    ) {
        let tenant = TenantKeys::new(&key.tenant);
        let idle_ms = self.idle_ttl_secs() * 1000;
        let done = script
            .key(tenant.sessions())
            .key(tenant.pending())
            .key(tenant.held_sessions())
            .arg(&*key.session_id)
            .arg(time_us)
            .arg(tenant.channel())
            .arg(message)
            .arg(if session_emptied { "1" } else { "0" })
            .arg(now_ms() + idle_ms)
            .arg(idle_ms)
            .invoke_async::<()>(&mut self.conn.clone())
            .await;
        if let Err(e) = done {
            tracing::warn!(tenant = %key.tenant, "the tenant's part of a script failed: {e}");
        }
    }

    /// Whether the store is a Redis Cluster (see [`RedisConn`]).
    pub fn is_cluster(&self) -> bool {
        self.conn.is_cluster()
    }

    fn tenant_full(&self) -> AskError {
        AskError::TooManyPending(format!(
            "at most {} pending asks per tenant",
            self.config.max_pending_per_tenant
        ))
    }

    /// How long an idle session's history (events, head, epoch) stays: the retention,
    /// and at least an hour, so a UI reconnecting after a long pause can still resume.
    fn idle_ttl_secs(&self) -> u64 {
        self.config.retention.as_secs().max(3600)
    }

    /// [`Self::idle_ttl_secs`] as a duration.
    pub fn idle_ttl(&self) -> Duration {
        Duration::from_secs(self.idle_ttl_secs())
    }

    /// Stores a new ask (or finds the one its request_id names) and publishes its
    /// `requested` event, atomically.
    pub async fn register(
        &self,
        key: &SessionKey,
        requested: &Requested,
        request_id: &str,
    ) -> Result<Registration, AskError> {
        let keys = SessionKeys::new(key);
        let request_key = keys.request(if request_id.is_empty() {
            "-"
        } else {
            request_id
        });
        let tenant = TenantKeys::new(&key.tenant);
        let cluster = self.conn.is_cluster();
        let now = now_ms();
        if cluster {
            // The tenant's keys live in another slot: its caps are checked before,
            // the ask counted after (ADMIT_ASK, TENANT_REGISTERED).
            let idle_ms = self.idle_ttl_secs() * 1000;
            let admitted: String = self
                .admit_ask
                .key(tenant.pending())
                .key(tenant.held_sessions())
                .arg(&*key.session_id)
                .arg(now)
                .arg(now + idle_ms)
                .arg(self.config.max_sessions_per_tenant)
                .arg(idle_ms)
                .arg(self.config.max_pending_per_tenant)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            match admitted.as_str() {
                "ok" => {}
                "tenant_full" => return Err(self.tenant_full()),
                "sessions_full" => return Err(self.sessions_full()),
                other => {
                    return Err(AskError::Internal(format!(
                        "unexpected reply of the admission script: {other:?}"
                    )));
                }
            }
        }
        let bytes = requested.encode_to_vec();
        let mut invocation = self.register.prepare_invoke();
        invocation
            .key(keys.key("asks"))
            .key(keys.key("order"))
            .key(keys.key("rids"))
            .key(keys.key("events"))
            .key(keys.key("head"))
            .key(keys.key("epoch"))
            .key(request_key);
        if !cluster {
            invocation
                .key(tenant.sessions())
                .key(tenant.pending())
                .key(tenant.held_sessions());
        }
        let reply: Vec<redis::Value> = invocation
            .arg(&requested.rpc_id)
            .arg(&bytes)
            .arg(request_id)
            .arg(self.config.history_len.max(1))
            .arg(self.config.max_pending_per_session)
            .arg(uuid::Uuid::now_v7().simple().to_string())
            .arg(keys.channel())
            .arg(tenant.channel())
            .arg(&*key.session_id)
            .arg(self.idle_ttl_secs())
            .arg(self.config.max_pending_per_tenant)
            .arg(self.conn.publish_command())
            .arg(now)
            .arg(self.config.max_sessions_per_tenant)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let text = |i: usize| -> Result<String, AskError> { reply_field(&reply, i) };
        match text(0)?.as_str() {
            "new" => {
                let seq = parse_seq(&text(1)?)?;
                let epoch = text(2)?;
                if cluster {
                    let message = live_message(&epoch, seq, b'Q', &bytes);
                    self.tenant_part(&self.tenant_registered, key, text(3)?, message, false)
                        .await;
                }
                Ok(Registration::New { seq, epoch })
            }
            "joined" => Ok(Registration::Joined { rpc_id: text(1)? }),
            "recorded" => {
                let bytes: Vec<u8> = reply_field(&reply, 2)?;
                Ok(Registration::Recorded {
                    rpc_id: text(1)?,
                    resolved: decode(&bytes)?,
                })
            }
            "full" => Err(AskError::TooManyPending(format!(
                "at most {} pending asks per session",
                self.config.max_pending_per_session
            ))),
            "tenant_full" => Err(self.tenant_full()),
            "sessions_full" => Err(self.sessions_full()),
            other => Err(AskError::Internal(format!(
                "unexpected script reply {other:?}"
            ))),
        }
    }

    /// First wins: removes the pending ask, records how it ended and publishes its
    /// `resolved` event, atomically. A later claim gets NOT_PENDING with the first's
    /// resolution while it is remembered.
    pub async fn claim(&self, key: &SessionKey, resolved: &Resolved) -> Result<u64, AskError> {
        let keys = SessionKeys::new(key);
        let settled = format!(
            "{} {}",
            resolved.reason().as_str_name(),
            resolved.resolved_by
        );
        let tenant = TenantKeys::new(&key.tenant);
        let cluster = self.conn.is_cluster();
        let bytes = resolved.encode_to_vec();
        let mut invocation = self.claim.prepare_invoke();
        invocation
            .key(keys.key("asks"))
            .key(keys.key("order"))
            .key(keys.key("rids"))
            .key(keys.key("events"))
            .key(keys.key("head"))
            .key(keys.key("epoch"))
            .key(keys.key("settled"));
        if !cluster {
            invocation
                .key(tenant.sessions())
                .key(tenant.pending())
                .key(tenant.held_sessions());
        }
        let reply: Vec<redis::Value> = invocation
            .arg(&resolved.rpc_id)
            .arg(&bytes)
            .arg(settled)
            .arg(self.config.history_len.max(1))
            .arg(self.config.retention.as_secs().max(1))
            .arg(keys.channel())
            .arg(keys.request(""))
            .arg(tenant.channel())
            .arg(&*key.session_id)
            .arg(self.idle_ttl_secs())
            .arg(self.conn.publish_command())
            .arg(keys.wait_mark(&resolved.rpc_id))
            .arg(now_ms())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        let text = |i: usize| -> Result<String, AskError> { reply_field(&reply, i) };
        match text(0)?.as_str() {
            "claimed" => {
                let seq = parse_seq(&text(1)?)?;
                if cluster {
                    let message = live_message(&text(2)?, seq, b'R', &bytes);
                    let emptied = text(3)? == "0";
                    self.tenant_part(&self.tenant_claimed, key, text(4)?, message, emptied)
                        .await;
                }
                Ok(seq)
            }
            "gone" => Err(AskError::NotPending {
                settled: parse_settled(&text(1)?),
            }),
            other => Err(AskError::Internal(format!(
                "unexpected script reply {other:?}"
            ))),
        }
    }

    /// Checks the store's own connection (the connection manager replaces a broken one
    /// after its first failure, so health checks also keep it fresh).
    pub async fn ping(&self) -> bool {
        let mut conn = self.conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .is_ok()
    }

    /// The rpc_id of the ask a request_id registered, while it is pending.
    pub async fn pending_request(
        &self,
        key: &SessionKey,
        request_id: &str,
    ) -> Result<Option<String>, AskError> {
        let (state, rpc_id): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(SessionKeys::new(key).request(request_id))
            .arg("state")
            .arg("rpc")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(rpc_id.filter(|_| state.as_deref() == Some("P")))
    }

    /// The stored `Requested` of a pending ask.
    pub async fn pending_ask(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, AskError> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        let (bytes, settled): (Option<Vec<u8>>, Option<String>) = redis::pipe()
            .hget(keys.key("asks"), rpc_id)
            .hget(keys.key("settled"), rpc_id)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        match bytes {
            Some(bytes) => decode(&bytes),
            None => Err(AskError::NotPending {
                settled: settled.as_deref().and_then(parse_settled),
            }),
        }
    }

    /// The pending asks of a session, oldest first.
    pub async fn pending(&self, key: &SessionKey) -> Result<Vec<Requested>, AskError> {
        Ok(self
            .snapshot(key)
            .await?
            .pending
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    }

    /// The session's pending asks as of its last event, read in one transaction so the
    /// two agree: live events after `head` are exactly the changes since.
    pub async fn snapshot(&self, key: &SessionKey) -> Result<Snapshot, AskError> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        type Read = (
            Option<String>,
            Option<u64>,
            Vec<(String, u64)>,
            std::collections::HashMap<String, Vec<u8>>,
        );
        let (epoch, head, order, mut asks): Read = READ_SNAPSHOT
            .key(keys.key("epoch"))
            .key(keys.key("head"))
            .key(keys.key("order"))
            .key(keys.key("asks"))
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let pending = order
            .into_iter()
            .filter_map(|(id, seq)| Some((seq, asks.remove(&id)?)))
            .map(|(seq, bytes)| Ok((seq, decode(&bytes)?)))
            .collect::<Result<_, AskError>>()?;
        Ok(Snapshot {
            epoch: epoch.unwrap_or_default(),
            head: head.unwrap_or(0),
            pending,
        })
    }

    /// Sessions of a tenant that may have pending asks.
    pub async fn tenant_sessions(&self, tenant: &str) -> Result<Vec<String>, AskError> {
        let mut conn = self.conn.clone();
        let sessions = TenantKeys::new(tenant).sessions();
        match self.conn.is_cluster() {
            // A sorted set there (see TENANT_REGISTERED).
            true => conn.zrange(sessions, 0, -1).await,
            false => conn.smembers(sessions).await,
        }
        .map_err(unavailable)
    }

    /// Every event the session's history still holds, oldest first.
    pub async fn history(&self, key: &SessionKey) -> Result<Vec<StoredEvent>, AskError> {
        let mut conn = self.conn.clone();
        let entries: Vec<Vec<u8>> = conn
            .lrange(SessionKeys::new(key).key("events"), 0, -1)
            .await
            .map_err(unavailable)?;
        entries.iter().map(|e| parse_event(e)).collect()
    }

    /// The events after `seq` with their sequence numbers, up to the last one, when the
    /// history (of that epoch) still holds all of them; `None` when the caller must
    /// reset.
    pub async fn events_after(
        &self,
        key: &SessionKey,
        epoch: &str,
        seq: u64,
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, AskError> {
        self.held_events(key, epoch, Some(seq)).await
    }

    /// Every event the history (of that epoch) holds, with its sequence number; `None`
    /// when the epoch changed.
    pub async fn recent_events(
        &self,
        key: &SessionKey,
        epoch: &str,
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, AskError> {
        self.held_events(key, epoch, None).await
    }

    async fn held_events(
        &self,
        key: &SessionKey,
        epoch: &str,
        after: Option<u64>,
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, AskError> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        let (stored_epoch, head, entries): (Option<String>, Option<u64>, Vec<Vec<u8>>) =
            READ_HISTORY
                .key(keys.key("epoch"))
                .key(keys.key("head"))
                .key(keys.key("events"))
                .invoke_async(&mut conn)
                .await
                .map_err(unavailable)?;
        let head = head.unwrap_or(0);
        let first = head + 1 - entries.len() as u64;
        let seq = match after {
            Some(seq) if seq > head || seq + 1 < first => return Ok(None),
            Some(seq) => seq,
            None => 0,
        };
        if stored_epoch.as_deref() != Some(epoch) {
            return Ok(None);
        }
        let mut events = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let n = first + i as u64;
            if n > seq {
                events.push((n, parse_event(entry)?));
            }
        }
        Ok(Some(events))
    }
}

fn parse_seq(text: &str) -> Result<u64, AskError> {
    text.parse()
        .map_err(|_| AskError::Internal("bad seq".into()))
}

/// A published message, as the scripts build it: `<epoch> <seq> <Q|R><encoded event>`.
fn live_message(epoch: &str, seq: u64, kind: u8, event: &[u8]) -> Vec<u8> {
    let mut message = format!("{epoch} {seq} ").into_bytes();
    message.push(kind);
    message.extend_from_slice(event);
    message
}

/// Decodes a history entry (or the payload of a pub/sub message after its prefix).
pub fn parse_event(entry: &[u8]) -> Result<StoredEvent, AskError> {
    match entry.split_first() {
        Some((b'Q', payload)) => Ok(StoredEvent::Requested(decode(payload)?)),
        Some((b'R', payload)) => Ok(StoredEvent::Resolved(decode(payload)?)),
        _ => Err(AskError::Internal("corrupt history entry in redis".into())),
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Question, Resolution};

    use super::*;
    use crate::testing::RedisServer;

    fn requested(rpc_id: &str) -> Requested {
        Requested {
            rpc_id: rpc_id.into(),
            session_id: "s".into(),
            questions: vec![Question {
                id: "q".into(),
                question: "ok?".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn resolved(rpc_id: &str, reason: Resolution, by: &str) -> Resolved {
        Resolved {
            rpc_id: rpc_id.into(),
            session_id: "s".into(),
            reason: reason.into(),
            resolved_by: by.into(),
            ..Default::default()
        }
    }

    async fn store(redis: &RedisServer) -> RedisStore {
        store_with(redis, RedisConfig::default()).await
    }

    async fn store_with(redis: &RedisServer, config: RedisConfig) -> RedisStore {
        RedisStore::connect(&redis.url, config)
            .await
            .expect("connect")
    }

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

    fn key() -> SessionKey {
        SessionKey::new("acme{x}", "team/s-1")
    }

    #[test]
    fn a_sessions_keys_share_one_hash_tag_and_braces_in_tenants_cannot_break_it() {
        let keys = SessionKeys::new(&key());
        assert_eq!(keys.key("asks"), "ag:{acme%7Bx%7D/team/s-1}:asks");
        assert!(keys.channel().starts_with("ag:{acme%7Bx%7D/team/s-1}:"));
        assert!(keys.request("r").starts_with("ag:{acme%7Bx%7D/team/s-1}:"));
    }

    #[test]
    fn valid_names_keep_their_keys_and_a_slash_in_a_tenant_cannot_join_two_sessions() {
        let keys = |t: &str, s: &str| SessionKeys::new(&SessionKey::new(t, s)).key("asks");
        assert_eq!(keys("acme", "team/s-1"), "ag:{acme/team/s-1}:asks");
        assert_ne!(keys("acme", "x/s"), keys("acme/x", "s"));
        assert_eq!(
            TenantKeys::new("acme").agent("a:asks:x"),
            "ag:tenant:{acme}:agent:a%3Aasks%3Ax"
        );
        assert_ne!(
            TenantKeys::new("acme").agent("a:asks:x"),
            TenantKeys::new("acme").agent_asks("a", "x")
        );
    }

    /// Text made mostly of the characters the encoding reserves, so collisions would
    /// be found if they could happen.
    fn adversarial() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::string::string_regex("[a/{}%:7BD2F]{0,8}").expect("regex")
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// docs/protocol.md "Vocabulary": no two distinct (tenant, session) pairs share a key,
        /// and every key of a session keeps to one hash tag (one cluster slot).
        #[test]
        fn the_session_key_encoding_is_injective(
            a in (adversarial(), adversarial()),
            b in (adversarial(), adversarial()),
        ) {
            let tag = |(t, s): &(String, String)| SessionKeys::new(&SessionKey::new(t.as_str(), s.as_str())).tag;
            proptest::prop_assert_eq!(tag(&a) == tag(&b), a == b);
            let tag_a = tag(&a);
            let open = tag_a.find('{').expect("open");
            let close = tag_a[open..].find('}').expect("close") + open;
            proptest::prop_assert_eq!(close, tag_a.len() - 1, "the hash tag is the whole session part");
        }

        #[test]
        fn tenant_and_agent_keys_are_injective(
            a in (adversarial(), adversarial()),
            b in (adversarial(), adversarial()),
        ) {
            let agent = |(t, id): &(String, String)| TenantKeys::new(t).agent(id);
            proptest::prop_assert_eq!(agent(&a) == agent(&b), a == b);
            proptest::prop_assert_eq!(TenantKeys::new(&a.0).tag == TenantKeys::new(&b.0).tag, a.0 == b.0);
        }
    }

    #[tokio::test]
    async fn register_then_claim_first_wins_and_later_claims_learn_the_resolution() {
        let redis = RedisServer::start().await;
        let store = store(&redis).await;
        let registered = store
            .register(&key(), &requested("r1"), "")
            .await
            .expect("register");
        let Registration::New { seq, epoch } = registered else {
            panic!("expected a new ask, got {registered:?}");
        };
        assert_eq!(seq, 1);
        assert_eq!(
            store
                .pending_ask(&key(), "r1")
                .await
                .expect("pending")
                .rpc_id,
            "r1"
        );
        assert_eq!(store.pending(&key()).await.expect("list").len(), 1);

        let claimed = store
            .claim(&key(), &resolved("r1", Resolution::Answered, "ana"))
            .await
            .expect("first claim wins");
        assert_eq!(claimed, 2);
        let late = store
            .claim(&key(), &resolved("r1", Resolution::Cancelled, "bo"))
            .await;
        assert_eq!(
            late,
            Err(AskError::NotPending {
                settled: Some(Settled {
                    resolution: Resolution::Answered,
                    resolved_by: "ana".into()
                })
            })
        );
        assert!(store.pending(&key()).await.expect("list").is_empty());
        let events = store
            .events_after(&key(), &epoch, 0)
            .await
            .expect("history");
        let events = events.expect("held");
        assert_eq!(events.len(), 2);
        assert!(matches!(&events[0], (1, StoredEvent::Requested(r)) if r.rpc_id == "r1"));
        assert!(matches!(&events[1], (2, StoredEvent::Resolved(r)) if r.resolved_by == "ana"));
        assert_eq!(
            store
                .events_after(&key(), "another-epoch", 0)
                .await
                .expect("history"),
            None
        );
    }

    #[tokio::test]
    async fn concurrent_claims_have_exactly_one_winner() {
        let redis = RedisServer::start().await;
        let store = store(&redis).await;
        for round in 0..20 {
            let rpc_id = format!("r{round}");
            store
                .register(&key(), &requested(&rpc_id), "")
                .await
                .expect("register");
            let claims: Vec<_> = (0..16)
                .map(|i| {
                    let (store, rpc_id) = (store.clone(), rpc_id.clone());
                    tokio::spawn(async move {
                        let by = format!("ui-{i}");
                        store
                            .claim(&key(), &resolved(&rpc_id, Resolution::Answered, &by))
                            .await
                    })
                })
                .collect();
            let mut winners = 0;
            for claim in claims {
                match claim.await.expect("join") {
                    Ok(_) => winners += 1,
                    Err(e) => assert_eq!(e.reason(), "NOT_PENDING"),
                }
            }
            assert_eq!(winners, 1, "round {round}");
        }
    }

    #[tokio::test]
    async fn a_request_id_joins_while_pending_and_gets_the_recorded_outcome_after() {
        let redis = RedisServer::start().await;
        let store = store(&redis).await;
        assert!(matches!(
            store
                .register(&key(), &requested("r1"), "req")
                .await
                .expect("register"),
            Registration::New { .. }
        ));
        assert_eq!(
            store
                .register(&key(), &requested("r2"), "req")
                .await
                .expect("retry"),
            Registration::Joined {
                rpc_id: "r1".into()
            }
        );
        let outcome = resolved("r1", Resolution::Cancelled, "ana");
        store.claim(&key(), &outcome).await.expect("claim");
        assert_eq!(
            store
                .register(&key(), &requested("r3"), "req")
                .await
                .expect("late retry"),
            Registration::Recorded {
                rpc_id: "r1".into(),
                resolved: outcome
            }
        );
        assert_eq!(store.pending(&key()).await.expect("list").len(), 0);
    }

    #[tokio::test]
    async fn history_is_trimmed_and_an_old_cursor_must_reset() {
        let redis = RedisServer::start().await;
        let store = store_with(
            &redis,
            RedisConfig {
                history_len: 4,
                ..RedisConfig::default()
            },
        )
        .await;
        for i in 0..5 {
            let rpc_id = format!("r{i}");
            store
                .register(&key(), &requested(&rpc_id), "")
                .await
                .expect("register");
            store
                .claim(&key(), &resolved(&rpc_id, Resolution::Answered, "a"))
                .await
                .expect("claim");
        }
        let Snapshot { epoch, head, .. } = store.snapshot(&key()).await.expect("head");
        assert!(!epoch.is_empty(), "an epoch");
        assert_eq!(head, 10);
        let recent = store
            .events_after(&key(), &epoch, 7)
            .await
            .expect("history");
        assert_eq!(
            recent
                .expect("held")
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>(),
            [8, 9, 10]
        );
        assert_eq!(
            store
                .events_after(&key(), &epoch, 2)
                .await
                .expect("history"),
            None
        );
    }

    #[tokio::test]
    async fn after_a_run_nothing_is_kept_without_an_expiry() {
        let redis = RedisServer::start().await;
        let store = store(&redis).await;
        for i in 0..20 {
            let key = SessionKey::new("acme", format!("s-{i}"));
            let rpc_id = format!("r{i}");
            let request_id = if i % 2 == 0 { "req" } else { "" };
            store
                .register(&key, &requested(&rpc_id), request_id)
                .await
                .expect("register");
            store
                .claim(&key, &resolved(&rpc_id, Resolution::Answered, "a"))
                .await
                .expect("claim");
        }
        let client = redis::Client::open(redis.url.as_str()).expect("url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .expect("keys");
        assert!(!keys.is_empty());
        for key in keys {
            let ttl: i64 = redis::cmd("TTL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("ttl");
            assert!(ttl > 0, "{key} has no expiry (TTL {ttl})");
        }
    }

    #[tokio::test]
    async fn the_pending_limit_is_enforced_in_the_script() {
        let redis = RedisServer::start().await;
        let store = store_with(
            &redis,
            RedisConfig {
                max_pending_per_session: 1,
                ..RedisConfig::default()
            },
        )
        .await;
        store
            .register(&key(), &requested("r1"), "")
            .await
            .expect("first");
        let full = store.register(&key(), &requested("r2"), "").await;
        assert!(matches!(full, Err(AskError::TooManyPending(_))));
    }
}
