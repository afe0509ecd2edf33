//! The reply to an ask's outcome: its secret answers opened for the waiting call, the
//! receipt of its action signed, and the resolution turned into the call's answer or
//! error. What the call keeps of the ask to do so is its [`Terms`].

use askgate_contract::{
    digest::answers_digest,
    receipt::{ApproverRule, ApproverStep, Claims, Decision},
};
use askgate_proto::v1::{AskResponse, QuestionAnswer, Resolution};
use tokio::sync::oneshot;
use tracing::Span;

use super::{AskFailure, Questions};
use crate::{
    approvals::secrets,
    domain::{Error, NewAsk, Outcome, SessionKey, approval},
};

/// What a waiting call keeps of an ask with approval terms, to settle it and to sign
/// its receipt: nothing for a plain ask.
#[derive(Debug, Default)]
pub(super) struct Terms {
    /// The action's digest (empty: no action, no receipt).
    action_digest: String,
    /// The ids of its secret questions.
    secret: Vec<String>,
    /// The ids of all its questions, in order, when some are secret: where the secret
    /// answers go back among the others.
    order: Vec<String>,
    /// What it resolves with when its lifetime ends.
    pub(super) default_answers: Vec<QuestionAnswer>,
    /// The answers that approve its action (empty without an action).
    approving: Vec<QuestionAnswer>,
    /// The subject that asked.
    asked_by: String,
    /// Who it allowed to answer, when it named them (its approvers and the approvers
    /// of its escalation steps).
    approver_rule: Option<ApproverRule>,
}

impl Terms {
    pub(super) fn of(ask: &NewAsk) -> Option<Box<Self>> {
        let secret: Vec<String> = ask
            .questions
            .iter()
            .filter(|q| q.secret)
            .map(|q| q.id.clone())
            .collect();
        // Approvers alone need no terms: without an action there is no receipt to name them.
        (!ask.action_digest.is_empty() || !secret.is_empty() || !ask.default_answers.is_empty())
            .then(|| {
                Box::new(Self {
                    action_digest: ask.action_digest.clone(),
                    order: match secret.is_empty() {
                        true => Vec::new(),
                        false => ask.questions.iter().map(|q| q.id.clone()).collect(),
                    },
                    secret,
                    default_answers: ask.default_answers.clone(),
                    approving: ask
                        .action
                        .as_ref()
                        .map(|a| a.approving_answers.clone())
                        .unwrap_or_default(),
                    asked_by: ask.asked_by.clone(),
                    approver_rule: approver_rule(ask),
                })
            })
    }
}

/// Who `ask` allows to answer, as its receipt states it: its approvers, and each
/// escalation step's that names any (None when nothing names approvers).
fn approver_rule(ask: &NewAsk) -> Option<ApproverRule> {
    if !approval::names_approvers_of(&ask.approvers, &ask.escalation) {
        return None;
    }
    let base = ask.approvers.as_deref();
    Some(ApproverRule {
        subjects: base.map(|a| a.subjects.clone()).unwrap_or_default(),
        groups: base.map(|a| a.groups.clone()).unwrap_or_default(),
        steps: ask
            .escalation
            .iter()
            .filter_map(|step| {
                let named = step.approvers.as_ref()?;
                Some(ApproverStep {
                    after_ms: step.after_ms,
                    subjects: named.subjects.clone(),
                    groups: named.groups.clone(),
                    replace: step.replace,
                })
            })
            .collect(),
    })
}

