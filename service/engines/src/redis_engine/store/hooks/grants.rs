//! The standing grants of the Redis webhook store (`service Grants`): per tenant, a
//! hash of grants by id and a version every change counts on, on the `{hooks}` slot.

use redis::AsyncCommands;

use askgate_core::{
    backend::{audit::AuditEntry, hooks::records::GrantRecord},
    domain::{Error, policy_set::MAX_GRANTS_PER_TENANT},
};

use super::{RedisHookStore, from_json, to_json};
use crate::redis_engine::{
    keys::HookKeys,
    store::{
        scripts::hook_scripts::{PUT_GRANT, REVOKE_GRANT},
        unavailable,
    },
};

impl RedisHookStore {
    pub(super) async fn put_grant_in(
        &self,
        grant: &GrantRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        let reply: String = PUT_GRANT
            .key(HookKeys::grants(&grant.tenant))
            .key(HookKeys::grants_version(&grant.tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(&grant.id)
            .arg(to_json(grant)?)
            .arg(grant.created_ms)
            .arg(MAX_GRANTS_PER_TENANT)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_str() {
            "ok" => Ok(()),
            _ => Err(Error::TooManyWebhooks(format!(
                "at most {MAX_GRANTS_PER_TENANT} standing grants per tenant: revoke some"
            ))),
        }
    }

    pub(super) async fn grants_of(&self, tenant: &str) -> Result<Vec<GrantRecord>, Error> {
        let values: Vec<String> = self
            .conn()
            .hvals(HookKeys::grants(tenant))
            .await
            .map_err(unavailable)?;
        let mut grants = values
            .iter()
            .map(|json| from_json::<GrantRecord>(json))
            .collect::<Result<Vec<_>, _>>()?;
        grants.sort_by_key(|g| std::cmp::Reverse(g.created_ms));
        Ok(grants)
    }

    pub(super) async fn revoke_grant_in(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        let removed: i64 = REVOKE_GRANT
            .key(HookKeys::grants(tenant))
            .key(HookKeys::grants_version(tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(id)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(removed == 1)
    }

    pub(super) async fn grants_version_of(&self, tenant: &str) -> Result<u64, Error> {
        let version: Option<u64> = self
            .conn()
            .get(HookKeys::grants_version(tenant))
            .await
            .map_err(unavailable)?;
        Ok(version.unwrap_or(0))
    }
}
