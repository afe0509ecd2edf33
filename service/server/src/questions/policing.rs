//! The tenant's policy before asking (docs/policy.md): an ask with an action is judged
//! by its tenant's Cedar policies before anyone is asked. Denied: the call fails
//! DENIED_BY_POLICY. Allowed: it returns at once, ALLOWED_BY_POLICY with a receipt.
//! Asked: an asking permit's annotations fill what the ask left unset. In shadow mode
//! every ask is asked, and the decision only recorded. Every decision is counted,
//! and audited: an allowed or denied ask in a record of its own (`ask.policy`), an
//! asked one in its resolution's record (its `requested.policy`).

use std::{sync::Arc, time::SystemTime};

use askgate_core::clock::now_ms;
use askgate_proto::v1::{AskResponse, PolicyDecision, QuestionAnswer, Resolution};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::{AskFailure, Questions, settling::Terms};
use crate::{
    backend::{
        audit::{self, Decided},
        hooks::records::Mode,
    },
    domain::{Error, NewAsk, Outcome, SessionKey, answer, policy_set::GrantedAsk},
    policy::{Asked, Decision, Fill, approvers},
};

/// What an ask comes to before anyone is asked.
pub(super) enum Policed {
    /// Asked: its policy decision (if any) recorded in it, its terms filled.
    Ask,
    /// Allowed or denied: the call's reply.
    Decided(Result<AskResponse, AskFailure>),
}

/// The call's deadline, which an asking permit's `@ttl` may shorten (unless the ask set
/// its own lifetime).
pub(super) struct Lifetime<'a> {
    pub deadline: &'a mut Instant,
    pub started: Instant,
}

impl Questions {
    /// Judges `ask` by its tenant's policies and grants, when it has an action and the
    /// tenant has either.
    pub(super) async fn police(&self, ask: &mut NewAsk, lifetime: Lifetime<'_>) -> Policed {
        let (Some(book), Some(action)) = (&self.policies, &ask.action) else {
            return Policed::Ask;
        };
        let tenant = &ask.key.tenant;
        let (compiled, grants) = match tokio::try_join!(book.current(tenant), book.grants(tenant)) {
            Ok(found) => found,
            Err(error) => return Policed::Decided(Err(error.into())),
        };
        if compiled.is_none() && grants.is_empty() {
            return Policed::Ask;
        }
        let arguments = match action.arguments_json.trim() {
            "" => serde_json::Value::Object(Default::default()),
            // Checked as I-JSON when the ask was.
            text => serde_json::from_str(text).unwrap_or_default(),
        };
        let decision = match compiled.as_ref().map(|c| &c.policies) {
            Some(Ok(policies)) => policies.decide(&Asked {
                subject: &ask.asked_by,
                groups: &ask.asked_groups,
                action: &action.name,
                session: &ask.key.session_id,
                arguments: &arguments,
                labels: &ask.labels,
            }),
            Some(Err(broken)) => Decision::NotJudged(format!("the stored policy set: {broken}")),
            None => Decision::NoMatch,
        };
        let mode = compiled.as_ref().map_or(Mode::Enforce, |c| c.mode);
        let shadow = mode == Mode::Shadow;
        // A standing grant allows what no enforced forbid denies.
        let forbidden = !shadow && matches!(decision, Decision::Deny { .. });
        let granted = ask.agent.as_ref().map_or("", |a| a.agent_id.as_str());
        let held = GrantedAsk {
            session_id: &ask.key.session_id,
            asked_by: &ask.asked_by,
            agent_id: granted,
            action_name: &action.name,
            action_digest: &ask.action_digest,
            arguments: &arguments,
            now_ms: now_ms(),
        };
        if let Some(grant) = grants.iter().find(|g| !forbidden && g.allows(&held)) {
            self.metrics.policy_decided(tenant, "grant", mode.as_str());
            let record = PolicyDecision {
                decision: "grant".to_owned(),
                policy_id: grant.id.clone(),
                reason: String::new(),
                shadow: false,
            };
            let approvers = vec![format!("grant:{}", grant.id), grant.granted_by.clone()];
            return Policed::Decided(self.allowed(ask, approvers, record).await);
        }
        if compiled.is_none() {
            return Policed::Ask;
        }
        let mut record = decision_record(&decision, shadow);
        self.metrics
            .policy_decided(tenant, &record.decision, mode.as_str());
        match decision {
            Decision::Deny { .. } if !shadow => {
                Policed::Decided(Err(self.denied(ask, record).await))
            }
            Decision::Allow { policy } if !shadow => {
                let approvers = vec![format!("policy:{policy}")];
                Policed::Decided(self.allowed(ask, approvers, record).await)
            }
            Decision::Ask { fill, .. } if !shadow => {
                if let Some(unused) = self.fill(ask, fill, lifetime) {
                    record.reason = unused;
                }
                ask.policy = Some(Box::new(record));
                Policed::Ask
            }
            _ => {
                ask.policy = Some(Box::new(record));
                Policed::Ask
            }
        }
    }

    /// The refusal of an ask the policy `record` denies, once it is audited (a denial
    /// whose record cannot be written still denies: it runs nothing).
    async fn denied(&self, ask: &NewAsk, record: PolicyDecision) -> AskFailure {
        let rpc_id = decision_id(ask);
        if let Err(e) = self.audit_decision(ask, &rpc_id, &record).await {
            tracing::warn!(%rpc_id, "recording a policy's denial failed: {e}");
        }
        AskFailure {
            error: Error::DeniedByPolicy {
                policy: record.policy_id,
                reason: record.reason,
            },
            rpc_id: Some(rpc_id),
            receipt: None,
        }
    }

