//! The [`Backend`] over Redis: any number of askgate nodes share the state in
//! [`RedisStore`] and see each other's events through [`Fanout`].
//!
//! Node-local parts: the calls waiting on this node (their outcome arrives as the
//! `resolved` event of their session, through a per-session pump), this node's
//! subscribers (live events merged with the session history by sequence number), and
//! short-lived presence keys that this node refreshes while it holds them: "someone
//! follows this session" (the unattended rule), "a call waits for this ask" (the
//! reattach grace), agent leases and exclusive holds. A node that dies stops refreshing,
//! so what it held expires.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{
    Question, Requested, Reset, Resolved, SubscribeResponse, Synced, Unattended,
    subscribe_response::Event,
};
use async_trait::async_trait;
use parking_lot::Mutex;
use redis::{AsyncCommands, Script};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, warn};
use uuid::Uuid;

use super::{
    fanout::{Fanout, LiveEvent, SESSION_BUFFER, TENANT_BUFFER},
    store::{
        RedisConfig, RedisConn, RedisStore, RedisTarget, Registration, SessionKeys, StoredEvent,
        TenantKeys, now_ms,
    },
};
use crate::backend::{
    Attached, Backend, EventStream, Holder, Registered, Scope, Stats, SubscribeOptions,
};
use crate::domain::{AskError, NewAsk, Outcome, SessionKey};

/// Settings of the Redis backend. Its `Debug` shows the URL without its password.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisBackendConfig {
    pub url: String,
    /// `url` lists Redis Cluster nodes (comma-separated).
    pub cluster: bool,
    /// For `rediss://`: a CA certificate (PEM) to trust besides the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    pub store: RedisConfig,
    /// How long a session counts as attended after this node's last subscriber left.
    pub reconnect_grace: Duration,
    /// Events a subscriber may fall behind before it gets `reset`.
    pub subscriber_buffer: usize,
    /// The same for an `all_sessions` subscriber.
    pub tenant_buffer: usize,
    /// How long presence, waiter and agent leases last without a refresh.
    pub lease: Duration,
    /// Subscribers one session may have, over all nodes.
    pub max_subscribers_per_session: usize,
    /// `all_sessions` subscribers one tenant may have, over all nodes.
    pub max_all_sessions_per_tenant: usize,
}

impl std::fmt::Debug for RedisBackendConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackendConfig")
            .field("url", &super::store::redacted_url(&self.url))
            .field("cluster", &self.cluster)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl RedisBackendConfig {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            cluster: false,
            ca_pem: None,
            store: RedisConfig::default(),
            reconnect_grace: Duration::from_secs(5),
            subscriber_buffer: 1024,
            tenant_buffer: 16 * 1024,
            lease: Duration::from_secs(10),
            max_subscribers_per_session: 64,
            max_all_sessions_per_tenant: 64,
        }
    }
}

type Message = Arc<SubscribeResponse>;

/// The calls waiting on this node for one ask.
struct WaitEntry {
    senders: Vec<oneshot::Sender<Outcome>>,
    /// Empty when no retry can ever reattach to the ask.
    request_id: String,
}

/// The calls waiting on this node, by session and then rpc_id: a session's pump asks
/// whether anything here still waits on it at every event, which must not cost a scan
/// of every ask the node holds.
#[derive(Default)]
struct Waiters {
    by_session: HashMap<SessionKey, HashMap<String, WaitEntry>>,
    len: usize,
}

