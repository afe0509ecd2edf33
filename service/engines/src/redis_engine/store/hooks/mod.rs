//! The webhook store on Redis: endpoints, deliveries and reminder timers every node
//! sees, handed out by lease so that any node delivers and a node's death loses
//! nothing (docs/webhooks.md). The keys are [`HookKeys`]; each change is one script on
//! the `{hooks}` slot (`scripts.rs`, `hook_scripts`).

use async_trait::async_trait;
use redis::AsyncCommands;
use serde::{Serialize, de::DeserializeOwned};

use askgate_core::{
    backend::audit::AuditEntry,
    backend::hooks::{
        HookStore, Shares, StoreLimits,
        records::{
            DeliveryRecord, EndpointRecord, GrantRecord, PersonRecord, PolicySetRecord, Status,
            TimerRecord,
        },
    },
    domain::Error,
};

pub(crate) use super::wait::Acked;
use super::{RedisConn, scripts::hook_scripts::*, unavailable};
use crate::redis_engine::keys::HookKeys;

mod grants;
mod people;
mod policies;

/// Deliveries read per round trip while listing.
const LIST_PAGE: isize = 200;

/// The Redis [`HookStore`].
pub struct RedisHookStore {
    conn: RedisConn,
    limits: StoreLimits,
    acked: Acked,
}

impl RedisHookStore {
    /// The store on `conn`, its acknowledging writes sent through `acked`.
    pub(crate) fn new(conn: RedisConn, limits: StoreLimits, acked: Acked) -> Self {
        Self {
            conn,
            limits,
            acked,
        }
    }

    fn conn(&self) -> RedisConn {
        self.conn.clone()
    }

    /// The connection for a write that acknowledges something (an endpoint change,
    /// queued deliveries, an attempt's outcome, a note): it waits as the policy says.
    fn acked(&self) -> Acked {
        self.acked.clone()
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(|e| Error::Internal(format!("encoding a record: {e}")))
}

fn from_json<T: DeserializeOwned>(json: &str) -> Result<T, Error> {
    serde_json::from_str(json)
        .map_err(|e| Error::Internal(format!("corrupt webhook record in redis: {e}")))
}

fn too_many_queued(max: usize) -> Error {
    Error::TooManyWebhooks(format!(
        "at most {max} queued webhook deliveries per tenant"
    ))
}

fn status_code(status: Status) -> &'static str {
    match status {
        Status::Pending => "P",
        Status::Delivered => "D",
        Status::Failed => "F",
    }
}

/// Decodes `json, attempts` pairs of a claim.
fn claimed(reply: Vec<redis::Value>) -> Result<Vec<DeliveryRecord>, Error> {
    reply
        .chunks(2)
        .map(|pair| {
            let json: String = super::reply_field(pair, 0)?;
            let attempts: u32 = super::reply_field(pair, 1)?;
            let mut record: DeliveryRecord = from_json(&json)?;
            record.attempts = attempts;
            Ok(record)
        })
        .collect()
}

