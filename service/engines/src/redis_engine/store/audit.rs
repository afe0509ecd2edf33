//! The audit log on Redis: each tenant's chain on a slot of its own, appended by any
//! node. Redis's Lua has no SHA-256, so a node chains the records itself, to the head
//! it saw last, and AUDIT_APPEND appends them only if that is still the head and none
//! is appended already; else it gives the head and which entries are in the log, and
//! the node chains again. So records are ordered per tenant across nodes, an event
//! reported twice (taken again from an outbox) is appended once, and a node that
//! appends alone takes one round trip per batch.

use std::{collections::HashMap, time::Duration};

use async_trait::async_trait;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use askgate_core::{
    backend::audit::{AuditEntry, AuditRecord, AuditStore, Consumed, Head, millis},
    clock::now_ms,
    domain::Error,
};

use super::{RedisConn, scripts::audit_scripts::*, unavailable, wait::Acked};
use crate::redis_engine::keys::AuditKeys;

/// Rounds of read, chain and append one tenant's batch may take when other nodes keep
/// appending first.
const MAX_ROUNDS: usize = 64;
/// Records dropped per retention round trip.
const PRUNE_BATCH: usize = 500;
/// Tenants whose head a node remembers at most (past them it forgets them all: each
/// costs one more round trip at its next append).
const MAX_HEADS: usize = 10_000;
/// How long an appended entry's id stays, so that an event reported twice (taken again
/// from an outbox, within minutes) is appended once.
const IDS_KEPT_MS: u64 = 24 * 3600 * 1000;

/// A record as the log keeps it.
#[derive(Serialize, Deserialize)]
struct Kept {
    seq: u64,
    prev_hash: String,
    hash: String,
    body: String,
    at_ms: u64,
}

/// The Redis [`AuditStore`].
pub struct RedisAuditStore {
    conn: RedisConn,
    acked: Acked,
    /// Bytes a tenant's records may hold (their kept JSON).
    max_bytes: u64,
    /// Tenants this node has put in the retention sweep's index: once each.
    indexed: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// Each tenant's head as this node last appended it: the next append expects it.
    heads: parking_lot::Mutex<HashMap<String, Head>>,
}

impl RedisAuditStore {
    pub(crate) fn new(conn: RedisConn, acked: Acked, max_bytes: u64) -> Self {
        Self {
            conn,
            acked,
            max_bytes,
            indexed: Default::default(),
            heads: Default::default(),
        }
    }

    /// Appends one tenant's entries, in order: chained to the head this node saw last,
    /// in one round trip while no other node appends to the tenant; when one did (or
    /// an entry is in the log already), chained again to the head the refusal gave.
    async fn append_tenant(&self, tenant: &str, entries: &[AuditEntry]) -> Result<(), Error> {
        let keys = AuditKeys::new(tenant);
        let cached = self.heads.lock().get(tenant).cloned();
        let mut expected = cached.unwrap_or(Head {
            seq: 0,
            hash: String::new(),
        });
        let mut appended = vec![false; entries.len()];
        let mut refused = false;
        for _ in 0..MAX_ROUNDS {
            let now = now_ms();
            let mut append = APPEND.prepare_invoke();
            append
                .key(keys.head())
                .key(keys.log())
                .key(keys.ids())
                .arg(expected.seq)
                .arg(&expected.hash)
                .arg(now)
                .arg(self.max_bytes);
            let mut head = expected.clone();
            let mut sent = Vec::with_capacity(entries.len());
            for (i, entry) in entries.iter().enumerate().filter(|(i, _)| !appended[*i]) {
                let record = head.chain(entry);
                head = Head::after(&record);
                let kept = Kept {
                    seq: record.seq,
                    prev_hash: record.prev_hash,
                    hash: record.hash.clone(),
                    body: record.body_json,
                    at_ms: now,
                };
                let json = serde_json::to_string(&kept)
                    .map_err(|e| Error::Internal(format!("an audit record: {e}")))?;
                append
                    .arg(&entry.id)
                    .arg(record.seq)
                    .arg(&record.hash)
                    .arg(json);
                sent.push(i);
            }
            if sent.is_empty() {
                // Every entry was in already: the head a refusal gave is the head.
                if refused {
                    self.saw(tenant, expected);
                }
                return Ok(());
            }
            let reply = append
                .invoke_async::<Vec<redis::Value>>(&mut self.acked.clone())
                .await;
            // Unknown whether it was appended: the head is read again next time.
            let reply = reply.map_err(|e| {
                self.heads.lock().remove(tenant);
                unavailable(e)
            })?;
            if matches!(reply.first(), Some(redis::Value::Int(1))) {
                self.saw(tenant, head);
                return self.index(tenant).await;
            }
            let (now_head, known) = parse_refusal(&reply)?;
            for (i, known) in sent.into_iter().zip(known) {
                appended[i] |= known;
            }
            expected = now_head;
            refused = true;
        }
        self.heads.lock().remove(tenant);
        Err(Error::BackendUnavailable(format!(
            "the audit log kept moving under {MAX_ROUNDS} appends"
        )))
    }

