//! What the nodes keep in Redis besides the sessions' state: each node's lease and
//! wait list, the marks of the asks their calls wait on, the sweep list of asks whose
//! callers went away, presence, exclusive holds, subscriber slots and agent leases.
//! The engine decides when; these send the commands.
//!
//! Several of these writes may fail without harm, each repaired by an expiry: a wait
//! list entry left behind is dropped at the node's next renewal or swept as due; a
//! presence key, an exclusive hold, a subscriber slot or an agent lease that was not
//! removed expires within a lease (`--redis-lease`) since nobody renews it.

use std::time::Duration;

use redis::AsyncCommands;

use super::{RedisStore, now_ms, scripts::TAKE_SLOT, unavailable};
use crate::redis_engine::keys::{
    NODES_KEY, SessionKeys, TenantKeys, WAITS_KEY, node_waits_key, wait_member,
};
use askgate_core::domain::{Error, SessionKey};

/// What a node renews in one round (one pipeline on a single server, one command at a
/// time on a cluster).
#[derive(Debug, Default)]
pub struct Renewal {
    /// Presence keys this node holds ("someone follows this session").
    pub presence: Vec<String>,
    /// Asks resolved here since the last renewal: off the node's wait list.
    pub resolved: Vec<String>,
    /// Whether the node still renews its own lease (a draining node ended it).
    pub alive: bool,
    pub exclusive: Vec<String>,
    /// Subscriber slots: (member, the `subs` sorted set).
    pub slots: Vec<(String, String)>,
    /// Sessions held by their tenant while followed: (the tenant's `held` set, session).
    pub held_sessions: Vec<(String, String)>,
    /// Agent leases: (tenant, agent_id).
    pub agents: Vec<(String, String)>,
}

impl RedisStore {
    fn ms(duration: Duration) -> u64 {
        (duration.as_millis() as u64).max(1)
    }