#[async_trait]
impl HookStore for RedisHookStore {
    async fn create_endpoint(
        &self,
        endpoint: &EndpointRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        let reply: String = CREATE_ENDPOINT
            .key(HookKeys::endpoints(&endpoint.tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(&endpoint.id)
            .arg(to_json(endpoint)?)
            .arg(self.limits.max_endpoints)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_str() {
            "ok" => Ok(()),
            _ => Err(Error::TooManyWebhooks(format!(
                "at most {} webhook endpoints per tenant",
                self.limits.max_endpoints
            ))),
        }
    }

    async fn endpoints(&self, tenant: &str) -> Result<Vec<EndpointRecord>, Error> {
        let values: Vec<String> = self
            .conn()
            .hvals(HookKeys::endpoints(tenant))
            .await
            .map_err(unavailable)?;
        let mut endpoints = values
            .iter()
            .map(|json| from_json::<EndpointRecord>(json))
            .collect::<Result<Vec<_>, _>>()?;
        endpoints.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        Ok(endpoints)
    }

    async fn endpoint(&self, tenant: &str, id: &str) -> Result<Option<EndpointRecord>, Error> {
        let json: Option<String> = self
            .conn()
            .hget(HookKeys::endpoints(tenant), id)
            .await
            .map_err(unavailable)?;
        json.as_deref().map(from_json).transpose()
    }

    async fn delete_endpoint(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        let removed: usize = DELETE_ENDPOINT
            .key(HookKeys::endpoints(tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(id)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(removed > 0)
    }

    async fn enqueue(&self, tenant: &str, deliveries: &[DeliveryRecord]) -> Result<usize, Error> {
        if deliveries.is_empty() {
            return Ok(0);
        }
        let mut invocation = ENQUEUE.prepare_invoke();
        invocation
            .key(HookKeys::deliveries())
            .key(HookKeys::attempts())
            .key(HookKeys::due())
            .key(HookKeys::queued())
            .key(HookKeys::log(tenant))
            .key(HookKeys::owners())
            .arg(tenant)
            .arg(self.limits.max_queued);
        for delivery in deliveries {
            invocation
                .arg(&delivery.id)
                .arg(to_json(delivery)?)
                .arg(delivery.next_attempt_ms)
                .arg(delivery.created_ms)
                .arg(&delivery.endpoint_id);
        }
        invocation
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)
    }

    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &Shares,
    ) -> Result<Vec<DeliveryRecord>, Error> {
        let mut invocation = CLAIM.prepare_invoke();
        invocation
            .key(HookKeys::due())
            .key(HookKeys::deliveries())
            .key(HookKeys::attempts())
            .key(HookKeys::owners())
            .arg(now_ms)
            .arg(lease_until_ms)
            .arg(limit)
            .arg(Shares::SCAN)
            .arg(shares.per_tenant.min(i64::MAX as usize))
            .arg(shares.per_endpoint.min(i64::MAX as usize))
            .arg(shares.tenants.len());
        for (tenant, used) in &shares.tenants {
            invocation.arg(tenant).arg(used);
        }
        for (endpoint, used) in &shares.endpoints {
            invocation.arg(endpoint).arg(used);
        }
        let reply: Vec<redis::Value> = invocation
            .invoke_async(&mut self.conn())
            .await
            .map_err(unavailable)?;
        claimed(reply)
    }

    async fn finish_attempt(&self, record: &DeliveryRecord) -> Result<bool, Error> {
        let recorded: i64 = FINISH
            .key(HookKeys::due())
            .key(HookKeys::deliveries())
            .key(HookKeys::attempts())
            .key(HookKeys::queued())
            .key(HookKeys::log(&record.tenant))
            .key(HookKeys::finished(&record.tenant))
            .key(HookKeys::owners())
            .arg(&record.id)
            .arg(record.attempts)
            .arg(to_json(record)?)
            .arg(status_code(record.status))
            .arg(record.next_attempt_ms)
            .arg(record.last_attempt_ms)
            .arg(&record.tenant)
            .arg(self.limits.keep_finished)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(recorded == 1)
    }

    async fn deliveries(
        &self,
        tenant: &str,
        endpoint_id: Option<&str>,
        status: Option<Status>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, Error> {
        let mut found = Vec::new();
        let mut start = 0;
        while found.len() < limit {
            let ids: Vec<String> = self
                .conn()
                .zrevrange(HookKeys::log(tenant), start, start + LIST_PAGE - 1)
                .await
                .map_err(unavailable)?;
            if ids.is_empty() {
                break;
            }
            start += LIST_PAGE;
            let (records, attempts): (Vec<Option<String>>, Vec<Option<u32>>) = redis::pipe()
                .cmd("HMGET")
                .arg(HookKeys::deliveries())
                .arg(&ids)
                .cmd("HMGET")
                .arg(HookKeys::attempts())
                .arg(&ids)
                .query_async(&mut self.conn())
                .await
                .map_err(unavailable)?;
            for (json, attempts) in records.into_iter().zip(attempts) {
                let Some(json) = json else { continue };
                let mut record: DeliveryRecord = from_json(&json)?;
                record.attempts = attempts.unwrap_or(record.attempts);
                if endpoint_id.is_none_or(|e| record.endpoint_id == e)
                    && status.is_none_or(|s| record.status == s)
                    && found.len() < limit
                {
                    found.push(record);
                }
            }
        }
        Ok(found)
    }

    async fn redeliver(
        &self,
        tenant: &str,
        id: &str,
        now_ms: u64,
        retry_until_ms: u64,
        audit: &AuditEntry,
    ) -> Result<DeliveryRecord, Error> {
        let not_found = || Error::NotFound("no delivery with that id".into());
        let (json, attempts): (Option<String>, Option<u32>) = redis::pipe()
            .hget(HookKeys::deliveries(), id)
            .hget(HookKeys::attempts(), id)
            .query_async(&mut self.conn())
            .await
            .map_err(unavailable)?;
        let mut record: DeliveryRecord = from_json(&json.ok_or_else(not_found)?)?;
        if record.tenant != tenant {
            return Err(not_found());
        }
        record.attempts = attempts.unwrap_or(record.attempts);
        record.status = Status::Pending;
        record.next_attempt_ms = now_ms;
        record.retry_until_ms = retry_until_ms;
        let reply: String = REDELIVER
            .key(HookKeys::due())
            .key(HookKeys::deliveries())
            .key(HookKeys::queued())
            .key(HookKeys::finished(tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(id)
            .arg(to_json(&record)?)
            .arg(now_ms)
            .arg(tenant)
            .arg(self.limits.max_queued)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_str() {
            "ok" => Ok(record),
            "full" => Err(too_many_queued(self.limits.max_queued)),
            _ => Err(not_found()),
        }
    }

    async fn unaudited(&self, limit: usize) -> Result<Vec<AuditEntry>, Error> {
        let Some(last) = limit.checked_sub(1) else {
            return Ok(Vec::new());
        };
        let mut conn = self.conn();
        let ids: Vec<String> = conn
            .zrange(HookKeys::unaudited_order(), 0, last as isize)
            .await
            .map_err(unavailable)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let entries: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(HookKeys::unaudited())
            .arg(&ids)
            .query_async(&mut conn)
            .await
            .map_err(unavailable)?;
        entries
            .iter()
            .flatten()
            .map(|json| from_json(json))
            .collect()
    }

    async fn audited(&self, ids: &[String]) -> Result<(), Error> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut invocation = AUDITED.prepare_invoke();
        invocation
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order());
        for id in ids {
            invocation.arg(id);
        }
        invocation
            .invoke_async::<i64>(&mut self.acked())
            .await
            .map(drop)
            .map_err(unavailable)
    }

    async fn schedule(&self, timer: &TimerRecord, due_ms: u64) -> Result<(), Error> {
        self.timer_op("schedule", &timer.id(), &to_json(timer)?, Some(due_ms))
            .await
    }

    async fn claim_timers(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
    ) -> Result<Vec<TimerRecord>, Error> {
        let reply: Vec<String> = CLAIM_TIMERS
            .key(HookKeys::timers_due())
            .key(HookKeys::timers())
            .arg(now_ms)
            .arg(lease_until_ms)
            .arg(limit)
            .invoke_async(&mut self.conn())
            .await
            .map_err(unavailable)?;
        reply.iter().map(|json| from_json(json)).collect()
    }

    async fn finish_timer(&self, timer: &TimerRecord, next_ms: Option<u64>) -> Result<(), Error> {
        self.timer_op("finish", &timer.id(), &to_json(timer)?, next_ms)
            .await
    }

    async fn put_note(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
        only_new: bool,
    ) -> Result<bool, Error> {
        let mut command = redis::cmd("SET");
        command
            .arg(HookKeys::note(key))
            .arg(value)
            .arg("PX")
            .arg(ttl_ms.max(1));
        if only_new {
            command.arg("NX");
        }
        let stored: Option<String> = command
            .query_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(stored.is_some())
    }

    async fn note(&self, key: &str) -> Result<Option<String>, Error> {
        self.conn()
            .get(HookKeys::note(key))
            .await
            .map_err(unavailable)
    }

    async fn cancel_timer(&self, timer_id: &str) -> Result<(), Error> {
        self.timer_op("cancel", timer_id, "", None).await
    }

    async fn put_person(&self, person: &PersonRecord, audit: &AuditEntry) -> Result<(), Error> {
        self.put_person_in(person, audit).await
    }

    async fn people(&self, tenant: &str) -> Result<Vec<PersonRecord>, Error> {
        self.people_of(tenant).await
    }

    async fn delete_person(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.delete_person_in(tenant, id, audit).await
    }

    async fn person_of(&self, tenant: &str, identity: &str) -> Result<Option<PersonRecord>, Error> {
        self.person_of_identity(tenant, identity).await
    }

    async fn put_policies(
        &self,
        set: &PolicySetRecord,
        audit: &AuditEntry,
    ) -> Result<PolicySetRecord, Error> {
        self.put_policies_in(set, audit).await
    }

    async fn policies(&self, tenant: &str) -> Result<Option<PolicySetRecord>, Error> {
        self.policies_of(tenant).await
    }

    async fn policies_version(&self, tenant: &str) -> Result<u64, Error> {
        self.policies_version_of(tenant).await
    }

    async fn put_grant(&self, grant: &GrantRecord, audit: &AuditEntry) -> Result<(), Error> {
        self.put_grant_in(grant, audit).await
    }

    async fn grants(&self, tenant: &str) -> Result<Vec<GrantRecord>, Error> {
        self.grants_of(tenant).await
    }

    async fn revoke_grant(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.revoke_grant_in(tenant, id, audit).await
    }

    async fn grants_version(&self, tenant: &str) -> Result<u64, Error> {
        self.grants_version_of(tenant).await
    }
}

impl RedisHookStore {
    async fn timer_op(
        &self,
        op: &str,
        id: &str,
        json: &str,
        due_ms: Option<u64>,
    ) -> Result<(), Error> {
        let _: String = TIMER
            .key(HookKeys::timers_due())
            .key(HookKeys::timers())
            .arg(op)
            .arg(id)
            .arg(json)
            .arg(due_ms.map(|d| d.to_string()).unwrap_or_default())
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
