//! Acknowledged writes that survive a failover: `WAIT` (and `WAITAOF`) after each.
//!
//! Redis replicates asynchronously: a primary answers a write before any replica holds
//! it, so a failover can lose the last writes askgate acknowledged. With a policy that
//! asks for it, each acknowledging write is sent in one pipeline with `WAIT N timeout`
//! (or `WAITAOF 1 N timeout`, which also waits for the append-only files' fsync), and
//! the call succeeds only when enough replicas confirmed it. The two go in one pipeline
//! on one connection on purpose: `WAIT` counts the writes of its own connection, so a
//! `WAIT` sent after a reconnection (say, to the replica just promoted) would count
//! nothing and succeed at once. In one pipeline, a connection lost between the two
//! fails the call instead.
//!
//! A write that timed out waiting may or may not have reached a replica, and it did
//! reach the primary: the error says so, and a retry is safe (a registration joins its
//! request_id, a claim that won already answers NOT_PENDING naming who won).

use std::time::Duration;

use redis::{Value, aio::ConnectionLike};

use super::RedisConn;

/// What an acknowledging write waits for before its call is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Replicas that must hold the write (`--redis-wait-replicas`).
    pub replicas: u32,
    /// The primary's append-only file, and those replicas', fsynced too
    /// (`--redis-wait-fsync`; Redis 7.2 or newer, with `appendonly yes`).
    pub fsync: bool,
    /// The longest wait (`--redis-wait-timeout`): past it the call fails UNAVAILABLE.
    pub timeout: Duration,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        Self {
            replicas: 0,
            fsync: false,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

impl WaitPolicy {
    /// `--redis-wait-timeout` unless told otherwise.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

    /// Whether writes wait for anything.
    pub fn waits(&self) -> bool {
        self.replicas > 0 || self.fsync
    }

    /// How long a reply may take: a `WAIT` may take its whole timeout.
    pub fn response_timeout(&self) -> Duration {
        let base = super::super::connection::RESPONSE_TIMEOUT;
        match self.waits() {
            true => base.max(self.timeout + Duration::from_secs(3)),
            false => base,
        }
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn command(&self) -> redis::Cmd {
        let mut cmd = match self.fsync {
            true => {
                let mut cmd = redis::cmd("WAITAOF");
                cmd.arg(1);
                cmd
            }
            false => redis::cmd("WAIT"),
        };
        cmd.arg(self.replicas).arg(self.millis());
        cmd
    }

    /// Checks the reply of [`Self::command`].
    fn check(&self, reply: Value) -> redis::RedisResult<()> {
        let reply = reply.extract_error()?;
        let (local, replicas): (i64, i64) = match self.fsync {
            true => redis::from_redis_value(reply)?,
            false => (1, redis::from_redis_value(reply)?),
        };
        if local >= 1 && replicas >= i64::from(self.replicas) {
            return Ok(());
        }
        let what = match self.fsync {
            true => "fsynced on the primary and",
            false => "held by",
        };
        Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            WAIT_FAILED,
            format!(
                "not {what} {} replica(s) within {:?} (confirmed: {replicas}): with \
                 --redis-wait-replicas, what a call writes or reads back is confirmed on \
                 that many replicas before the call is answered, so while fewer are \
                 connected (after a failover, until a replica follows the new primary) \
                 writes and reads of outcomes are held back; a write may or may not survive \
                 a failover, and retrying the call is safe",
                self.replicas, self.timeout
            ),
        )))
    }
}

/// The description of a write its replicas did not confirm in time: its detail is
/// the whole message for the caller (`unavailable`).
pub(super) const WAIT_FAILED: &str = "write not acknowledged in time";

/// Where acknowledging writes go when they must wait: a connection of their own, so
/// that a `WAIT` (which holds its connection until replicas answer, or its timeout)
/// never delays reads, lease renewals or pub/sub; and on one server (or the Sentinels'
/// primary) one task that sends the writes that arrived meanwhile as one pipeline
/// ending with one `WAIT`, so that waiting costs one replication round trip per batch,
/// not per write (group commit). On a cluster, whose pipelines keep to one slot, each
/// write goes with its own `WAIT`.
#[derive(Clone)]
pub(crate) struct Acked {
    conn: RedisConn,
    policy: WaitPolicy,
    batches: Option<tokio::sync::mpsc::UnboundedSender<Queued>>,
}

type Queued = (
    redis::Cmd,
    tokio::sync::oneshot::Sender<redis::RedisResult<Value>>,
);

/// Writes one batch may hold.
const BATCH: usize = 512;

impl Acked {
    /// Whether the writes wait for anything.
    pub(super) fn waits(&self) -> bool {
        self.policy.waits()
    }

    /// Sends acknowledging writes to `conn` as is, with no policy.
    pub(super) fn plain(conn: RedisConn) -> Self {
        Self {
            conn,
            policy: WaitPolicy::default(),
            batches: None,
        }
    }

