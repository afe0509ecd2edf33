//! Shared state in Redis, for several askgate nodes behind one load balancer.
//!
//! This module is the storage layer, the one that sends Redis commands (`nodes.rs` for
//! what the nodes keep), with the two server-side scripts that make askgate's semantics
//! hold across nodes: registration (store, append
//! the event, publish it) and claim (check it is pending, remove it, record the outcome,
//! append the event, publish it), each one atomic script, so the first claim wins
//! whatever node it arrives on. [`super::fanout`] carries the published events to
//! the other nodes, and [`super::engine`] builds the `Backend` on both.
//!
//! Scripts are sent by SHA with EVALSHA and reloaded on NOSCRIPT.
//!
//! The keys are named in [`super::keys`]; docs/architecture.md lists them with what
//! each holds and who renews it. A session's keys share the hash tag
//! `{<tenant>/<session>}`, so they live in one Redis Cluster slot and its scripts run
//! on one shard.
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

use askgate_proto::v1::Requested;
use redis::{AsyncCommands, Script};

pub use super::{
    connection::{RedisConn, RedisTarget},
    keys::{SessionKeys, TenantKeys},
};
use askgate_core::backend::{Holder, StateConfig};
use askgate_core::domain::{Error, SessionKey, Settled};

mod asks;
mod audit;
mod hooks;
mod model;
mod nodes;
mod outbox;
mod replies;
mod scripts;
mod votes;
mod wait;

pub use audit::RedisAuditStore;
pub use hooks::RedisHookStore;
pub use model::{Claimed, Listing, Registration, Snapshot, StoredEvent, parse_event};
pub use nodes::Renewal;
pub use outbox::Taken;
use scripts::*;
pub use wait::WaitPolicy;

