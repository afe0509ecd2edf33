//! The policy sets (`service Policies`) and standing grants (`service Grants`) of the
//! in-memory webhook store: a set per tenant, and per tenant its grants, newest
//! first, with a version every change counts on.

use std::collections::HashMap;

use askgate_core::{
    backend::{
        audit::AuditEntry,
        hooks::records::{GrantRecord, PolicySetRecord},
    },
    domain::{Error, policy_set::MAX_GRANTS_PER_TENANT},
};

use super::{MemoryHookStore, State};
use crate::memory::journal::HookChange;

/// The grants of every tenant.
#[derive(Default)]
pub(super) struct Grants {
    by_tenant: HashMap<String, TenantGrants>,
}

#[derive(Default)]
struct TenantGrants {
    /// Newest first.
    grants: Vec<GrantRecord>,
    version: u64,
}

impl Grants {
    /// Puts back a grant a store kept.
    pub(super) fn restore(&mut self, grant: GrantRecord) {
        let tenant = self.by_tenant.entry(grant.tenant.clone()).or_default();
        tenant.grants.push(grant);
        tenant
            .grants
            .sort_by_key(|g| std::cmp::Reverse(g.created_ms));
        tenant.version += 1;
    }
}

impl MemoryHookStore {
    pub(super) async fn put_policies_in(
        &self,
        set: &PolicySetRecord,
        audit: &AuditEntry,
    ) -> Result<PolicySetRecord, Error> {
        self.change(|state: &mut State| {
            let version = state.policies.get(&set.tenant).map_or(0, |s| s.version) + 1;
            let stored = PolicySetRecord {
                version,
                ..set.clone()
            };
            state.policies.insert(set.tenant.clone(), stored.clone());
            let change = HookChange::PoliciesPut {
                record: Box::new(stored.clone()),
            };
            self.record_audited(state, change, audit);
            Ok(stored)
        })
        .await
    }

    pub(super) fn policy_set(&self, tenant: &str) -> Option<PolicySetRecord> {
        self.state.lock().policies.get(tenant).cloned()
    }

    pub(super) async fn put_grant_in(
        &self,
        grant: &GrantRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        self.change(|state: &mut State| {
            let tenant = state
                .grants
                .by_tenant
                .entry(grant.tenant.clone())
                .or_default();
            let (kept, expired): (Vec<GrantRecord>, Vec<GrantRecord>) =
                std::mem::take(&mut tenant.grants)
                    .into_iter()
                    .partition(|g| g.expires_ms > grant.created_ms);
            tenant.grants = kept;
            if tenant.grants.len() >= MAX_GRANTS_PER_TENANT {
                tenant.grants.extend(expired);
                tenant
                    .grants
                    .sort_by_key(|g| std::cmp::Reverse(g.created_ms));
                return Err(Error::TooManyWebhooks(format!(
                    "at most {MAX_GRANTS_PER_TENANT} standing grants per tenant: revoke some"
                )));
            }
            tenant.grants.insert(0, grant.clone());
            tenant.version += 1;
            for old in expired {
                self.record(|| HookChange::GrantDeleted {
                    tenant: old.tenant,
                    id: old.id,
                });
            }
            let change = HookChange::GrantPut {
                record: Box::new(grant.clone()),
            };
            self.record_audited(state, change, audit);
            Ok(())
        })
        .await
    }

    pub(super) fn grants_of(&self, tenant: &str) -> Vec<GrantRecord> {
        let state = self.state.lock();
        state
            .grants
            .by_tenant
            .get(tenant)
            .map(|t| t.grants.clone())
            .unwrap_or_default()
    }

    pub(super) async fn revoke_grant_in(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.change(|state: &mut State| {
            let Some(grants) = state.grants.by_tenant.get_mut(tenant) else {
                return Ok(false);
            };
            let before = grants.grants.len();
            grants.grants.retain(|g| g.id != id);
            if grants.grants.len() == before {
                return Ok(false);
            }
            grants.version += 1;
            let change = HookChange::GrantDeleted {
                tenant: tenant.to_owned(),
                id: id.to_owned(),
            };
            self.record_audited(state, change, audit);
            Ok(true)
        })
        .await
    }

    pub(super) fn grants_version_of(&self, tenant: &str) -> u64 {
        let state = self.state.lock();
        state.grants.by_tenant.get(tenant).map_or(0, |t| t.version)
    }
}