    /// Acknowledging writes on a connection of their own to `target`, waiting as
    /// `policy` says; as is on `conn` when it says nothing.
    pub(super) async fn connect(
        conn: RedisConn,
        target: &super::RedisTarget,
        policy: WaitPolicy,
    ) -> redis::RedisResult<Self> {
        if !policy.waits() {
            return Ok(Self::plain(conn));
        }
        let mut conn = target.connect(None).await?;
        if policy.fsync {
            // Refused by a Redis older than 7.2, or without an append-only file: say
            // so now, not at the first answer.
            let checked: redis::RedisResult<Value> = redis::cmd("WAITAOF")
                .arg(1)
                .arg(0)
                .arg(1000)
                .query_async(&mut conn)
                .await;
            if let Err(e) = checked.and_then(Value::extract_error) {
                return Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "--redis-wait-fsync needs WAITAOF (Redis 7.2 or newer, with appendonly yes)",
                    e.to_string(),
                )));
            }
        }
        let batches = match conn.is_cluster() {
            true => None,
            false => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                tokio::spawn(send_batches(conn.clone(), policy, rx));
                Some(tx)
            }
        };
        Ok(Self {
            conn,
            policy,
            batches,
        })
    }
}

/// Sends the queued writes, those that arrived meanwhile as one pipeline with one
/// wait, until every sender is gone.
async fn send_batches(
    mut conn: RedisConn,
    policy: WaitPolicy,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<Queued>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut batch, BATCH).await > 0 {
        let mut pipe = redis::pipe();
        for (cmd, _) in &batch {
            pipe.add_command(cmd.clone());
        }
        pipe.add_command(policy.command());
        let count = batch.len() + 1;
        match conn.req_packed_commands(&pipe, 0, count).await {
            Ok(mut replies) => {
                let waited = policy.check(replies.pop().unwrap_or(Value::Nil));
                for ((_, reply_to), reply) in batch.drain(..).zip(replies) {
                    let reply = waited.clone().and_then(|()| reply.extract_error());
                    let _ = reply_to.send(reply);
                }
            }
            Err(error) => {
                for (_, reply_to) in batch.drain(..) {
                    let _ = reply_to.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Whether `cmd` loads a script (after a NOSCRIPT reply): it writes no data, so it
/// waits for nothing, and it goes as a command of its own, which a cluster sends to
/// every primary. In a pipeline with a `WAIT` (neither names a key) it would go to any
/// one node, and the script's next EVALSHA fail NOSCRIPT again on its own shard.
fn loads_a_script(cmd: &redis::Cmd) -> bool {
    matches!(
        cmd.args_iter().next(),
        Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"SCRIPT")
    )
}

impl ConnectionLike for Acked {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        if !self.policy.waits() || loads_a_script(cmd) {
            return self.conn.req_packed_command(cmd);
        }
        Box::pin(async move {
            if let Some(batches) = &self.batches {
                let (reply_to, reply) = tokio::sync::oneshot::channel();
                let gone =
                    || redis::RedisError::from((redis::ErrorKind::Io, "the write queue is gone"));
                batches.send((cmd.clone(), reply_to)).map_err(|_| gone())?;
                return reply.await.map_err(|_| gone())?;
            }
            let mut pipe = redis::pipe();
            pipe.add_command(cmd.clone())
                .add_command(self.policy.command());
            let mut replies = self.conn.req_packed_commands(&pipe, 0, 2).await?;
            let waited = replies.pop().unwrap_or(Value::Nil);
            let reply = replies.pop().unwrap_or(Value::Nil).extract_error()?;
            self.policy.check(waited)?;
            Ok(reply)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        if !self.policy.waits() {
            return self.conn.req_packed_commands(pipeline, offset, count);
        }
        // A pipeline of acknowledging writes, with its wait at the end (not for
        // MULTI/EXEC pipelines, which the store sends as plain commands).
        Box::pin(async move {
            let mut pipe = pipeline.clone();
            pipe.add_command(self.policy.command());
            let mut replies = self
                .conn
                .req_packed_commands(&pipe, offset, count + 1)
                .await?;
            let waited = replies.pop().unwrap_or(Value::Nil);
            self.policy.check(waited)?;
            Ok(replies)
        })
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use askgate_core::{
        backend::StateConfig,
        domain::{Error, SessionKey},
    };
    use askgate_proto::v1::{Requested, Resolution, Resolved};
    use askgate_testing::{RedisCluster, RedisFailover, SENTINEL_MASTER};

    use super::WaitPolicy;
    use crate::redis_engine::store::{RedisStore, RedisTarget, Registration};

    fn requested(rpc_id: &str) -> Requested {
        Requested {
            rpc_id: rpc_id.into(),
            session_id: "s".into(),
            ..Default::default()
        }
    }

    async fn store(redis: &RedisFailover, policy: WaitPolicy) -> RedisStore {
        let target = RedisTarget {
            sentinel_master: Some(SENTINEL_MASTER.into()),
            response_timeout: policy.response_timeout(),
            ..RedisTarget::from(&redis.url)
        };
        RedisStore::connect(target.clone(), StateConfig::default())
            .await
            .expect("connect through the Sentinels")
            .waiting(&target, policy)
            .await
            .expect("a connection for acknowledged writes")
    }

    #[tokio::test]
    async fn acknowledged_writes_wait_for_replicas_and_survive_the_primarys_death() {
        let mut redis = RedisFailover::start(1).await;
        let key = SessionKey::new("acme", "s");
        let one = WaitPolicy {
            replicas: 1,
            ..WaitPolicy::default()
        };
        let store = store(&redis, one).await;
        let registered = store.register(&key, &requested("r1"), "", None, None).await;
        assert!(
            matches!(registered, Ok(Registration::New { .. })),
            "{registered:?}"
        );

        // More replicas than there are: the write is on the primary, but the call says
        // it may not survive, within the timeout.
        let two = WaitPolicy {
            replicas: 2,
            timeout: Duration::from_millis(300),
            ..WaitPolicy::default()
        };
        let impatient = self::store(&redis, two).await;
        let refused = impatient
            .register(&key, &requested("r2"), "", None, None)
            .await;
        match refused {
            Err(Error::BackendUnavailable(message)) => {
                assert!(message.contains("may or may not survive"), "{message}");
            }
            other => panic!("expected UNAVAILABLE, got {other:?}"),
        }

        let resolved = Resolved {
            rpc_id: "r1".into(),
            session_id: "s".into(),
            reason: Resolution::Answered.into(),
            resolved_by: "ana".into(),
            ..Default::default()
        };
        store.claim(&key, &resolved).await.expect("claim");

        // The primary dies; the replica that acknowledged the claim is promoted, and
        // the store follows the Sentinels to it.
        redis.kill_primary().await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let after = loop {
            match store.pending_ask(&key, "r1").await {
                Err(Error::BackendUnavailable(_)) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => break other,
            }
        };
        match after {
            Err(Error::NotPending {
                settled: Some(settled),
            }) => assert_eq!(settled.resolved_by, "ana"),
            other => panic!("the acknowledged claim was lost: {other:?}"),
        }
        // And the promoted primary takes writes, waiting for no replica it lacks.
        let zero = self::store(&redis, WaitPolicy::default()).await;
        zero.register(&key, &requested("r3"), "", None, None)
            .await
            .expect("a write on the promoted primary");
    }

    /// On a cluster each acknowledging write waits on its own shard, and the scripts
    /// are loaded where they run: every shard registers and resolves an ask (before,
    /// every write failed NOSCRIPT).
    #[tokio::test]
    async fn on_a_cluster_each_write_waits_for_its_shards_replica() {
        let cluster = RedisCluster::start_replicated(3, 1, Duration::from_secs(1)).await;
        let policy = WaitPolicy {
            replicas: 1,
            ..WaitPolicy::default()
        };
        let target = RedisTarget {
            cluster: true,
            response_timeout: policy.response_timeout(),
            ..RedisTarget::from(&cluster.url)
        };
        let store = RedisStore::connect(target.clone(), StateConfig::default())
            .await
            .expect("connect to the cluster")
            .waiting(&target, policy)
            .await
            .expect("a connection for acknowledged writes");
        // Sessions spread over the slots, so that every shard runs the scripts.
        for i in 0..8 {
            let session = format!("s{i}");
            let key = SessionKey::new("acme", session.as_str());
            let ask = Requested {
                rpc_id: "r1".into(),
                session_id: session.clone(),
                ..Default::default()
            };
            let registered = store.register(&key, &ask, "req", None, None).await;
            assert!(
                matches!(registered, Ok(Registration::New { .. })),
                "session {session}: {registered:?}"
            );
            let resolved = Resolved {
                rpc_id: "r1".into(),
                session_id: session.clone(),
                reason: Resolution::Answered.into(),
                resolved_by: "ana".into(),
                ..Default::default()
            };
            store
                .claim(&key, &resolved)
                .await
                .unwrap_or_else(|e| panic!("session {session}: {e}"));
        }
        // The writes did wait: for more replicas than a shard has, they time out.
        let two = WaitPolicy {
            replicas: 2,
            timeout: Duration::from_millis(300),
            ..WaitPolicy::default()
        };
        let impatient = RedisStore::connect(target.clone(), StateConfig::default())
            .await
            .expect("connect to the cluster")
            .waiting(&target, two)
            .await
            .expect("a connection for acknowledged writes");
        let key = SessionKey::new("acme", "s0");
        match impatient
            .register(&key, &requested("r2"), "", None, None)
            .await
        {
            Err(Error::BackendUnavailable(message)) => {
                assert!(message.contains("may or may not survive"), "{message}");
            }
            other => panic!("expected UNAVAILABLE, got {other:?}"),
        }
    }
}