impl Waiters {
    /// The entry of (key, rpc_id), made by `new` when there is none.
    fn entry(
        &mut self,
        key: &SessionKey,
        rpc_id: &str,
        new: impl FnOnce() -> WaitEntry,
    ) -> &mut WaitEntry {
        use std::collections::hash_map::Entry;
        match self
            .by_session
            .entry(key.clone())
            .or_default()
            .entry(rpc_id.to_owned())
        {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                self.len += 1;
                entry.insert(new())
            }
        }
    }

    fn get_mut(&mut self, key: &SessionKey, rpc_id: &str) -> Option<&mut WaitEntry> {
        self.by_session.get_mut(key)?.get_mut(rpc_id)
    }

    fn remove(&mut self, key: &SessionKey, rpc_id: &str) -> Option<WaitEntry> {
        let asks = self.by_session.get_mut(key)?;
        let removed = asks.remove(rpc_id)?;
        if asks.is_empty() {
            self.by_session.remove(key);
        }
        self.len -= 1;
        Some(removed)
    }

    fn waiting_on(&self, key: &SessionKey) -> bool {
        self.by_session.contains_key(key)
    }

    fn rpc_ids(&self, key: &SessionKey) -> Vec<String> {
        self.by_session
            .get(key)
            .map(|asks| asks.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn iter(&self) -> impl Iterator<Item = (&SessionKey, &String, &WaitEntry)> {
        self.by_session
            .iter()
            .flat_map(|(key, asks)| asks.iter().map(move |(rpc_id, e)| (key, rpc_id, e)))
    }
}

/// Asks whose waiting calls are gone (their node died or drained, or a caller left with
/// a reattach grace), scored by when their grace is over: then, unless a live node
/// waits on the ask again, a sweep resolves it ABORTED.
const WAITS_KEY: &str = "ag:waits";

/// Every node's lease: node id scored by when it ends unless the node renews it. A node
/// renews only this (and its own wait list's expiry), however many asks it holds;
/// the survivors of a node whose lease ended take over its wait list.
const NODES_KEY: &str = "ag:nodes";

/// The asks a node's calls wait on, for the survivors should it die.
fn node_waits_key(node_id: &str) -> String {
    format!("ag:node:{node_id}:waits")
}

fn wait_mark(key: &SessionKey, rpc_id: &str) -> String {
    SessionKeys::new(key).wait_mark(rpc_id)
}

fn wait_member(key: &SessionKey, rpc_id: &str) -> String {
    format!("{}\u{1f}{}\u{1f}{rpc_id}", key.tenant, key.session_id)
}

fn parse_wait_member(member: &str) -> Option<(SessionKey, String)> {
    let mut parts = member.split('\u{1f}');
    let (tenant, session, rpc_id) = (parts.next()?, parts.next()?, parts.next()?);
    Some((SessionKey::new(tenant, session), rpc_id.to_owned()))
}
/// An agent lease held on this node: its incarnation, and who to tell when a newer
/// attach replaces it.
type LocalLease = (String, Option<oneshot::Sender<()>>);
type WaiterKey = (SessionKey, String);

/// The Redis [`Backend`].
#[derive(Clone)]
pub struct RedisBackend {
    node: Arc<Node>,
}

struct Node {
    id: String,
    store: RedisStore,
    fanout: Fanout,
    conn: RedisConn,
    config: RedisBackendConfig,
    /// Calls waiting on this node, by (session, rpc_id).
    waiters: Mutex<Waiters>,
    /// Asks resolved since the last renewal, to take off this node's wait list then.
    resolved_here: Mutex<Vec<String>>,
    /// Sessions whose pump delivers outcomes to this node's waiters.
    pumps: Mutex<HashSet<SessionKey>>,
    /// Presence keys this node keeps alive, with how many local holders each has.
    attended: Mutex<HashMap<String, usize>>,
    /// Agent leases held on this node: (tenant, agent_id) → incarnation, and who to tell
    /// when a newer attach replaces it.
    leases: Mutex<HashMap<(String, String), LocalLease>>,
    exclusive: Mutex<HashMap<String, String>>,
    /// This node's subscriber slots (see [`SubscriberSlot`]): member → the session's
    /// (or the tenant's) `subs` key.
    subscribers: Mutex<HashMap<String, String>>,
    /// Sessions this node's subscribers follow, in their tenant's held sessions:
    /// (that key, session_id) → how many local subscribers. Renewed with the leases.
    held_sessions: Mutex<HashMap<(String, String), usize>>,
    closed: AtomicBool,
    /// Set at shutdown: subscriptions deliver what was written, then end.
    closing: tokio::sync::watch::Sender<bool>,
}

fn redis_error(error: redis::RedisError) -> AskError {
    super::store::unavailable(error)
}

fn message(cursor: String, event: Event) -> Message {
    Arc::new(SubscribeResponse {
        cursor,
        event: Some(event),
    })
}

fn cursor(epoch: &str, seq: u64) -> String {
    format!("{epoch}-{seq}")
}

fn parse_cursor(cursor: &str) -> Option<(&str, u64)> {
    let (epoch, seq) = cursor.rsplit_once('-')?;
    Some((epoch, seq.parse().ok()?))
}

fn outcome_of(resolved: &Resolved) -> Outcome {
    Outcome {
        resolution: resolved.reason(),
        answers: resolved.answers.clone(),
        resolved_by: resolved.resolved_by.clone(),
        cancel_reason: Some(resolved.cancel_reason.clone()).filter(|r| !r.is_empty()),
    }
}

fn stored_to_event(event: &StoredEvent) -> Event {
    match event {
        StoredEvent::Requested(r) => Event::Requested(r.clone()),
        StoredEvent::Resolved(r) => Event::Resolved(r.clone()),
    }
}

impl RedisBackend {
    pub async fn connect(config: RedisBackendConfig) -> anyhow::Result<Self> {
        let target = RedisTarget {
            url: config.url.clone(),
            cluster: config.cluster,
            ca_pem: config.ca_pem.clone(),
        };
        let store = RedisStore::connect(target.clone(), config.store.clone()).await?;
        let fanout = Fanout::connect(target.clone()).await?;
        let mut conn = target.connect(None).await?;
        let id = Uuid::new_v4().simple().to_string();
        // The node's lease, before any ask it takes can rely on it.
        let _: () = conn
            .zadd(NODES_KEY, &id, now_ms() + config.lease.as_millis() as u64)
            .await?;
        let node = Arc::new(Node {
            id,
            store,
            fanout,
            conn,
            config,
            waiters: Mutex::default(),
            resolved_here: Mutex::default(),
            pumps: Mutex::default(),
            attended: Mutex::default(),
            leases: Mutex::default(),
            exclusive: Mutex::default(),
            subscribers: Mutex::default(),
            held_sessions: Mutex::default(),
            closed: AtomicBool::new(false),
            closing: tokio::sync::watch::channel(false).0,
        });
        tokio::spawn(refresh_until_dropped(Arc::downgrade(&node)));
        Ok(Self { node })
    }
}

/// Keeps this node's presence keys, waiter marks, agent leases and exclusive holds
/// alive, and notices leases that a newer attach on another node replaced.
async fn refresh_until_dropped(node: Weak<Node>) {
    loop {
        let Some(node) = node.upgrade() else {
            return;
        };
        let period = (node.config.reconnect_grace / 3)
            .min(node.config.lease / 3)
            .max(Duration::from_millis(50));
        if let Err(e) = node.refresh().await {
            warn!("refreshing redis leases failed: {e}");
        }
        match node.sweep_abandoned().await {
            Ok(abandoned) => {
                for (key, rpc_id) in abandoned {
                    if node.claim(&key, &rpc_id, Outcome::aborted()).await.is_ok() {
                        debug!(%rpc_id, "aborted an ask its node abandoned");
                    }
                }
            }
            Err(e) => warn!("sweeping abandoned asks failed: {e}"),
        }
        drop(node);
        tokio::time::sleep(period).await;
    }
}

impl Node {
    fn grace_ms(&self) -> u64 {
        (self.config.reconnect_grace.as_millis() as u64).max(1)
    }

    fn lease_ms(&self) -> u64 {
        (self.config.lease.as_millis() as u64).max(1)
    }

    async fn refresh(&self) -> Result<(), AskError> {
        let mut commands = Vec::new();
        for key in self
            .attended
            .lock()
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, _)| k)
        {
            commands.push(
                redis::cmd("SET")
                    .arg(key)
                    .arg(&self.id)
                    .arg("PX")
                    .arg(self.grace_ms())
                    .to_owned(),
            );
        }
        // The node's lease vouches for every ask it waits on: one command, not one per
        // ask (a node holding 100,000 asks would otherwise keep Redis busy renewing).
        // A drained node has ended its lease itself and must not renew it.
        let expires = now_ms() + self.lease_ms();
        let resolved = std::mem::take(&mut *self.resolved_here.lock());
        if !resolved.is_empty() {
            commands.push(redis::Cmd::srem(node_waits_key(&self.id), &resolved));
        }
        if !self.closed.load(Ordering::Acquire) {
            commands.push(redis::Cmd::zadd(NODES_KEY, &self.id, expires));
            commands.push(redis::Cmd::pexpire(
                node_waits_key(&self.id),
                self.lease_ms() as i64 * 6,
            ));
        }
        for key in self.exclusive.lock().keys() {
            commands.push(redis::Cmd::pexpire(key, self.lease_ms() as i64));
        }
        for (member, key) in self.subscribers.lock().iter() {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg(expires)
                    .arg(member)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(key, self.lease_ms() as i64));
        }
        // Followed sessions stay held by their tenant for a lease beyond now; GT: a
        // kept history may hold one longer already.
        for (key, session_id) in self.held_sessions.lock().keys() {
            commands.push(
                redis::cmd("ZADD")
                    .arg(key)
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(session_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(
                key,
                self.store.idle_ttl().as_millis() as i64,
            ));
        }
        let leases: Vec<((String, String), String)> = self
            .leases
            .lock()
            .iter()
            .map(|(k, (inc, _))| (k.clone(), inc.clone()))
            .collect();
        for ((tenant, agent_id), _) in &leases {
            commands.push(redis::Cmd::pexpire(
                agent_key(tenant, agent_id),
                self.lease_ms() as i64,
            ));
            let agents = TenantKeys::new(tenant).agents();
            commands.push(
                redis::cmd("ZADD")
                    .arg(&agents)
                    .arg("XX")
                    .arg("GT")
                    .arg(expires)
                    .arg(agent_id)
                    .to_owned(),
            );
            commands.push(redis::Cmd::pexpire(agents, self.lease_ms() as i64));
        }
        // Keys of many slots: one pipeline on a single server, one by one on a cluster.
        if let Err(e) = self.conn.run_all(commands).await {
            // Taken off the list with the next renewal instead.
            self.resolved_here.lock().extend(resolved);
            return Err(redis_error(e));
        }
        let mut conn = self.conn.clone();
        // A newer attach elsewhere replaced one of ours: that lease is over.
        for ((tenant, agent_id), incarnation) in leases {
            let current: Option<String> = conn
                .hget(agent_key(&tenant, &agent_id), "inc")
                .await
                .map_err(redis_error)?;
            if current.as_deref() != Some(incarnation.as_str())
                && let Some((_, superseded)) = self.leases.lock().remove(&(tenant, agent_id))
                && let Some(superseded) = superseded
            {
                let _ = superseded.send(());
            }
        }
        Ok(())
    }

    /// Holds a presence key (renewed by the refresh loop while held) and sets it now,
    /// so the session counts as attended from this subscription on.
    async fn hold_attended(&self, key: String) -> Result<(), AskError> {
        *self.attended.lock().entry(key.clone()).or_default() += 1;
        let mut conn = self.conn.clone();
        redis::cmd("SET")
            .arg(&key)
            .arg(&self.id)
            .arg("PX")
            .arg(self.grace_ms())
            .query_async::<()>(&mut conn)
            .await
            .map_err(redis_error)
    }

    /// Admits a followed session among its tenant's sessions holding state (refused
    /// TOO_MANY_SESSIONS when the tenant holds as many as it may) and renews it while
    /// this node follows it.
    async fn hold_session(&self, key: &SessionKey) -> Result<(String, String), AskError> {
        self.store
            .admit_session(key, now_ms() + self.lease_ms())
            .await?;
        let held = (
            TenantKeys::new(&key.tenant).held_sessions(),
            key.session_id.to_string(),
        );
        *self.held_sessions.lock().entry(held.clone()).or_default() += 1;
        Ok(held)
    }

    fn release_session(&self, held: (String, String)) {
        let mut sessions = self.held_sessions.lock();
        if let Some(count) = sessions.get_mut(&held) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                sessions.remove(&held);
            }
        }
    }

    fn release_attended(&self, key: &str) {
        let mut attended = self.attended.lock();
        if let Some(count) = attended.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                // The key itself expires after the reconnect grace: that is the grace.
                attended.remove(key);
            }
        }
    }

    /// Semantics 7: the agent is attached with that incarnation, its parent is not.
    async fn check_caller(
        &self,
        tenant: &str,
        agent: &askgate_proto::v1::AgentRef,
    ) -> Result<(), AskError> {
        let mut conn = self.conn.clone();
        let (incarnation, parent): (Option<String>, Option<String>) = redis::pipe()
            .hget(agent_key(tenant, &agent.agent_id), "inc")
            .hget(agent_key(tenant, &agent.agent_id), "parent")
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        if incarnation.as_deref() != Some(agent.incarnation.as_str()) {
            return Err(AskError::CallerNotLive);
        }
        if let Some(parent) = parent.filter(|p| !p.is_empty()) {
            let live: bool = conn
                .exists(agent_key(tenant, &parent))
                .await
                .map_err(redis_error)?;
            if live {
                return Err(AskError::DelegatedCaller);
            }
        }
        Ok(())
    }

    fn add_waiter(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        ask: &WaitSpec,
    ) -> oneshot::Receiver<Outcome> {
        let (outcome_tx, outcome_rx) = oneshot::channel();
        self.waiters
            .lock()
            .entry(key, rpc_id, || WaitEntry {
                senders: Vec::new(),
                request_id: ask.request_id.clone(),
            })
            .senders
            .push(outcome_tx);
        outcome_rx
    }

    /// First wins (the claim script), then local waiters get the outcome at once (they
    /// would hear it from the pump too) and the ask leaves the sweep list, off the
    /// caller's path (a member left behind is swept as due, harmlessly).
    async fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), AskError> {
        let resolved = resolved_of(key, rpc_id, &outcome);
        // The script also deletes the ask's wait mark. Should the ask be on the sweep
        // list (its first node died), it stays there until due, when the sweep finds
        // it resolved: nothing is added to every claim for that rare case.
        self.store.claim(key, &resolved).await?;
        self.deliver(key, &resolved);
        Ok(())
    }

    /// Asks whose callers all went away: once their reattach grace is over and no live
    /// node waits on them, they resolve ABORTED. Every node sweeps; the claim script
    /// lets one win.
    async fn sweep_abandoned(&self) -> Result<Vec<(SessionKey, String)>, AskError> {
        let mut conn = self.conn.clone();
        self.take_over_dead_nodes(&mut conn).await?;
        let due: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(WAITS_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(100)
            .query_async(&mut conn)
            .await
            .map_err(redis_error)?;
        let mut abandoned = Vec::new();
        for member in due {
            let _: Result<(), _> = conn.zrem(WAITS_KEY, &member).await;
            let Some((key, rpc_id)) = parse_wait_member(&member) else {
                continue;
            };
            let waiting = self.live_waiters(&mut conn, &key, &rpc_id).await?;
            if waiting.is_empty() {
                abandoned.push((key, rpc_id));
            }
            // A node whose lease ran out while Redis was out of its reach had its list
            // taken over; it is back and still waits: the ask goes back on its list.
            for node_id in waiting {
                let _: () = conn
                    .sadd(node_waits_key(&node_id), &member)
                    .await
                    .map_err(redis_error)?;
            }
        }
        Ok(abandoned)
    }

    /// The asks of nodes whose lease ended (they died, or drained): each goes on the
    /// sweep list, due when its reattach grace is over; a call that reattached on a
    /// live node meanwhile keeps it. A batch per node per sweep; the node is forgotten
    /// once its list is empty.
    async fn take_over_dead_nodes(&self, conn: &mut RedisConn) -> Result<(), AskError> {
        let dead: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(NODES_KEY)
            .arg("-inf")
            .arg(now_ms())
            .arg("LIMIT")
            .arg(0)
            .arg(10)
            .query_async(conn)
            .await
            .map_err(redis_error)?;
        for node_id in dead.into_iter().filter(|id| *id != self.id) {
            let waits = node_waits_key(&node_id);
            let members: Vec<String> = redis::cmd("SPOP")
                .arg(&waits)
                .arg(100)
                .query_async(conn)
                .await
                .map_err(redis_error)?;
            if members.is_empty() {
                let _: () = conn.zrem(NODES_KEY, &node_id).await.map_err(redis_error)?;
                continue;
            }
            for member in members {
                let Some((key, rpc_id)) = parse_wait_member(&member) else {
                    continue;
                };
                let grace: Option<u64> = conn
                    .hget(wait_mark(&key, &rpc_id), &node_id)
                    .await
                    .map_err(redis_error)?;
                let due = now_ms() + grace.unwrap_or(0);
                let _: () = conn
                    .zadd(WAITS_KEY, &member, due)
                    .await
                    .map_err(redis_error)?;
            }
        }
        Ok(())
    }

    /// The nodes whose lease is running that wait on the ask.
    async fn live_waiters(
        &self,
        conn: &mut RedisConn,
        key: &SessionKey,
        rpc_id: &str,
    ) -> Result<Vec<String>, AskError> {
        let nodes: Vec<String> = conn
            .hkeys(wait_mark(key, rpc_id))
            .await
            .map_err(redis_error)?;
        if nodes.is_empty() {
            return Ok(nodes);
        }
        let leases: Vec<Option<u64>> = redis::cmd("ZMSCORE")
            .arg(NODES_KEY)
            .arg(&nodes)
            .query_async(conn)
            .await
            .map_err(redis_error)?;
        let now = now_ms();
        Ok(nodes
            .into_iter()
            .zip(leases)
            .filter(|(_, lease)| lease.is_some_and(|until| until > now))
            .map(|(node, _)| node)
            .collect())
    }

    /// Lists an ask as waited on here: in this node's wait list (for the survivors,
    /// should it die) and in the ask's mark, with its reattach grace.
    fn wait_commands(&self, key: &SessionKey, rpc_id: &str, ask: &WaitSpec) -> Vec<redis::Cmd> {
        let mark = wait_mark(key, rpc_id);
        vec![
            redis::Cmd::sadd(node_waits_key(&self.id), wait_member(key, rpc_id)),
            redis::Cmd::hset(&mark, &self.id, ask.grace.as_millis() as u64),
            redis::Cmd::pexpire(&mark, ask.mark_ttl.as_millis() as i64),
        ]
    }

    /// Undoes [`Self::wait_commands`]: no call waits on the ask here any more.
    fn wait_commands_undone(&self, key: &SessionKey, rpc_id: &str) -> Vec<redis::Cmd> {
        vec![
            redis::Cmd::srem(node_waits_key(&self.id), wait_member(key, rpc_id)),
            redis::Cmd::hdel(wait_mark(key, rpc_id), &self.id),
        ]
    }

    /// [`Self::wait_commands_undone`], off the caller's path.
    fn unlist(&self, key: &SessionKey, rpc_id: &str) {
        let (conn, commands) = (self.conn.clone(), self.wait_commands_undone(key, rpc_id));
        tokio::spawn(async move {
            let _ = conn.run_all(commands).await;
        });
    }

    /// Hands an outcome to the calls waiting for it here.
    fn deliver(&self, key: &SessionKey, resolved: &Resolved) {
        if let Some(entry) = self.waiters.lock().remove(key, &resolved.rpc_id) {
            // Off this node's wait list with the next renewal, in one command.
            self.resolved_here
                .lock()
                .push(wait_member(key, &resolved.rpc_id));
            let outcome = outcome_of(resolved);
            for waiter in entry.senders {
                let _ = waiter.send(outcome.clone());
            }
        }
    }

    /// Waiters whose ask resolved while this node was not listening (a lag, a
    /// reconnect): their outcome is in the history, or recorded.
    async fn recover_waiters(&self, key: &SessionKey) {
        let rpc_ids = self.waiters.lock().rpc_ids(key);
        if rpc_ids.is_empty() {
            return;
        }
        let Ok(events) = self.store.history(key).await else {
            return;
        };
        for event in events {
            if let StoredEvent::Resolved(resolved) = event
                && rpc_ids.contains(&resolved.rpc_id)
            {
                self.deliver(key, &resolved);
            }
        }
    }
}

