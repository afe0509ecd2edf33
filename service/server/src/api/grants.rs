//! `askgate.v1.Grants`: the tenant's standing grants (docs/policy.md), for the admin
//! role with a credential not limited to some sessions. A revocation is audited with
//! the change, and ends the grant on every node within a second.

use std::sync::Arc;

use askgate_proto::v1::{
    Grant, ListGrantsRequest, ListGrantsResponse, RevokeGrantRequest, RevokeGrantResponse,
    grants_server::Grants as GrantsService,
};
use serde_json::json;
use tonic::{Request, Response, Status};
use tracing::instrument;

use super::{Gate, failed, resolver};
use crate::{
    auth::Action,
    backend::{
        audit_log::Audit,
        hooks::{HookStore, records::GrantRecord},
    },
    domain::{Error, validate},
    policy::book::PolicyBook,
};

/// The `askgate.v1.Grants` service.
pub struct GrantsApi {
    gate: Gate,
    hooks: Arc<dyn HookStore>,
    audit: Audit,
    book: Arc<PolicyBook>,
}

impl GrantsApi {
    pub fn new(gate: Gate, hooks: Arc<dyn HookStore>, audit: Audit, book: Arc<PolicyBook>) -> Self {
        Self {
            gate,
            hooks,
            audit,
            book,
        }
    }
}

#[tonic::async_trait]
impl GrantsService for GrantsApi {
    #[instrument(name = "ListGrants", skip_all, fields(tenant))]
    async fn list_grants(
        &self,
        request: Request<ListGrantsRequest>,
    ) -> Result<Response<ListGrantsResponse>, Status> {
        let _timer = self.gate.timer("ListGrants");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let now = askgate_core::clock::now_ms();
        let grants = self.hooks.grants(&caller.tenant).await.map_err(failed)?;
        Ok(Response::new(ListGrantsResponse {
            grants: grants
                .iter()
                .filter(|g| g.expires_ms > now)
                .map(to_proto)
                .collect(),
        }))
    }

    #[instrument(name = "RevokeGrant", skip_all, fields(tenant))]
    async fn revoke_grant(
        &self,
        request: Request<RevokeGrantRequest>,
    ) -> Result<Response<RevokeGrantResponse>, Status> {
        let _timer = self.gate.timer("RevokeGrant");
        let caller = self.gate.admit(&request, Action::ManageWebhooks, "")?;
        let by = resolver(&request, &caller)?;
        let id = request.into_inner().id;
        validate::text("id", &id, validate::MAX_ID_BYTES).map_err(failed)?;
        let audit = Audit::admin_entry(&caller.tenant, &by, "grant.revoked", json!({ "id": id }));
        match self.hooks.revoke_grant(&caller.tenant, &id, &audit).await {
            Ok(true) => {
                self.book.grants_changed(&caller.tenant);
                if let Err(e) = self.audit.drain(&*self.hooks).await {
                    tracing::warn!("a revocation's audit record waits to be appended: {e}");
                }
                Ok(Response::new(RevokeGrantResponse {}))
            }
            Ok(false) => Err(failed(Error::NotFound("no grant with that id".into()))),
            Err(e) => Err(failed(e)),
        }
    }
}

fn to_proto(grant: &GrantRecord) -> Grant {
    let at = |ms: u64| Some((std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)).into());
    Grant {
        id: grant.id.clone(),
        scope: grant.scope.as_str().into(),
        session_id: grant.session_id.clone(),
        agent_id: grant.agent_id.clone(),
        action_name: grant.action_name.clone(),
        action_digest: grant.action_digest.clone(),
        match_json: grant.match_json.clone(),
        granted_by: grant.granted_by.clone(),
        rpc_id: grant.rpc_id.clone(),
        created_at: at(grant.created_ms),
        expires_at: at(grant.expires_ms),
    }
}