    /// `head` is the tenant's head now, as this node appended it.
    fn saw(&self, tenant: &str, head: Head) {
        let mut heads = self.heads.lock();
        if heads.len() >= MAX_HEADS && !heads.contains_key(tenant) {
            heads.clear();
        }
        heads.insert(tenant.to_owned(), head);
    }

    /// Puts the tenant in the retention sweep's index, once per node.
    async fn index(&self, tenant: &str) -> Result<(), Error> {
        if self.indexed.lock().contains(tenant) {
            return Ok(());
        }
        let _: () = self
            .conn
            .clone()
            .sadd(AuditKeys::tenants(), tenant)
            .await
            .map_err(unavailable)?;
        self.indexed.lock().insert(tenant.to_owned());
        Ok(())
    }
}

/// The head and the appended-already flags of a refused AUDIT_APPEND.
fn parse_refusal(reply: &[redis::Value]) -> Result<(Head, Vec<bool>), Error> {
    let text = |value: &redis::Value| -> Result<String, Error> {
        redis::from_redis_value::<String>(value.clone())
            .map_err(|e| Error::Internal(format!("an audit head: {e}")))
    };
    let (Some(seq), Some(hash)) = (reply.get(1), reply.get(2)) else {
        return Err(Error::Internal("a short audit append reply".into()));
    };
    let head = Head {
        seq: text(seq)?
            .parse()
            .map_err(|_| Error::Internal("an audit head's seq".into()))?,
        hash: text(hash)?,
    };
    let flags = reply[3..]
        .iter()
        .map(|v| matches!(v, redis::Value::Int(1)))
        .collect();
    Ok((head, flags))
}

#[async_trait]
impl AuditStore for RedisAuditStore {
    async fn append(&self, entries: Vec<AuditEntry>) -> Result<(), Error> {
        let mut tenants: Vec<String> = Vec::new();
        let mut by_tenant: HashMap<String, Vec<AuditEntry>> = HashMap::new();
        for entry in entries {
            if !by_tenant.contains_key(&entry.tenant) {
                tenants.push(entry.tenant.clone());
            }
            by_tenant
                .entry(entry.tenant.clone())
                .or_default()
                .push(entry);
        }
        for tenant in tenants {
            self.append_tenant(&tenant, &by_tenant[&tenant]).await?;
        }
        Ok(())
    }