fn agent_key(tenant: &str, agent_id: &str) -> String {
    TenantKeys::new(tenant).agent(agent_id)
}

fn agent_asks_key(tenant: &str, agent_id: &str, incarnation: &str) -> String {
    TenantKeys::new(tenant).agent_asks(agent_id, incarnation)
}

/// Delivers the outcomes of a session's asks to the calls waiting on this node, for
/// as long as any wait.
async fn pump(node: Arc<Node>, key: SessionKey, mut live: broadcast::Receiver<Arc<LiveEvent>>) {
    /// Ticks to keep re-reading the history after a pub/sub reconnect (its
    /// resubscription takes a moment).
    const RECOVERY_TICKS: u32 = 5;
    /// How long the pump (and its channel subscription) outlives the session's last
    /// waiter here: an agent asking again soon needs no new SUBSCRIBE.
    const LINGER: Duration = Duration::from_secs(2);
    let channel = SessionKeys::new(&key).channel();
    let mut disconnections = node.fanout.disconnections();
    let mut recovering = 0;
    let mut idle_since: Option<tokio::time::Instant> = None;
    loop {
        {
            // Decide to stop under the pumps lock: a register that adds a waiter and
            // then finds this pump gone starts a new one, never relies on a dying one.
            let mut pumps = node.pumps.lock();
            let waiting = node.waiters.lock().waiting_on(&key);
            if waiting {
                idle_since = None;
            } else if idle_since.is_some_and(|t| t.elapsed() >= LINGER) {
                pumps.remove(&key);
                break;
            } else {
                idle_since.get_or_insert_with(tokio::time::Instant::now);
            }
        }
        match tokio::time::timeout(Duration::from_secs(1), live.recv()).await {
            Ok(Ok(event)) => {
                if let StoredEvent::Resolved(resolved) = &event.event {
                    node.deliver(&key, resolved);
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => node.recover_waiters(&key).await,
            Ok(Err(broadcast::error::RecvError::Closed)) => break,
            Err(_) => {
                let seen = node.fanout.disconnections();
                if seen != disconnections {
                    disconnections = seen;
                    recovering = RECOVERY_TICKS;
                }
                if recovering > 0 {
                    recovering -= 1;
                    node.recover_waiters(&key).await;
                }
            }
        }
    }
    drop(live);
    node.fanout.release(&channel).await;
}

/// What a new waiter needs to know of its ask.
struct WaitSpec {
    grace: Duration,
    request_id: String,
    /// How long the ask's mark is kept: past the ask's deadline, its grace and a lease.
    mark_ttl: Duration,
}

/// What a follower hands its subscriber's stream: a live event, or a whole replay at
/// once (one hand-over between tasks for thousands of pending asks, rather than one
/// per event once the buffer is full).
enum Delivery {
    One(Message),
    Many(VecDeque<Message>),
}

type DeliveryTx = mpsc::Sender<Result<Delivery, AskError>>;

/// Where a subscriber's events go, and what it has sent so far.
struct Follower {
    node: Arc<Node>,
    events_tx: DeliveryTx,
    /// Changes when this node's pub/sub connection is lost: what was published
    /// meanwhile never arrived, so the subscription ends UNAVAILABLE and the
    /// subscriber resumes from its cursor (through a healthy node, or once Redis is back).
    lost: tokio::sync::watch::Receiver<u64>,
}

/// Ends a subscription whose follower failed with its error (the subscriber gets the
/// status, e.g. UNAVAILABLE, instead of a clean end it would take for a shutdown).
async fn fail_subscription(events_tx: &DeliveryTx, ended: Result<(), AskError>) {
    if let Err(e) = ended {
        debug!("subscription failed: {e}");
        let _ = events_tx.send(Err(e)).await;
    }
}

fn lost_subscription() -> AskError {
    AskError::BackendUnavailable(
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
    match event {
        StoredEvent::Requested(r) => &r.session_id,
        StoredEvent::Resolved(r) => &r.session_id,
    }
}

/// How far before an `all_sessions` subscription's snapshot the events of a session it
/// did not cover still count: the nodes' clock skew and the events in flight.
const UNSEEN_MARGIN: Duration = Duration::from_secs(2);

/// The events of a session first seen by an `all_sessions` subscriber: those since
/// `since` (by the ask's own timestamps), never a `resolved` without its `requested`.
/// The history holds the live event that revealed the session (the scripts write
/// before they publish).
fn since_subscribed(events: Vec<(u64, StoredEvent)>, since: SystemTime) -> Vec<(u64, StoredEvent)> {
    let at = |t: &Option<prost_types::Timestamp>| {
        t.and_then(|t| SystemTime::try_from(t).ok())
            .unwrap_or(SystemTime::UNIX_EPOCH)
    };
    let mut earlier = HashSet::new();
    let mut batch = Vec::new();
    for (seq, event) in events {
        match &event {
            StoredEvent::Requested(r) if at(&r.requested_at) < since => {
                earlier.insert(r.rpc_id.clone());
            }
            StoredEvent::Resolved(r) if earlier.contains(&r.rpc_id) => {}
            _ => batch.push((seq, event)),
        }
    }
    batch
}

/// What forwarding a live event did.
enum Forwarded {
    Sent,
    /// The subscriber's buffer is full: it fell behind and must be reset.
    Behind,
    Closed,
}

impl Follower {
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
    async fn snapshot_session(&self, key: &SessionKey) -> Result<Option<(String, u64)>, AskError> {
        let snapshot = self.node.store.snapshot(key).await?;
        let mut replay: VecDeque<Message> = snapshot
            .pending
            .into_iter()
            .map(|(seq, requested)| {
                message(cursor(&snapshot.epoch, seq), Event::Requested(requested))
            })
            .collect();
        let synced = Event::Synced(Synced { resumed: false });
        replay.push_back(message(cursor(&snapshot.epoch, snapshot.head), synced));
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
    ) -> Result<Option<u64>, AskError> {
        let Some(events) = self.node.store.events_after(key, epoch, last).await? else {
            return Ok(None);
        };
        let last = events.last().map_or(last, |(seq, _)| *seq);
        let replay = events
            .into_iter()
            .map(|(seq, event)| message(cursor(epoch, seq), stored_to_event(&event)))
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
        mut closing: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), AskError> {
        let resumed = match after.as_deref().and_then(parse_cursor) {
            Some((e, seq)) => self
                .node
                .store
                .events_after(&key, e, seq)
                .await?
                .map(|events| (e.to_owned(), seq, events)),
            None => None,
        };
        let (mut epoch, mut last) = match resumed {
            Some((epoch, last, events)) => {
                let last = events.last().map_or(last, |(seq, _)| *seq);
                let mut replay: VecDeque<Message> = events
                    .into_iter()
                    .map(|(seq, event)| message(cursor(&epoch, seq), stored_to_event(&event)))
                    .collect();
                let synced = Event::Synced(Synced { resumed: true });
                replay.push_back(message(cursor(&epoch, last), synced));
                if !self.send_all(replay).await {
                    return Ok(());
                }
                (epoch, last)
            }
            None => {
                if after.is_some()
                    && !self
                        .send(message(String::new(), Event::Reset(Reset {})))
                        .await
                {
                    return Ok(());
                }
                match self.snapshot_session(&key).await? {
                    Some(at) => at,
                    None => return Ok(()),
                }
            }
        };
        loop {
            let event = tokio::select! {
                () = self.events_tx.closed() => return Ok(()),
                _ = self.lost.changed() => return Err(lost_subscription()),
                _ = closing.changed() => {
                    // Shutdown: deliver what was written up to now, then end.
                    if !epoch.is_empty() {
                        self.catch_up(&key, &epoch, last).await?;
                    }
                    return Ok(());
                }
                event = live.recv() => event,
            };
            let resync = match event {
                Ok(event) => {
                    if epoch.is_empty() {
                        epoch = event.epoch.clone();
                    }
                    if event.epoch != epoch {
                        true
                    } else if event.seq <= last {
                        false
                    } else if event.seq == last + 1 {
                        match self.forward(message(
                            cursor(&epoch, event.seq),
                            stored_to_event(&event.event),
                        )) {
                            Forwarded::Sent => {
                                last = event.seq;
                                false
                            }
                            Forwarded::Behind => true,
                            Forwarded::Closed => return Ok(()),
                        }
                    } else {
                        match self.catch_up(&key, &epoch, last).await? {
                            Some(new_last) => {
                                last = new_last;
                                false
                            }
                            None => true,
                        }
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => true,
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            };
            if resync {
                if !self
                    .send(message(String::new(), Event::Reset(Reset {})))
                    .await
                {
                    return Ok(());
                }
                (epoch, last) = match self.snapshot_session(&key).await? {
                    Some(at) => at,
                    None => return Ok(()),
                };
            }
        }
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
    ) -> Result<TenantStep, AskError> {
        let session_id = session_of(&event.event);
        let key = || SessionKey::new(tenant, session_id);
        let store = &self.node.store;
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
        self.forward(message(cursor(epoch, seq), stored_to_event(stored)))
    }

    /// All sessions of a tenant: a snapshot of every session's pending asks (oldest
    /// first), then live events, skipping those the snapshot already covered.
    async fn tenant(
        mut self,
        tenant: String,
        reset_first: bool,
        mut live: broadcast::Receiver<Arc<LiveEvent>>,
        mut closing: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), AskError> {
        // session_id → (epoch, last sequence number sent or covered)
        let mut seen: HashMap<String, (String, u64)> = HashMap::new();
        let mut first = reset_first;
        loop {
            if first
                && !self
                    .send(message(String::new(), Event::Reset(Reset {})))
                    .await
            {
                return Ok(());
            }
            first = true;
            seen.clear();
            // Events of sessions the snapshot does not cover count from here on (less a
            // margin for the nodes' clocks and the events in flight).
            let since = SystemTime::now() - UNSEEN_MARGIN;
            let mut pending = Vec::new();
            for session_id in self.node.store.tenant_sessions(&tenant).await? {
                let key = SessionKey::new(tenant.as_str(), session_id.as_str());
                let snapshot = self.node.store.snapshot(&key).await?;
                for (seq, requested) in snapshot.pending {
                    pending.push((snapshot.epoch.clone(), seq, requested));
                }
                seen.insert(session_id, (snapshot.epoch, snapshot.head));
            }
            pending.sort_by_key(|(_, _, r)| r.requested_at.map(|t| (t.seconds, t.nanos)));
            let mut replay: VecDeque<Message> = pending
                .into_iter()
                .map(|(epoch, seq, requested)| {
                    message(cursor(&epoch, seq), Event::Requested(requested))
                })
                .collect();
            replay.push_back(message(
                String::new(),
                Event::Synced(Synced { resumed: false }),
            ));
            if !self.send_all(replay).await {
                return Ok(());
            }
            loop {
                let event = tokio::select! {
                    () = self.events_tx.closed() => return Ok(()),
                    _ = self.lost.changed() => return Err(lost_subscription()),
                    _ = closing.changed() => {
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

/// Takes one of a session's subscriber slots, or finds them all taken.
static TAKE_SLOT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("scripts/take_slot.lua")));

/// One of the `max` subscriber slots of a session (`max_subscribers_per_session`) or of
/// a tenant's `all_sessions` streams (`max_all_sessions_per_tenant`), counted over
/// every node: a member of a `subs` sorted set, scored by when it expires. The node's
/// refresh loop renews it; a dead node's slots expire with its lease.
struct SubscriberSlot {
    node: Arc<Node>,
    member: String,
}

impl SubscriberSlot {
    async fn take(
        node: &Arc<Node>,
        subs: String,
        max: usize,
        full: fn(usize) -> AskError,
    ) -> Result<Self, AskError> {
        let member = format!("{}:{}", node.id, Uuid::new_v4().simple());
        let taken: i64 = TAKE_SLOT
            .key(&subs)
            .arg(&member)
            .arg(now_ms())
            .arg(now_ms() + node.lease_ms())
            .arg(max)
            .arg(node.lease_ms())
            .invoke_async(&mut node.conn.clone())
            .await
            .map_err(redis_error)?;
        if taken == 0 {
            return Err(full(max));
        }
        node.subscribers.lock().insert(member.clone(), subs);
        Ok(Self {
            node: node.clone(),
            member,
        })
    }
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        let Some(subs) = self.node.subscribers.lock().remove(&self.member) else {
            return;
        };
        let (node, member) = (self.node.clone(), std::mem::take(&mut self.member));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _: Result<(), _> = node.conn.clone().zrem(&subs, &member).await;
            });
        }
    }
}

/// Releases what a subscription held on this node when its stream is dropped.
struct Held {
    node: Arc<Node>,
    channel: String,
    attended: String,
    exclusive: Option<String>,
    _slot: Option<SubscriberSlot>,
    /// The session in its tenant's held sessions (see `Node::hold_session`).
    held_session: Option<(String, String)>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.task.abort();
        self.node.release_attended(&self.attended);
        if let Some(held) = self.held_session.take() {
            // No command: the entry expires a lease after its last renewal.
            self.node.release_session(held);
        }
        let node = self.node.clone();
        let channel = std::mem::take(&mut self.channel);
        let exclusive = self.exclusive.take();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(key) = exclusive {
                    node.exclusive.lock().remove(&key);
                    let mut conn = node.conn.clone();
                    let _: Result<(), _> = conn.del(&key).await;
                }
                node.fanout.release(&channel).await;
            });
        }
    }
}

/// A subscription's stream: the follower task's output, holding its resources.
struct HeldStream {
    events: ReceiverStream<Result<Delivery, AskError>>,
    /// The rest of a replay delivered at once.
    replay: VecDeque<Message>,
    _held: Held,
}

impl tokio_stream::Stream for HeldStream {
    type Item = Result<Message, AskError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        loop {
            if let Some(message) = self.replay.pop_front() {
                return Poll::Ready(Some(Ok(message)));
            }
            return match std::pin::Pin::new(&mut self.events).poll_next(cx) {
                Poll::Ready(Some(Ok(Delivery::One(message)))) => Poll::Ready(Some(Ok(message))),
                Poll::Ready(Some(Ok(Delivery::Many(messages)))) => {
                    self.replay = messages;
                    continue;
                }
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl RedisBackend {
    async fn register_now(&self, ask: NewAsk) -> Result<Registered, AskError> {
        let node = &self.node;
        if node.closed.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        let key = ask.key.clone();
        if let Some(agent) = &ask.agent {
            node.check_caller(&key.tenant, agent).await?;
        }
        let rpc_id = Uuid::now_v7().to_string();
        let waits_at_most = ask
            .expires_at
            .and_then(|t| t.duration_since(SystemTime::now()).ok())
            .unwrap_or(node.config.lease * 6);
        let spec = WaitSpec {
            grace: ask.reattach_grace,
            request_id: ask.request_id.clone(),
            mark_ttl: waits_at_most + ask.reattach_grace + node.config.lease * 2,
        };
        // On this node's wait list before the ask exists: if this node dies at any point
        // after the script, the survivors still find the ask. In the same round trip,
        // the unattended check (Semantics 8).
        let conn = node.conn.clone();
        let must_be_attended = ask.if_unattended == Unattended::Fail;
        // Keys of several slots (this node's list, the ask's mark, the session's and the
        // tenant's presence): commands at once rather than one pipeline, which a
        // cluster would refuse.
        let listed = conn.run_all(node.wait_commands(&key, &rpc_id, &spec));
        let attended = async {
            match must_be_attended {
                true => {
                    redis::cmd("EXISTS")
                        .arg(SessionKeys::new(&key).key("attended"))
                        .arg(TenantKeys::new(&key.tenant).attended())
                        .query_async::<u64>(&mut conn.clone())
                        .await
                }
                false => Ok(1),
            }
        };
        let (listed, attended) = tokio::join!(listed, attended);
        listed.map_err(redis_error)?;
        let attended = attended.map_err(redis_error)?;
        if attended == 0 {
            node.unlist(&key, &rpc_id);
            return Err(AskError::NoProvider);
        }
        let requested = Requested {
            rpc_id: rpc_id.clone(),
            session_id: key.session_id.to_string(),
            questions: ask.questions,
            agent: ask.agent.clone(),
            labels: ask.labels,
            requested_at: Some(SystemTime::now().into()),
            expires_at: ask.expires_at.map(Into::into),
        };
        // Listen first and wait under the new id, so an answer given the instant the
        // ask is stored (on any node) cannot be missed.
        let channel = SessionKeys::new(&key).channel();
        let live = match node.fanout.follow(&channel, SESSION_BUFFER).await {
            Ok(live) => live,
            Err(e) => {
                node.unlist(&key, &rpc_id);
                return Err(e);
            }
        };
        let outcome = node.add_waiter(&key, &rpc_id, &spec);
        let registered = node.store.register(&key, &requested, &ask.request_id).await;
        if !matches!(registered, Ok(Registration::New { .. })) {
            node.unlist(&key, &rpc_id);
        }
        let (rpc_id, outcome) = match registered {
            Ok(Registration::New { .. }) => (rpc_id, outcome),
            Ok(Registration::Joined { rpc_id: joined }) => {
                node.waiters.lock().remove(&key, &rpc_id);
                let outcome = node.add_waiter(&key, &joined, &spec);
                // Waited on here from now on, before a sweep can find the ask's grace
                // (after its first node died) over.
                if let Err(e) = conn.run_all(node.wait_commands(&key, &joined, &spec)).await {
                    node.waiters.lock().remove(&key, &joined);
                    return Err(redis_error(e));
                }
                // It may have resolved between the script and the wait: recover.
                if node.store.pending_ask(&key, &joined).await.is_err() {
                    node.recover_waiters(&key).await;
                }
                (joined, outcome)
            }
            Ok(Registration::Recorded {
                rpc_id: recorded,
                resolved,
            }) => {
                node.waiters.lock().remove(&key, &rpc_id);
                let (outcome_tx, outcome) = oneshot::channel();
                let _ = outcome_tx.send(outcome_of(&resolved));
                (recorded, outcome)
            }
            Err(e) => {
                node.waiters.lock().remove(&key, &rpc_id);
                // Nothing waits on the channel this call followed: let it go.
                drop(live);
                node.fanout.release(&channel).await;
                return Err(e);
            }
        };
        self.ensure_pump(&key, live);
        if let Some(agent) = &ask.agent {
            let set = agent_asks_key(&key.tenant, &agent.agent_id, &agent.incarnation);
            let mut conn = node.conn.clone();
            let _: Result<(), _> = redis::pipe()
                .sadd(&set, format!("{}\n{rpc_id}", key.session_id))
                .ignore()
                .pexpire(&set, node.lease_ms() as i64 * 6)
                .ignore()
                .query_async(&mut conn)
                .await;
            // A detach that ran meanwhile did not see this ask: abort it now.
            if node.check_caller(&key.tenant, agent).await.is_err() {
                let _ = self.claim(&key, &rpc_id, Outcome::aborted()).await;
            }
        }
        Ok(Registered { rpc_id, outcome })
    }

    /// Resolves the asks an agent made under `incarnation`: its lease ended.
    async fn abort_agent_asks(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let node = &self.node;
        let set = agent_asks_key(tenant, agent_id, incarnation);
        let mut conn = node.conn.clone();
        let members: Vec<String> = conn.smembers(&set).await.unwrap_or_default();
        let _: Result<(), _> = conn.del(&set).await;
        for member in members {
            let Some((session_id, rpc_id)) = member.split_once('\n') else {
                continue;
            };
            let key = SessionKey::new(tenant, session_id);
            let _ = self.claim(&key, rpc_id, Outcome::aborted()).await;
        }
    }

    fn ensure_pump(&self, key: &SessionKey, live: broadcast::Receiver<Arc<LiveEvent>>) {
        if self.node.pumps.lock().insert(key.clone()) {
            tokio::spawn(pump(self.node.clone(), key.clone(), live));
        }
    }
}

fn resolved_of(key: &SessionKey, rpc_id: &str, outcome: &Outcome) -> Resolved {
    Resolved {
        rpc_id: rpc_id.to_owned(),
        session_id: key.session_id.to_string(),
        reason: outcome.resolution.into(),
        answers: outcome.answers.clone(),
        resolved_by: outcome.resolved_by.clone(),
        resolved_at: Some(SystemTime::now().into()),
        cancel_reason: outcome.cancel_reason.clone().unwrap_or_default(),
    }
}

#[async_trait]
impl Backend for RedisBackend {
    async fn register(&self, ask: NewAsk) -> Result<Registered, AskError> {
        // Once the script has stored the ask, the steps after it must finish even if
        // the caller goes away meanwhile (its call cancelled): otherwise the ask would
        // be stored with nobody to abort it. So registration runs on its own task.
        let (result_tx, result_rx) = oneshot::channel();
        let this = self.clone();
        let key = ask.key.clone();
        let grace = ask.reattach_grace;
        tokio::spawn(async move {
            let result = this.register_now(ask).await;
            if let Err(Ok(registered)) = result_tx.send(result) {
                // The caller is gone: abort at once, or leave it to the reattach grace
                // (this node stops renewing it, so the sweep aborts it after that).
                if grace.is_zero() {
                    let _ = this
                        .claim(&key, &registered.rpc_id, Outcome::aborted())
                        .await;
                }
            }
        });
        result_rx
            .await
            .map_err(|_| AskError::Internal("registration task ended without a result".into()))?
    }

    async fn questions(&self, key: &SessionKey, rpc_id: &str) -> Result<Vec<Question>, AskError> {
        Ok(self.node.store.pending_ask(key, rpc_id).await?.questions)
    }

    async fn claim(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        outcome: Outcome,
    ) -> Result<(), AskError> {
        self.node.claim(key, rpc_id, outcome).await
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), AskError> {
        let node = &self.node;
        let waiting_here = {
            let mut waiters = node.waiters.lock();
            match waiters.get_mut(key, rpc_id) {
                Some(wait) => {
                    wait.senders.retain(|s| !s.is_closed());
                    let live = !wait.senders.is_empty();
                    if !live {
                        waiters.remove(key, rpc_id);
                    }
                    live
                }
                None => false,
            }
        };
        if waiting_here {
            return Ok(());
        }
        let mut conn = node.conn.clone();
        let unlisted = node.wait_commands_undone(key, rpc_id);
        conn.run_all(unlisted).await.map_err(redis_error)?;
        if !node.live_waiters(&mut conn, key, rpc_id).await?.is_empty() {
            return Ok(());
        }
        self.claim(key, rpc_id, Outcome::aborted()).await
    }

    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, AskError> {
        let node = self.node.clone();
        if node.closed.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        let buffer = match &scope {
            Scope::Session(_) => node.config.subscriber_buffer,
            Scope::Tenant(_) => node.config.tenant_buffer,
        };
        let (events_tx, events_rx) = mpsc::channel(buffer.max(1));
        let follower = Follower {
            node: node.clone(),
            events_tx: events_tx.clone(),
            lost: node.fanout.watch_disconnections(),
        };
        let closing = node.closing.subscribe();
        let (channel, attended, exclusive, slot, held_session, task) = match scope {
            Scope::Session(key) => {
                let keys = SessionKeys::new(&key);
                let slot = SubscriberSlot::take(
                    &node,
                    keys.key("subs"),
                    node.config.max_subscribers_per_session,
                    AskError::too_many_subscribers,
                )
                .await?;
                let held_session = node.hold_session(&key).await?;
                let exclusive = match options.exclusive {
                    true => {
                        let hold = keys.key("exclusive");
                        let mut conn = node.conn.clone();
                        let taken: Option<String> = redis::cmd("SET")
                            .arg(&hold)
                            .arg(&node.id)
                            .arg("NX")
                            .arg("PX")
                            .arg(node.lease_ms())
                            .query_async(&mut conn)
                            .await
                            .map_err(redis_error)?;
                        if taken.is_none() {
                            return Err(AskError::DuplicateProvider);
                        }
                        node.exclusive.lock().insert(hold.clone(), node.id.clone());
                        Some(hold)
                    }
                    false => None,
                };
                let channel = keys.channel();
                let attended = keys.key("attended");
                let live = node.fanout.follow(&channel, SESSION_BUFFER).await?;
                node.hold_attended(attended.clone()).await?;
                let task = tokio::spawn(async move {
                    let ended = follower.session(key, options.after, live, closing).await;
                    fail_subscription(&events_tx, ended).await;
                });
                (
                    channel,
                    attended,
                    exclusive,
                    Some(slot),
                    Some(held_session),
                    task,
                )
            }
            Scope::Tenant(tenant) => {
                let keys = TenantKeys::new(&tenant);
                let slot = SubscriberSlot::take(
                    &node,
                    keys.all_sessions_subscribers(),
                    node.config.max_all_sessions_per_tenant,
                    AskError::too_many_all_sessions,
                )
                .await?;
                let channel = keys.channel();
                let attended = keys.attended();
                let live = node.fanout.follow(&channel, TENANT_BUFFER).await?;
                node.hold_attended(attended.clone()).await?;
                let reset_first = options.after.is_some();
                let task = tokio::spawn(async move {
                    let ended = follower
                        .tenant(tenant.to_string(), reset_first, live, closing)
                        .await;
                    fail_subscription(&events_tx, ended).await;
                });
                (channel, attended, None, Some(slot), None, task)
            }
        };
        Ok(Box::pin(HeldStream {
            events: ReceiverStream::new(events_rx),
            replay: VecDeque::new(),
            _held: Held {
                node,
                channel,
                attended,
                exclusive,
                _slot: slot,
                held_session,
                task,
            },
        }))
    }

    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, AskError> {
        self.node.store.pending(key).await
    }

    async fn pending_request(
        &self,
        key: &SessionKey,
        request_id: &str,
    ) -> Result<Option<String>, AskError> {
        self.node.store.pending_request(key, request_id).await
    }

    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, AskError> {
        let node = &self.node;
        if node.closed.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        let incarnation = Uuid::now_v7().to_string();
        let previous = node
            .store
            .attach_agent(
                tenant,
                agent_id,
                &incarnation,
                parent_agent_id,
                holder,
                Duration::from_millis(node.lease_ms()),
            )
            .await?;
        let (superseded_tx, superseded) = oneshot::channel();
        let replaced = node.leases.lock().insert(
            (tenant.to_owned(), agent_id.to_owned()),
            (incarnation.clone(), Some(superseded_tx)),
        );
        if let Some((_, Some(old))) = replaced {
            let _ = old.send(());
        }
        if let Some(previous) = previous {
            debug!(agent_id, old = %previous, "attach supersedes the previous lease");
            self.abort_agent_asks(tenant, agent_id, &previous).await;
        }
        Ok(Attached {
            incarnation,
            superseded,
        })
    }

    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        let node = &self.node;
        {
            let mut leases = node.leases.lock();
            let key = (tenant.to_owned(), agent_id.to_owned());
            if leases.get(&key).is_some_and(|(inc, _)| inc == incarnation) {
                leases.remove(&key);
            }
        }
        let agent = agent_key(tenant, agent_id);
        let mut conn = node.conn.clone();
        let current: Option<String> = conn.hget(&agent, "inc").await.unwrap_or(None);
        if current.as_deref() == Some(incarnation) {
            // On failure both expire with the lease, which nobody renews now.
            let _: Result<(), _> = redis::pipe()
                .del(&agent)
                .zrem(TenantKeys::new(tenant).agents(), agent_id)
                .query_async::<()>(&mut conn)
                .await;
        }
        self.abort_agent_asks(tenant, agent_id, incarnation).await;
    }

    async fn healthy(&self) -> bool {
        // Every connection works (after an outage each one fails once, then the
        // connection manager replaces it), and the node's own subscription still
        // delivers (the probe).
        let node = &self.node;
        let check = async {
            let store = node.store.ping().await;
            let mut conn = node.conn.clone();
            let probe = node.fanout.probe(&mut conn).await;
            store && probe
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(2), check).await,
            Ok(true)
        )
    }

    async fn stats(&self) -> Stats {
        let node = &self.node;
        Stats {
            pending: node.waiters.lock().len(),
            subscribers: node.attended.lock().values().sum(),
        }
    }

    async fn dispose_all(&self) {
        let node = &self.node;
        node.closed.store(true, Ordering::Release);
        let waiting: Vec<(WaiterKey, bool)> = node
            .waiters
            .lock()
            .iter()
            .map(|(key, rpc_id, e)| ((key.clone(), rpc_id.clone()), !e.request_id.is_empty()))
            .collect();
        for ((key, rpc_id), reattachable) in waiting {
            if reattachable {
                // Handed over: the call is told to retry with its request_id (through
                // another node); the ask stays pending, and the survivors abort it if
                // nobody comes back within its reattach grace.
                if let Some(entry) = node.waiters.lock().remove(&key, &rpc_id) {
                    for waiter in entry.senders {
                        let _ = waiter.send(Outcome::disposed());
                    }
                }
            } else {
                // Nobody can reattach to an ask without a request_id: dispose of it.
                let _ = self.claim(&key, &rpc_id, Outcome::disposed()).await;
            }
        }
        // End this node's lease now: the survivors take over its wait list at once
        // rather than a lease later (each handed-over ask gets its reattach grace).
        let mut conn = node.conn.clone();
        let _: Result<(), _> = conn.zadd(NODES_KEY, &node.id, 0).await;
        let _ = node.closing.send(true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{backend::memory::MemoryConfig, testing::RedisServer};

    /// The conformance suite's sizes, on a Redis backend with its own redis-server.
    async fn make(config: MemoryConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        let redis = RedisServer::start().await;
        let backend = backend(RedisBackendConfig::new(&redis.url), config).await;
        (backend, Box::new(redis))
    }

    /// A backend with the conformance suite's sizes.
    async fn backend(mut settings: RedisBackendConfig, config: MemoryConfig) -> Arc<dyn Backend> {
        settings.store.history_len = config.history_len;
        settings.store.max_pending_per_session = config.max_pending_per_session;
        settings.store.max_pending_per_tenant = config.max_pending_per_tenant;
        settings.max_subscribers_per_session = config.max_subscribers_per_session;
        settings.max_all_sessions_per_tenant = config.max_all_sessions_per_tenant;
        settings.store.max_agents_per_tenant = config.max_agents_per_tenant;
        settings.store.max_sessions_per_tenant = config.max_sessions_per_tenant;
        settings.reconnect_grace = config.reconnect_grace;
        settings.subscriber_buffer = config.subscriber_buffer;
        settings.tenant_buffer = config.tenant_buffer;
        Arc::new(
            RedisBackend::connect(settings)
                .await
                .expect("redis backend"),
        )
    }

    backend_conformance_suite!(make);

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A cursor from a client is any text: parsing never panics, and the cursors
        /// this backend writes (epoch: 32 hex digits) read back as written.
        #[test]
        fn cursors_parse_without_panic_and_round_trip(
            text in "\\PC{0,40}",
            epoch in "[0-9a-f]{32}",
            seq: u64,
        ) {
            let _ = parse_cursor(&text);
            let written = cursor(&epoch, seq);
            proptest::prop_assert_eq!(parse_cursor(&written), Some((epoch.as_str(), seq)));
        }
    }

    /// The same suite on a Redis Cluster of three shards: sessions spread over the
    /// shards, sharded pub/sub, the tenant's part after each script.
    mod cluster {
        use super::*;
        use crate::testing::RedisCluster;

        async fn make(config: MemoryConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
            let cluster = RedisCluster::start(3).await;
            let mut settings = RedisBackendConfig::new(&cluster.url);
            settings.cluster = true;
            (backend(settings, config).await, Box::new(cluster))
        }

        backend_conformance_suite!(make);
    }
}
