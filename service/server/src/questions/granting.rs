//! Standing grants (docs/policy.md): an answer that approves an ask's action may ask
//! to allow the same action from now on, in a session, for an agent or for the whole
//! tenant, for a while. The grant is checked before the answer is claimed and kept
//! once the answer resolved the ask; later asks it allows are allowed at once
//! ([`super::policing`]).

use askgate_contract::receipt::approves;
use askgate_proto::v1::{GrantRequest, QuestionAnswer, Requested};
use serde_json::json;

use super::Questions;
use crate::{
    backend::{audit_log::Audit, hooks::records::GrantRecord},
    domain::{
        Error, Resolver, SessionKey,
        policy_set::{GrantScope, MAX_GRANT_MATCH_BYTES, MAX_GRANT_TTL_MS},
    },
};

/// Shortest a grant may hold.
const MIN_GRANT_TTL_MS: u64 = 1000;

impl Questions {
    /// The grant `request` asks for with `answers` to `pending`, checked: the ask has
    /// an action, the answers approve it, it is no quorum ask (one person's answer
    /// stands for nobody else's), the scope can hold (`agent` needs an ask that named
    /// its agent), the lifetime and the match are within bounds.
    pub(super) fn grant_of(
        &self,
        key: &SessionKey,
        pending: &Requested,
        answers: &[QuestionAnswer],
        request: &GrantRequest,
        by: &Resolver,
    ) -> Result<GrantRecord, Error> {
        let bad = |field: &str, why: &str| Error::bad_request(format!("grant.{field}"), why);
        if self.hooks.is_none() {
            return Err(bad("scope", "this server keeps no grants"));
        }
        let Some(action) = pending.action.as_deref() else {
            return Err(bad("scope", "the ask has no action to allow"));
        };
        if !approves(answers, &action.approving_answers) {
            return Err(bad(
                "scope",
                "only an answer that approves the action grants",
            ));
        }
        if pending.quorum.is_some_and(|q| q.count > 1) {
            return Err(bad(
                "scope",
                "a quorum ask's approval grants nothing: one person stands for no other",
            ));
        }
        let scope = GrantScope::parse("grant.scope", &request.scope)?;
        let agent_id = pending
            .agent
            .as_ref()
            .map(|a| a.agent_id.clone())
            .unwrap_or_default();
        if scope == GrantScope::Agent && agent_id.is_empty() {
            return Err(bad("scope", "the ask named no agent for an agent grant"));
        }
        if !(MIN_GRANT_TTL_MS..=MAX_GRANT_TTL_MS).contains(&request.ttl_ms) {
            return Err(bad("ttl_ms", "is 1 second to 30 days"));
        }
        if !request.match_json.is_empty() {
            if request.match_json.len() > MAX_GRANT_MATCH_BYTES {
                return Err(bad("match_json", "is at most 4 KiB"));
            }
            let wanted: serde_json::Value = serde_json::from_str(&request.match_json)
                .map_err(|e| bad("match_json", &format!("is not JSON: {e}")))?;
            if !wanted.is_object() {
                return Err(bad("match_json", "is a JSON object"));
            }
        }
        let now = askgate_core::clock::now_ms();
        Ok(GrantRecord {
            tenant: key.tenant.to_string(),
            id: uuid::Uuid::now_v7().to_string(),
            scope,
            session_id: match scope {
                GrantScope::Session => key.session_id.to_string(),
                _ => String::new(),
            },
            agent_id: match scope {
                GrantScope::Agent => agent_id,
                _ => String::new(),
            },
            action_name: action.name.clone(),
            action_digest: pending.action_digest.clone(),
            match_json: request.match_json.clone(),
            granted_by: by.subject.clone(),
            asked_by: pending.asked_by.clone(),
            rpc_id: pending.rpc_id.clone(),
            created_ms: now,
            expires_ms: now.saturating_add(request.ttl_ms),
        })
    }

    /// Keeps a grant whose answer resolved its ask, with its audit record.
    pub(super) async fn grant(&self, grant: &GrantRecord, by: &Resolver) -> Result<(), Error> {
        let Some(store) = &self.hooks else {
            return Ok(());
        };
        let details = json!({
            "id": grant.id,
            "scope": grant.scope.as_str(),
            "session_id": grant.session_id,
            "agent_id": grant.agent_id,
            "action": grant.action_name,
            "action_digest": grant.action_digest,
            "match_json": grant.match_json,
            "rpc_id": grant.rpc_id,
            "expires_ms": grant.expires_ms,
        });
        let audit = Audit::admin_entry(&grant.tenant, by, "grant.created", details);
        store.put_grant(grant, &audit).await?;
        if let Some(book) = &self.policies {
            book.grants_changed(&grant.tenant);
        }
        if let Some(log) = &self.audit {
            log.drain(&**store).await?;
        }
        Ok(())
    }
}