    async fn export(
        &self,
        tenant: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, Error> {
        let keys = AuditKeys::new(tenant);
        let count = isize::try_from(limit).unwrap_or(isize::MAX);
        let kept: Vec<String> = self
            .conn
            .clone()
            .zrangebyscore_limit(keys.log(), format!("({after_seq}"), "+inf", 0, count)
            .await
            .map_err(unavailable)?;
        kept.iter()
            .map(|json| {
                let kept: Kept = serde_json::from_str(json)
                    .map_err(|e| Error::Internal(format!("a corrupt audit record: {e}")))?;
                Ok(AuditRecord {
                    seq: kept.seq,
                    prev_hash: kept.prev_hash,
                    hash: kept.hash,
                    body_json: kept.body,
                })
            })
            .collect()
    }

    async fn prune(&self, retention: Duration) -> Result<(), Error> {
        let cutoff =
            now_ms().saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
        let tenants: Vec<String> = self
            .conn
            .clone()
            .smembers(AuditKeys::tenants())
            .await
            .map_err(unavailable)?;
        for tenant in tenants {
            let keys = AuditKeys::new(&tenant);
            loop {
                let dropped: usize = PRUNE
                    .key(keys.head())
                    .key(keys.log())
                    .key(keys.ids())
                    .arg(cutoff)
                    .arg(PRUNE_BATCH)
                    .arg(now_ms().saturating_sub(IDS_KEPT_MS))
                    .invoke_async(&mut self.acked.clone())
                    .await
                    .map_err(unavailable)?;
                if dropped < PRUNE_BATCH {
                    break;
                }
            }
        }
        Ok(())
    }

    async fn head(&self, tenant: &str) -> Result<Head, Error> {
        let keys = AuditKeys::new(tenant);
        let (seq, hash): (Option<u64>, Option<String>) = redis::cmd("HMGET")
            .arg(keys.head())
            .arg("seq")
            .arg("hash")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(Head {
            seq: seq.unwrap_or(0),
            hash: hash.unwrap_or_default(),
        })
    }

    /// The record first (its id makes a second append of it a no-op), then the use,
    /// set only if absent: a node that dies between the two leaves the record of a
    /// use that a retry completes, never a use without its record.
    async fn consume(
        &self,
        entry: AuditEntry,
        jti: &str,
        keep_until: std::time::SystemTime,
    ) -> Result<Consumed, Error> {
        let keys = AuditKeys::new(&entry.tenant);
        self.append_tenant(&entry.tenant.clone(), &[entry]).await?;
        let now = now_ms();
        // A use kept until a time already past is not remembered (Redis drops a key
        // set to expire in the past), as a prune would drop it on another engine;
        // PXAT takes only a positive time.
        let until = millis(keep_until).max(1);
        let before: Option<u64> = redis::cmd("SET")
            .arg(keys.consumed(jti))
            .arg(now)
            .arg("NX")
            .arg("GET")
            .arg("PXAT")
            .arg(until)
            .query_async(&mut self.acked.clone())
            .await
            .map_err(unavailable)?;
        let at = |ms| std::time::UNIX_EPOCH + Duration::from_millis(ms);
        Ok(match before {
            Some(ms) => Consumed::Before(at(ms)),
            None => Consumed::Now(at(now)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use askgate_core::backend::audit::conformance::Made;
    use askgate_testing::{RedisCluster, RedisServer};

    use super::*;
    use crate::redis_engine::connection::RedisTarget;

    /// Two nodes' stores on their own connections to `target`.
    async fn two(target: &RedisTarget) -> (Arc<dyn AuditStore>, Arc<dyn AuditStore>) {
        let mut stores = Vec::new();
        for _ in 0..2 {
            let conn = target.connect(None).await.expect("connect to redis");
            stores.push(Arc::new(RedisAuditStore::new(
                conn.clone(),
                Acked::plain(conn),
                u64::MAX,
            )));
        }
        let second = stores.pop().expect("two");
        let first = stores.pop().expect("two");
        (first, second)
    }

    /// Two nodes' logs on one redis-server.
    async fn on_a_server() -> Made {
        let server = RedisServer::start().await;
        let (one, other) = two(&RedisTarget::from(&server.url)).await;
        (one, other, Box::new(server))
    }

    /// Two nodes' logs on a Redis Cluster of three shards.
    async fn on_a_cluster() -> Made {
        let cluster = RedisCluster::start(3).await;
        let target = RedisTarget {
            cluster: true,
            ..RedisTarget::from(&cluster.url)
        };
        let (one, other) = two(&target).await;
        (one, other, Box::new(cluster))
    }

    mod server {
        askgate_core::audit_store_conformance_suite!(make);
        use super::on_a_server as make;
    }

    mod cluster {
        askgate_core::audit_store_conformance_suite!(make);
        use super::on_a_cluster as make;
    }
}
