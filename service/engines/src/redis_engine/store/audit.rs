//! The audit log on Redis: each tenant's chain on a slot of its own, appended by any
//! node. Redis's Lua has no SHA-256, so a node chains the records itself: it reads the
//! head and which entries are appended already (AUDIT_CHECK), chains the new ones, and
//! appends them only if the head has not moved meanwhile (AUDIT_APPEND), else reads
//! again. So records are ordered per tenant across nodes, and an event reported twice
//! (taken again from an outbox) is appended once.

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
}

impl RedisAuditStore {
    pub(crate) fn new(conn: RedisConn, acked: Acked, max_bytes: u64) -> Self {
        Self {
            conn,
            acked,
            max_bytes,
            indexed: Default::default(),
        }
    }

    /// Appends one tenant's entries, in order.
    async fn append_tenant(&self, tenant: &str, entries: &[AuditEntry]) -> Result<(), Error> {
        let keys = AuditKeys::new(tenant);
        for _ in 0..MAX_ROUNDS {
            let mut check = CHECK.prepare_invoke();
            check.key(keys.head()).key(keys.ids());
            for entry in entries {
                check.arg(&entry.id);
            }
            let reply: Vec<redis::Value> = check
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?;
            let (mut head, appended) = parse_check(&reply)?;
            let expected = head.clone();
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
            let mut any = false;
            for (entry, done) in entries.iter().zip(appended) {
                if done {
                    continue;
                }
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
                any = true;
            }
            if !any {
                return Ok(());
            }
            let reply: Vec<redis::Value> = append
                .invoke_async(&mut self.acked.clone())
                .await
                .map_err(unavailable)?;
            if matches!(reply.first(), Some(redis::Value::Int(1))) {
                if !self.indexed.lock().contains(tenant) {
                    let _: () = self
                        .conn
                        .clone()
                        .sadd(AuditKeys::tenants(), tenant)
                        .await
                        .map_err(unavailable)?;
                    self.indexed.lock().insert(tenant.to_owned());
                }
                return Ok(());
            }
        }
        Err(Error::BackendUnavailable(format!(
            "the audit log kept moving under {MAX_ROUNDS} appends"
        )))
    }
}

/// The head and the appended flags of an AUDIT_CHECK reply.
fn parse_check(reply: &[redis::Value]) -> Result<(Head, Vec<bool>), Error> {
    let text = |value: &redis::Value| -> Result<String, Error> {
        redis::from_redis_value::<String>(value.clone())
            .map_err(|e| Error::Internal(format!("an audit head: {e}")))
    };
    let (Some(seq), Some(hash)) = (reply.first(), reply.get(1)) else {
        return Err(Error::Internal("a short audit check reply".into()));
    };
    let head = Head {
        seq: text(seq)?
            .parse()
            .map_err(|_| Error::Internal("an audit head's seq".into()))?,
        hash: text(hash)?,
    };
    let flags = reply[2..]
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
                    .arg(cutoff)
                    .arg(PRUNE_BATCH)
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
        let until = millis(keep_until).max(now + 1);
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

    use askgate_core::backend::audit::conformance::{consumption_rules, rules};
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

    #[tokio::test]
    async fn the_redis_log_keeps_the_rules_across_nodes() {
        let server = RedisServer::start().await;
        let (one, other) = two(&RedisTarget::from(&server.url)).await;
        rules(one, other).await;
        let cluster = RedisCluster::start(3).await;
        let target = RedisTarget {
            cluster: true,
            ..RedisTarget::from(&cluster.url)
        };
        let (one, other) = two(&target).await;
        rules(one, other).await;
        let (one, other) = two(&target).await;
        consumption_rules(one, other).await;
    }
}