/// The session state of every node, in Redis.
#[derive(Clone)]
pub struct RedisStore {
    conn: RedisConn,
    config: StateConfig,
    register: Script,
    claim: Script,
    tenant_registered: Script,
    tenant_claimed: Script,
    attach_agent: Script,
    admit_session: Script,
    admit_ask: Script,
    /// Where acknowledging writes go (and what they wait for).
    acked: wait::Acked,
    /// Whether committed events go into their session's outbox (`outbox.rs`): once
    /// the node queues deliveries.
    outbox: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Milliseconds since the epoch on this node's clock: lease expiries are scored by it.
pub use askgate_core::clock::now_ms;

/// Maps a Redis failure: an unreachable server is UNAVAILABLE (retry), anything else
/// is a fault of ours. Replicas that did not confirm a write say why in words, not in
/// the client library's error format.
pub fn unavailable(error: redis::RedisError) -> Error {
    if error.kind() == redis::ErrorKind::Io
        && error.to_string().starts_with(wait::WAIT_FAILED)
        && let Some(detail) = error.detail()
    {
        return Error::BackendUnavailable(detail.to_owned());
    }
    // A cluster changing shape (a failover, slots moving) is as passing as a lost
    // connection: the call may be retried.
    if error.is_io_error()
        || cluster_moving(&error)
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
        || error.is_unrecoverable_error()
    {
        Error::BackendUnavailable(error.to_string())
    } else {
        Error::Internal(format!("redis: {error}"))
    }
}

/// How long a node retries a tenant part that failed (a cluster's failover takes
/// seconds; a shard gone for longer leaves the tenant's subscribers to their next
/// resync).
const TENANT_PART_PATIENCE: Duration = Duration::from_secs(120);

/// The tenant's part of a registration or a claim on a cluster: see
/// [`RedisStore::tenant_part`].
struct TenantPart {
    /// A claim's part (TENANT_CLAIMED), or a registration's (TENANT_REGISTERED).
    claimed: bool,
    key: SessionKey,
    /// The session shard's clock at the script (the sessions index's score).
    time_us: String,
    /// The event, as published on the tenant's channel.
    message: Vec<u8>,
    /// Whether the claim left the session with nothing pending.
    session_emptied: bool,
    /// The ask's bytes, on the tenant's byte budget.
    size: usize,
}

/// Whether `error` says the command never ran: the cluster sent it elsewhere or was
/// down, or no connection was made. (A timeout or a dropped connection leaves unknown
/// whether it ran.)
fn did_not_run(error: &redis::RedisError) -> bool {
    error.is_connection_refusal() || cluster_moving(error)
}

/// Whether `error` is a refusal a changing cluster gives (a redirect, a shard down or
/// read-only, no connection to the slot's node): the command did not run.
fn cluster_moving(error: &redis::RedisError) -> bool {
    matches!(
        error.kind(),
        redis::ErrorKind::Server(
            redis::ServerErrorKind::ReadOnly
                | redis::ServerErrorKind::Moved
                | redis::ServerErrorKind::Ask
                | redis::ServerErrorKind::TryAgain
                | redis::ServerErrorKind::ClusterDown
                | redis::ServerErrorKind::MasterDown
        ) | redis::ErrorKind::ClusterConnectionNotFound
    )
}

fn decode<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, Error> {
    M::decode(bytes).map_err(|e| Error::Internal(format!("corrupt entry in redis: {e}")))
}

/// Field `i` of a script's reply, as `T`.
fn reply_field<T: redis::FromRedisValue>(reply: &[redis::Value], i: usize) -> Result<T, Error> {
    redis::from_redis_value_ref(reply.get(i).unwrap_or(&redis::Value::Nil))
        .map_err(|e| Error::Internal(format!("unexpected script reply: {e}")))
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
        config: StateConfig,
    ) -> anyhow::Result<Self> {
        let conn = target.into().connect(None).await?;
        Ok(Self {
            acked: wait::Acked::plain(conn.clone()),
            outbox: Default::default(),
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

    /// Makes acknowledging writes wait as `policy` says (replicas, fsync), on a
    /// connection of their own to `target` when they wait at all.
    pub async fn waiting(
        mut self,
        target: &RedisTarget,
        policy: WaitPolicy,
    ) -> anyhow::Result<Self> {
        self.acked = wait::Acked::connect(self.conn.clone(), target, policy).await?;
        Ok(self)
    }

    /// The connection for a write that acknowledges something: it waits as the
    /// policy says.
    fn acked(&self) -> wait::Acked {
        self.acked.clone()
    }

    /// The webhook store on this store's connection.
    pub fn hooks(&self, limits: askgate_core::backend::hooks::StoreLimits) -> RedisHookStore {
        RedisHookStore::new(self.conn.clone(), limits, self.acked.clone())
    }

    /// The audit log, on the same Redis.
    pub fn audit(&self) -> RedisAuditStore {
        RedisAuditStore::new(
            self.conn.clone(),
            self.acked.clone(),
            self.config.max_audit_bytes_per_tenant,
        )
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
    ) -> Result<Option<String>, Error> {
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
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_slice() {
            [state] if state == "held" => Err(Error::lease_held()),
            [state] if state == "full" => Err(Error::too_many_agents(max)),
            [state, previous] if state == "attached" => {
                Ok(Some(previous.clone()).filter(|p| !p.is_empty()))
            }
            _ => Err(Error::Internal(format!(
                "unexpected reply of the attach script: {reply:?}"
            ))),
        }
    }

    /// Counts `key`'s session among its tenant's sessions holding state until `until`
    /// (or later, if it already is), unless the tenant holds as many as it may.
    pub async fn admit_session(&self, key: &SessionKey, until_ms: u64) -> Result<(), Error> {
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

    fn sessions_full(&self) -> Error {
        Error::too_many_sessions(self.config.max_sessions_per_tenant)
    }

    /// On a cluster, the tenant's part of a registration or a claim (TENANT_REGISTERED
    /// or TENANT_CLAIMED), after the session's script. That one stands whatever happens
    /// here (its caller must not be told otherwise), and the tenant's subscribers and
    /// sessions index must learn of it: a part that fails (the tenant's shard failing
    /// over, say) is retried in the background until it runs ([`Self::retry_tenant_part`]).
    ///
    /// `count` false announces the ask only (a retried registration that found its ask
    /// pending: whether its first tenant part counted it is unknown).
    /// Such an announcement is not retried in the background: the caller's next retry
    /// announces again (a task per retry would let one agent's retries pile up).
    async fn tenant_part(&self, part: TenantPart, count: bool) {
        if let Err(e) = self.run_tenant_part(&part, count).await {
            if !count {
                tracing::warn!(tenant = %part.key.tenant, "announcing an ask again failed: {e}");
                return;
            }
            tracing::warn!(
                tenant = %part.key.tenant,
                "the tenant's part of a script failed; retrying it: {e}"
            );
            // A claim's part counts again whatever the failure: a claim counted twice
            // leaves the tenant's counts low, never high (see `retry_tenant_part`).
            let count = part.claimed || did_not_run(&e);
            let store = self.clone();
            tokio::spawn(async move { store.retry_tenant_part(part, count).await });
        }
    }

    /// Runs a tenant part that failed again, backing off, until it runs or
    /// [`TENANT_PART_PATIENCE`] passed. Its announcement (the sessions index, the
    /// tenant's channel) may run twice: followers skip what they saw. Its counts run
    /// again only when `count` says they are owed: after a failure that leaves unknown
    /// whether the script ran, a registration's count is left out, so that an ask is
    /// never counted twice; the tenant's counts may then be low by one, which its caps
    /// forgive (a count left high would hold the tenant back for good).
    async fn retry_tenant_part(&self, part: TenantPart, mut count: bool) {
        let started = std::time::Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
            match self.run_tenant_part(&part, count).await {
                Ok(()) => {
                    tracing::info!(tenant = %part.key.tenant, "the tenant's part of a script ran on a retry");
                    return;
                }
                Err(e) if started.elapsed() > TENANT_PART_PATIENCE => {
                    tracing::error!(
                        tenant = %part.key.tenant,
                        session = %part.key.session_id,
                        "the tenant's part of a script failed for {TENANT_PART_PATIENCE:?}; \
                         the tenant's subscribers may miss an event of the session: {e}"
                    );
                    return;
                }
                Err(e) => count &= part.claimed || did_not_run(&e),
            }
        }
    }

    async fn run_tenant_part(&self, part: &TenantPart, count: bool) -> redis::RedisResult<()> {
        let tenant = TenantKeys::new(&part.key.tenant);
        let idle_ms = self.idle_ttl_secs() * 1000;
        let script = match part.claimed {
            true => &self.tenant_claimed,
            false => &self.tenant_registered,
        };
        script
            .key(tenant.sessions())
            .key(tenant.pending())
            .key(tenant.held_sessions())
            .key(tenant.pending_bytes())
            .arg(&*part.key.session_id)
            .arg(&part.time_us)
            .arg(tenant.channel())
            .arg(&part.message)
            .arg(if part.session_emptied { "1" } else { "0" })
            .arg(now_ms() + idle_ms)
            .arg(idle_ms)
            .arg(part.size)
            .arg(if count { "1" } else { "0" })
            .invoke_async::<()>(&mut self.conn.clone())
            .await
    }

    /// Whether the store is a Redis Cluster (see [`RedisConn`]).
    pub fn is_cluster(&self) -> bool {
        self.conn.is_cluster()
    }

    fn tenant_bytes_full(&self) -> Error {
        Error::pending_bytes_full("tenant", self.config.max_pending_bytes_per_tenant)
    }

    fn tenant_full(&self) -> Error {
        Error::TooManyPending(format!(
            "at most {} pending asks per tenant",
            self.config.max_pending_per_tenant
        ))
    }

    /// How long an idle session's history (events, head, epoch) stays: the retention,
    /// and at least an hour, so a UI reconnecting after a long pause can still resume.
    fn idle_ttl_secs(&self) -> u64 {
        self.config.request_retention.as_secs().max(3600)
    }

    /// [`Self::idle_ttl_secs`] as a duration.
    pub fn idle_ttl(&self) -> Duration {
        Duration::from_secs(self.idle_ttl_secs())
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

    /// The stored `Requested` of a pending ask; else how it ended, if that is
    /// remembered (a second read: the first one is the common case).
    pub async fn pending_ask(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        let bytes: Option<Vec<u8>> = conn.hget(keys.asks(), rpc_id).await.map_err(unavailable)?;
        if let Some(bytes) = bytes {
            return decode(&bytes);
        }
        let settled: Option<String> = conn
            .hget(keys.settled(), rpc_id)
            .await
            .map_err(unavailable)?;
        Err(Error::NotPending {
            settled: settled.as_deref().and_then(parse_settled),
        })
    }

    /// The pending asks of a session, oldest first.
    pub async fn pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error> {
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
    pub async fn snapshot(&self, key: &SessionKey) -> Result<Snapshot, Error> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        type Read = (
            Option<String>,
            Option<u64>,
            Vec<(String, u64)>,
            std::collections::HashMap<String, Vec<u8>>,
        );
        let (epoch, head, order, mut asks): Read = READ_SNAPSHOT
            .key(keys.epoch())
            .key(keys.head())
            .key(keys.order())
            .key(keys.asks())
            .invoke_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let pending = order
            .into_iter()
            .filter_map(|(id, seq)| Some((seq, asks.remove(&id)?)))
            .map(|(seq, bytes)| Ok((seq, decode(&bytes)?)))
            .collect::<Result<_, Error>>()?;
        Ok(Snapshot {
            epoch: epoch.unwrap_or_default(),
            head: head.unwrap_or(0),
            pending,
        })
    }

    /// Sessions of a tenant that may have pending asks.
    pub async fn tenant_sessions(&self, tenant: &str) -> Result<Vec<String>, Error> {
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
    pub async fn history(&self, key: &SessionKey) -> Result<Vec<StoredEvent>, Error> {
        let mut conn = self.conn.clone();
        let entries: Vec<Vec<u8>> = conn
            .lrange(SessionKeys::new(key).events(), 0, -1)
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
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, Error> {
        self.held_events(key, epoch, Some(seq)).await
    }

    /// Every event the history (of that epoch) holds, with its sequence number; `None`
    /// when the epoch changed.
    pub async fn recent_events(
        &self,
        key: &SessionKey,
        epoch: &str,
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, Error> {
        self.held_events(key, epoch, None).await
    }

    async fn held_events(
        &self,
        key: &SessionKey,
        epoch: &str,
        after: Option<u64>,
    ) -> Result<Option<Vec<(u64, StoredEvent)>>, Error> {
        let keys = SessionKeys::new(key);
        let mut conn = self.conn.clone();
        let (stored_epoch, head, entries): (Option<String>, Option<u64>, Vec<Vec<u8>>) =
            READ_HISTORY
                .key(keys.epoch())
                .key(keys.head())
                .key(keys.events())
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

#[cfg(test)]
mod tests;