    /// Starts or renews a node's lease, before any ask it takes can rely on it.
    pub async fn start_node_lease(&self, node_id: &str, lease: Duration) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        conn.zadd(NODES_KEY, node_id, now_ms() + Self::ms(lease))
            .await
            .map_err(unavailable)
    }

    /// Ends a node's lease now (it drains): the survivors take over its wait list at
    /// once. Should this fail, the lease ends by itself since nobody renews it.
    pub async fn end_node_lease(&self, node_id: &str) {
        let mut conn = self.conn.clone();
        if let Err(e) = conn.zadd::<_, _, _, ()>(NODES_KEY, node_id, 0).await {
            tracing::warn!("ending this node's lease failed (it runs out by itself): {e}");
        }
    }

    /// Renews what a node holds, for `lease` (presence for `grace`).
    pub async fn renew(
        &self,
        node_id: &str,
        renewal: &Renewal,
        lease: Duration,
        grace: Duration,
    ) -> Result<(), Error> {
        let (lease_ms, expires) = (Self::ms(lease), now_ms() + Self::ms(lease));
        let mut commands = Vec::new();
        for key in &renewal.presence {
            commands.push(
                redis::cmd("SET")
                    .arg(key)
                    .arg(node_id)
                    .arg("PX")
                    .arg(Self::ms(grace))
                    .to_owned(),
            );
        }
        // The node's lease vouches for every ask it waits on: one command, not one per
        // ask (a node holding 100,000 asks would otherwise keep Redis busy renewing).
        if !renewal.resolved.is_empty() {
            commands.push(redis::Cmd::srem(node_waits_key(node_id), &renewal.resolved));
        }
        if renewal.alive {
            commands.push(redis::Cmd::zadd(NODES_KEY, node_id, expires));
            commands.push(redis::Cmd::pexpire(
                node_waits_key(node_id),
                lease_ms as i64 * 6,
            ));
        }
        for key in &renewal.exclusive {
            commands.push(redis::Cmd::pexpire(key, lease_ms as i64));
        }
        for (member, key) in &renewal.slots {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg(expires)
                    .arg(member)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(key, lease_ms as i64));
        }
        // Followed sessions stay held by their tenant for a lease beyond now; GT: a
        // kept history may hold one longer already.
        for (key, session_id) in &renewal.held_sessions {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(session_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(key, self.idle_ttl().as_millis() as i64));
        }
        for (tenant, agent_id) in &renewal.agents {
            let keys = TenantKeys::new(tenant);
            commands.push(redis::Cmd::pexpire(keys.agent(agent_id), lease_ms as i64));
            commands.push(
                redis::cmd("ZADD")
                    .arg(keys.agents())
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(agent_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(keys.agents(), lease_ms as i64));
        }
        // Keys of many slots: one pipeline on a single server, one by one on a cluster.
        self.conn.run_all(commands).await.map_err(unavailable)
    }

    /// Sets a presence key this node holds, for `grace`.
    pub async fn set_presence(
        &self,
        key: &str,
        node_id: &str,
        grace: Duration,
    ) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(key)
            .arg(node_id)
            .arg("PX")
            .arg(Self::ms(grace))
            .query_async::<()>(&mut conn)
            .await
            .map_err(unavailable)
    }

    /// Whether someone follows the session (its presence, or its tenant's).
    pub async fn attended(&self, key: &SessionKey) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        let present: u64 = redis::cmd("EXISTS")
            .arg(SessionKeys::new(key).attended())
            .arg(TenantKeys::new(&key.tenant).attended())
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(present > 0)
    }

    /// Takes a session's exclusive hold for `node_id`; false when another holds it.
    pub async fn take_exclusive(
        &self,
        hold: &str,
        node_id: &str,
        lease: Duration,
    ) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        let taken: Option<String> = redis::cmd("SET")
            .arg(hold)
            .arg(node_id)
            .arg("NX")
            .arg("PX")
            .arg(Self::ms(lease))
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        Ok(taken.is_some())
    }

    /// Lets an exclusive hold go (else it expires within a lease).
    pub async fn release_exclusive(&self, hold: &str) {
        let mut conn = self.conn.clone();
        if let Err(e) = conn.del::<_, ()>(hold).await {
            tracing::debug!("releasing an exclusive hold failed (it expires): {e}");
        }
    }

    /// Takes one of the `max` slots of a `subs` sorted set for `member`, until a lease
    /// from now; false when all are taken.
    pub async fn take_slot(
        &self,
        subs: &str,
        member: &str,
        max: usize,
        lease: Duration,
    ) -> Result<bool, Error> {
        let now = now_ms();
        let taken: i64 = TAKE_SLOT
            .key(subs)
            .arg(member)
            .arg(now)
            .arg(now + Self::ms(lease))
            .arg(max)
            .arg(Self::ms(lease))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(taken != 0)
    }

    /// Gives a slot back (else it expires within a lease).
    pub async fn release_slot(&self, subs: &str, member: &str) {
        let mut conn = self.conn.clone();
        if let Err(e) = conn.zrem::<_, _, ()>(subs, member).await {
            tracing::debug!("releasing a subscriber slot failed (it expires): {e}");
        }
    }

    /// Lists an ask as waited on by `node_id`: in the node's wait list (for the
    /// survivors, should it die) and in the ask's mark, with its reattach grace.
    pub async fn list_waiter(
        &self,
        node_id: &str,
        key: &SessionKey,
        rpc_id: &str,
        grace: Duration,
        mark_ttl: Duration,
    ) -> Result<(), Error> {
        let mark = SessionKeys::new(key).wait_mark(rpc_id);
        // Keys of several slots: commands at once rather than one pipeline, which a
        // cluster would refuse.
        let commands = vec![
            redis::Cmd::sadd(node_waits_key(node_id), wait_member(key, rpc_id)),
            redis::Cmd::hset(&mark, node_id, grace.as_millis() as u64),
            redis::Cmd::pexpire(&mark, mark_ttl.as_millis() as i64),
        ];
        self.conn.run_all(commands).await.map_err(unavailable)
    }

    /// Undoes [`Self::list_waiter`]: no call waits on the ask at `node_id` any more.
    pub async fn unlist_waiter(
        &self,
        node_id: &str,
        key: &SessionKey,
        rpc_id: &str,
    ) -> Result<(), Error> {
        let commands = vec![
            redis::Cmd::srem(node_waits_key(node_id), wait_member(key, rpc_id)),
            redis::Cmd::hdel(SessionKeys::new(key).wait_mark(rpc_id), node_id),
        ];
        self.conn.run_all(commands).await.map_err(unavailable)
    }

    /// The nodes whose lease is running that wait on the ask.
    pub async fn live_waiters(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<String>, Error> {
        let mut conn = self.conn.clone();
        let nodes: Vec<String> = conn
            .hkeys(SessionKeys::new(key).wait_mark(rpc_id))
            .await
            .map_err(unavailable)?;
        if nodes.is_empty() {
            return Ok(nodes);
        }
        let leases: Vec<Option<u64>> = redis::cmd("ZMSCORE")
            .arg(NODES_KEY)
            .arg(&nodes)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        let now = now_ms();
        Ok(nodes
            .into_iter()
            .zip(leases)
            .filter(|(_, lease)| lease.is_some_and(|until| until > now))
            .map(|(node, _)| node)
            .collect())
    }

    /// Up to `limit` entries of the sweep list that are due, taken off it.
    pub async fn take_due(&self, limit: usize) -> Result<Vec<String>, Error> {
        let mut conn = self.conn.clone();
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(WAITS_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if !due.is_empty() {
            // Another node may sweep the same entries meanwhile: the claim script lets
            // one of them win.
            let _: () = conn.zrem(WAITS_KEY, &due).await.map_err(unavailable)?;
        }
        Ok(due)
    }

    /// Puts a wait list entry back on a node's list (it is back and still waits).
    pub async fn relist(&self, node_id: &str, member: &str) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        conn.sadd(node_waits_key(node_id), member)
            .await
            .map_err(unavailable)
    }

    /// Up to `limit` nodes whose lease has ended.
    pub async fn dead_nodes(&self, limit: usize) -> Result<Vec<String>, Error> {
        let mut conn = self.conn.clone();
        redis::cmd("ZRANGEBYSCORE")
            .arg(NODES_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)
    }

    /// Takes up to `limit` entries off a dead node's wait list, putting each on the
    /// sweep list, due when its reattach grace (as its mark says) is over; forgets the
    /// node once its list is empty. How many were taken.
    pub async fn take_over(&self, node_id: &str, limit: usize) -> Result<usize, Error> {
        let mut conn = self.conn.clone();
        let members: Vec<String> = redis::cmd("SPOP")
            .arg(node_waits_key(node_id))
            .arg(limit)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        if members.is_empty() {
            let _: () = conn.zrem(NODES_KEY, node_id).await.map_err(unavailable)?;
            return Ok(0);
        }
        for member in &members {
            let Some((key, rpc_id)) = crate::redis_engine::keys::parse_wait_member(member) else {
                continue;
            };
            let grace: Option<u64> = conn
                .hget(SessionKeys::new(&key).wait_mark(&rpc_id), node_id)
                .await
                .map_err(unavailable)?;
            let due = now_ms() + grace.unwrap_or(0);
            let _: () = conn
                .zadd(WAITS_KEY, member, due)
                .await
                .map_err(unavailable)?;
        }
        Ok(members.len())
    }

    /// The incarnation and parent of an agent's lease, if it is attached.
    pub async fn agent(
        &self,
        tenant: &str,
        agent_id: &str,
    ) -> Result<(Option<String>, Option<String>), Error> {
        let agent = TenantKeys::new(tenant).agent(agent_id);
        redis::pipe()
            .hget(&agent, "inc")
            .hget(&agent, "parent")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    /// Whether an agent is attached.
    pub async fn agent_attached(&self, tenant: &str, agent_id: &str) -> Result<bool, Error> {
        let mut conn = self.conn.clone();
        conn.exists(TenantKeys::new(tenant).agent(agent_id))
            .await
            .map_err(unavailable)
    }

    /// Ends an agent's lease if it is still `incarnation`'s (else it expires).
    pub async fn end_agent_lease(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let keys = TenantKeys::new(tenant);
        let agent = keys.agent(agent_id);
        let mut conn = self.conn.clone();
        let current: Option<String> = conn.hget(&agent, "inc").await.unwrap_or(None);
        if current.as_deref() == Some(incarnation) {
            let ended: redis::RedisResult<()> = redis::pipe()
                .del(&agent)
                .zrem(keys.agents(), agent_id)
                .query_async(&mut conn)
                .await;
            if let Err(e) = ended {
                tracing::debug!("ending an agent's lease failed (it expires): {e}");
            }
        }
    }

    /// Records an ask of an agent's incarnation, to abort when the agent detaches.
    /// Should this fail, the caller's check after it aborts the ask if the agent left.
    pub async fn add_agent_ask(
        &self,
        tenant: &str,
        agent_id: &str,
        incarnation: &str,
        key: &SessionKey,
        rpc_id: &str,
        keep: Duration,
    ) {
        let set = TenantKeys::new(tenant).agent_asks(agent_id, incarnation);
        let added: redis::RedisResult<()> = redis::pipe()
            .sadd(&set, format!("{}\n{rpc_id}", key.session_id))
            .ignore()
            .pexpire(&set, keep.as_millis() as i64)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await;
        if let Err(e) = added {
            tracing::debug!("recording an agent's ask failed: {e}");
        }
    }

    /// Takes the asks of an agent's incarnation: (session_id, rpc_id) pairs.
    pub async fn take_agent_asks(
        &self,
        tenant: &str,
        agent_id: &str,
        incarnation: &str,
    ) -> Vec<(String, String)> {
        let set = TenantKeys::new(tenant).agent_asks(agent_id, incarnation);
        let mut conn = self.conn.clone();
        let members: Vec<String> = conn.smembers(&set).await.unwrap_or_default();
        if let Err(e) = conn.del::<_, ()>(&set).await {
            tracing::debug!("forgetting an agent's asks failed (the set expires): {e}");
        }
        members
            .into_iter()
            .filter_map(|m| {
                m.split_once('\n')
                    .map(|(s, r)| (s.to_owned(), r.to_owned()))
            })
            .collect()
    }

    /// Publishes on a channel (the fan-out's liveness probe).
    pub async fn publish(&self, channel: &str, message: u64) -> Result<(), Error> {
        redis::cmd(self.conn.publish_command())
            .arg(channel)
            .arg(message)
            .query_async::<u64>(&mut self.conn.clone())
            .await
            .map(drop)
            .map_err(unavailable)
    }
}
