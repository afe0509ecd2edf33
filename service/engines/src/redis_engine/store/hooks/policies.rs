//! The policy sets of the Redis webhook store (`service Policies`): per tenant, a hash
//! of the set's JSON and its version, on the `{hooks}` slot. Every node compares the
//! version with its compiled copy, so a put reaches every node at its next check.

use redis::AsyncCommands;

use askgate_core::{
    backend::{audit::AuditEntry, hooks::records::PolicySetRecord},
    domain::Error,
};

use super::{RedisHookStore, from_json, to_json};
use crate::redis_engine::{
    keys::HookKeys,
    store::{scripts::hook_scripts::PUT_POLICIES, unavailable},
};

impl RedisHookStore {
    pub(super) async fn put_policies_in(
        &self,
        set: &PolicySetRecord,
        audit: &AuditEntry,
    ) -> Result<PolicySetRecord, Error> {
        let version: u64 = PUT_POLICIES
            .key(HookKeys::policies(&set.tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(to_json(set)?)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(PolicySetRecord {
            version,
            ..set.clone()
        })
    }

    pub(super) async fn policies_of(&self, tenant: &str) -> Result<Option<PolicySetRecord>, Error> {
        let (version, record): (Option<u64>, Option<String>) = self
            .conn()
            .hmget(HookKeys::policies(tenant), &["version", "record"])
            .await
            .map_err(unavailable)?;
        let (Some(version), Some(record)) = (version, record) else {
            return Ok(None);
        };
        let set: PolicySetRecord = from_json(&record)?;
        Ok(Some(PolicySetRecord { version, ..set }))
    }

    pub(super) async fn policies_version_of(&self, tenant: &str) -> Result<u64, Error> {
        let version: Option<u64> = self
            .conn()
            .hget(HookKeys::policies(tenant), "version")
            .await
            .map_err(unavailable)?;
        Ok(version.unwrap_or(0))
    }
}