impl Questions {
    /// The call's reply to `outcome`: the answers (secret ones opened) and the
    /// receipt, or the error the resolution means.
    pub(super) fn finish(
        &self,
        outcome: Result<Outcome, oneshot::error::RecvError>,
        (terms, key, rpc_id): (Option<Box<Terms>>, SessionKey, String),
        span: &Span,
    ) -> Result<AskResponse, AskFailure> {
        if let Ok(outcome) = &outcome {
            span.record("askgate.channel", outcome.channel.as_str());
        }
        let outcome = outcome
            .map_err(|_| Error::Internal("ask dropped without an outcome".into()))
            .and_then(|outcome| self.unsealed(&key, &rpc_id, terms.as_deref(), outcome))
            .map_err(|error| AskFailure {
                error,
                rpc_id: Some(rpc_id.clone()),
                receipt: None,
            })?;
        let receipt = terms.and_then(|terms| self.receipt(&key, &rpc_id, &terms, &outcome));
        let fail = |error| AskFailure {
            error,
            rpc_id: Some(rpc_id.clone()),
            receipt: receipt.clone(),
        };
        match outcome.resolution {
            Resolution::Answered | Resolution::Defaulted | Resolution::AllowedByPolicy => {
                Ok(AskResponse {
                    rpc_id: rpc_id.clone(),
                    resolution: outcome.resolution.into(),
                    answers: outcome.answers,
                    resolved_by: outcome.resolved_by,
                    approvers: outcome.approvers,
                    receipt: receipt.clone().unwrap_or_default(),
                })
            }
            Resolution::Cancelled => Err(fail(Error::AskCancelled {
                reason: outcome.cancel_reason,
                origin: outcome.cancel_source,
            })),
            Resolution::Aborted => Err(fail(Error::AskAborted)),
            Resolution::Expired => Err(fail(Error::AskExpired)),
            Resolution::Disposed => Err(fail(Error::ShuttingDown)),
            Resolution::Unspecified => Err(fail(Error::Internal(
                "ask resolved without a resolution".into(),
            ))),
        }
    }

    /// `outcome` with its secret answers opened and back among the others: what the
    /// waiting call, and only it, gets.
    fn unsealed(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        terms: Option<&Terms>,
        mut outcome: Outcome,
    ) -> Result<Outcome, Error> {
        let sealed = std::mem::take(&mut outcome.sealed_answers);
        if sealed.is_empty() {
            return Ok(outcome);
        }
        let Some(sealing) = &self.sealing else {
            return Err(Error::Internal(
                "a secret answer came to a node without --secret-key-file".into(),
            ));
        };
        let secret = secrets::open(sealing, key, rpc_id, &sealed)?;
        // A retry whose batch names no secret question (it differs from the ask it
        // joined) gets the secret answers after the others.
        let order = terms.map_or(&[][..], |t| t.order.as_slice());
        outcome.answers = approval::merge_secret(order, outcome.answers, secret);
        Ok(outcome)
    }

    /// The receipt of an ask with an action, when the server signs receipts.
    pub(super) fn receipt(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        terms: &Terms,
        outcome: &Outcome,
    ) -> Option<String> {
        let receipts = self
            .receipts
            .as_ref()
            .filter(|_| !terms.action_digest.is_empty())?;
        let claims = Claims {
            iss: String::new(),
            tenant: key.tenant.to_string(),
            session_id: key.session_id.to_string(),
            rpc_id: rpc_id.to_owned(),
            action_digest: terms.action_digest.clone(),
            resolution: outcome.resolution.as_str_name().to_owned(),
            decision: Decision::of(outcome.resolution, &outcome.answers, &terms.approving)
                .as_str()
                .to_owned(),
            asked_by: terms.asked_by.clone(),
            answers_digest: answers_digest(&outcome.answers, |id| {
                terms.secret.iter().any(|s| s == id)
            }),
            approvers: outcome.approvers.clone(),
            approver_rule: terms.approver_rule.clone(),
            on_behalf_of: outcome.on_behalf_of.clone().unwrap_or_default(),
            resolved_by: outcome.resolved_by.clone(),
            iat: 0,
            exp: 0,
            jti: rpc_id.to_owned(),
        };
        receipts
            .sign(claims)
            .inspect_err(|e| tracing::error!(%rpc_id, "signing a receipt failed: {e:#}"))
            .ok()
    }
}