    /// The reply to an ask a policy or a grant allows: its approving answers,
    /// `approvers` (`policy:<id>`, or `grant:<id>` and who granted it; the first is
    /// `resolved_by`), and a receipt stating `approved`, once the decision is audited
    /// (an allowance that cannot be recorded is no allowance: the call fails).
    async fn allowed(
        &self,
        ask: &NewAsk,
        approvers: Vec<String>,
        record: PolicyDecision,
    ) -> Result<AskResponse, AskFailure> {
        let rpc_id = decision_id(ask);
        self.audit_decision(ask, &rpc_id, &record)
            .await
            .map_err(|error| AskFailure {
                error,
                rpc_id: Some(rpc_id.clone()),
                receipt: None,
            })?;
        let answers = ask
            .action
            .as_ref()
            .map(|a| a.approving_answers.clone())
            .unwrap_or_default();
        let outcome = Outcome {
            resolution: Resolution::AllowedByPolicy,
            answers,
            resolved_by: approvers.first().cloned().unwrap_or_default(),
            cancel_reason: None,
            cancel_source: Default::default(),
            approvers,
            channel: "policy".to_owned(),
            sealed_answers: String::new(),
            answers_hmac: String::new(),
            on_behalf_of: None,
        };
        let receipt = Terms::of(ask)
            .and_then(|terms| self.receipt(&ask.key, &rpc_id, &terms, &outcome))
            .unwrap_or_default();
        Ok(AskResponse {
            rpc_id,
            answers: outcome.answers,
            resolved_by: outcome.resolved_by,
            receipt,
            approvers: outcome.approvers,
            resolution: Resolution::AllowedByPolicy.into(),
        })
    }

    /// Appends the record of a decision that asked nobody, durably.
    async fn audit_decision(
        &self,
        ask: &NewAsk,
        rpc_id: &str,
        record: &PolicyDecision,
    ) -> Result<(), Error> {
        let Some(log) = &self.audit else {
            return Ok(());
        };
        let entry = audit::policy_decision(&Decided {
            tenant: &ask.key.tenant,
            session_id: &ask.key.session_id,
            rpc_id,
            subject: &ask.asked_by,
            action: ask.action.as_ref().map_or("", |a| a.name.as_str()),
            action_digest: &ask.action_digest,
            policy: record,
        });
        log.record(vec![entry]).await
    }

    /// Fills what `ask` left unset with an asking permit's annotations; says which
    /// annotation could not be used, if one could not.
    fn fill(&self, ask: &mut NewAsk, fill: Fill, lifetime: Lifetime<'_>) -> Option<String> {
        if ask.approvers.is_none() {
            ask.approvers = approvers(&fill.approvers).map(Box::new);
        }
        if ask.quorum <= 1
            && let Some(quorum) = fill.quorum.filter(|q| *q > 1)
        {
            ask.quorum = quorum;
        }
        if !ask.own_ttl
            && let Some(ttl) = fill.ttl
        {
            let deadline = (*lifetime.deadline).min(lifetime.started + ttl);
            *lifetime.deadline = deadline;
            let remaining = deadline.saturating_duration_since(Instant::now());
            ask.expires_at = SystemTime::now().checked_add(remaining);
        }
        let label = fill.default.filter(|_| ask.default_answers.is_empty())?;
        let first = ask.questions.first().map(|q| q.id.clone())?;
        let default = QuestionAnswer {
            id: first,
            selected: vec![label.clone()],
            custom: None,
        };
        match answer::normalize(&ask.questions, vec![default], &self.limits) {
            Ok(answers) => {
                ask.default_answers = answers;
                None
            }
            Err(_) => Some(format!(
                "@default {:?} is no complete answer to this ask: not applied",
                crate::domain::bounded(&label).to_string()
            )),
        }
    }
}

/// What the ask's requested event (or its record) says of `decision`.
fn decision_record(decision: &Decision, shadow: bool) -> PolicyDecision {
    let (name, policy_id, reason) = match decision {
        Decision::Deny { policy, reason } => ("deny", policy.clone(), reason.clone()),
        Decision::Allow { policy } => ("allow", policy.clone(), String::new()),
        Decision::Ask { policy, .. } => ("ask", policy.clone(), String::new()),
        Decision::NoMatch => ("no_match", String::new(), String::new()),
        Decision::NotJudged(why) => ("not_judged", String::new(), why.clone()),
    };
    PolicyDecision {
        decision: name.to_owned(),
        policy_id,
        reason,
        shadow,
    }
}

/// The rpc_id of an ask decided without asking: the same for every retry of one
/// request_id (so that a receipt's `jti` names one decision, and an executor runs an
/// allowed action once), a fresh one without.
fn decision_id(ask: &NewAsk) -> String {
    if ask.request_id.is_empty() {
        return uuid::Uuid::now_v7().to_string();
    }
    let SessionKey {
        tenant, session_id, ..
    } = &ask.key;
    let named = format!(
        "{tenant}\u{1f}{session_id}\u{1f}{}\u{1f}{}",
        ask.request_id, ask.action_digest
    );
    let digest = Sha256::digest(named.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// What a node needs to judge asks: the policy book, shared by its entry points.
pub type Book = Arc<crate::policy::book::PolicyBook>;
