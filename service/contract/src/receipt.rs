//! Receipts: what an executor checks before it runs an action a human approved
//! (docs/approvals.md).
//!
//! A resolution of an ask that carries an [`Action`] comes with a receipt: a compact
//! JWS signed by the server (EdDSA over Ed25519) whose claims bind the decision to
//! the tenant and the action's digest. [`verify_receipt`] checks the signature against
//! the server's published keys (`GET /.well-known/jwks.json`), the expiry, that the
//! receipt is of the executor's tenant, that the digest is the digest of the action
//! about to run, and that the decision is [`Decision::Approved`]: an executor handed
//! another tenant's approval, other arguments than the ones the human saw, or a
//! "Reject" refuses to run. The SDKs' `consume_receipt` then makes it single use.
//!
//! The digests are SHA-256 over RFC 8785 canonical JSON, so the key order and the
//! spacing of the arguments do not matter, and any client in any language computes
//! the same digest. Arguments must be I-JSON (RFC 7493, [`crate::ijson`]): a number a double
//! would change has no digest ([`crate::digest`]).

use askgate_proto::v1::{Action, Question, QuestionAnswer, Resolution};
/// A JWK Set: the server's public keys, as `GET /.well-known/jwks.json` serves them
/// (parse it with `serde_json`).
pub use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};

use crate::digest::{DigestError, action_digest};

/// The `iss` of every receipt.
pub const ISSUER: &str = "askgate";

/// What an ask decided about its action: a receipt's `decision` claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// ANSWERED (the quorum met, where there is one) with the approving answers, or
    /// ALLOWED_BY_POLICY.
    Approved,
    /// ANSWERED with anything else: another option, own words, a skip.
    Rejected,
    /// The ask's lifetime ended and its default answers apply, whatever they say.
    Defaulted,
    /// A human closed the batch (or a quorum's approvers disagreed).
    Cancelled,
    /// Nobody answered in time.
    Expired,
    /// The asking side gave up, or the node shut down with nobody to reattach.
    Aborted,
}

impl Decision {
    /// The claim's value: `approved`, `rejected`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Defaulted => "defaulted",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Aborted => "aborted",
        }
    }

    /// The decision a claim's value names.
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Approved,
            Self::Rejected,
            Self::Defaulted,
            Self::Cancelled,
            Self::Expired,
            Self::Aborted,
        ]
        .into_iter()
        .find(|d| d.as_str() == text)
    }

    /// What an ask that ended with `resolution` and `answers` decided, `approving`
    /// being its approving answers ([`approving_answers`]).
    pub fn of(
        resolution: Resolution,
        answers: &[QuestionAnswer],
        approving: &[QuestionAnswer],
    ) -> Self {
        match resolution {
            Resolution::Answered if approves(answers, approving) => Self::Approved,
            // The tenant's policy allowed it: nobody answered, the action may run.
            Resolution::AllowedByPolicy => Self::Approved,
            Resolution::Answered => Self::Rejected,
            Resolution::Defaulted => Self::Defaulted,
            Resolution::Cancelled => Self::Cancelled,
            Resolution::Expired => Self::Expired,
            Resolution::Aborted | Resolution::Disposed | Resolution::Unspecified => Self::Aborted,
        }
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `answers` give every approving answer exactly: for each question an
/// approving answer names, the same options (in any order) and no own words. Nothing
/// approves when there is no approving answer.
pub fn approves(answers: &[QuestionAnswer], approving: &[QuestionAnswer]) -> bool {
    !approving.is_empty()
        && approving.iter().all(|wanted| {
            answers.iter().any(|given| {
                given.id == wanted.id
                    && given.custom == wanted.custom
                    && same_labels(&given.selected, &wanted.selected)
            })
        })
}

fn same_labels(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|label| b.contains(label))
}

/// Who an ask allowed to answer (its `approvers`), as a receipt states it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproverRule {
    /// The subjects it named (credential subjects or channel identities).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// The groups it named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Its escalation steps that named approvers: from `after_ms` after the ask, theirs
    /// joined (or, with `replace`, replaced) the ones before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<ApproverStep>,
}

/// An escalation step's approvers, as a receipt's `approver_rule` states them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproverStep {
    pub after_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
}

/// What a receipt states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Always [`ISSUER`].
    pub iss: String,
    /// The tenant of the ask.
    pub tenant: String,
    /// The session of the ask.
    pub session_id: String,
    /// The ask. One decision has one rpc_id: the receipts of one ask (a retried call
    /// gets one again) share their `jti`, so an executor that records the `jti`s it
    /// ran runs each approved action once.
    pub rpc_id: String,
    /// Lowercase hex SHA-256 of the action's canonical JSON ([`action_digest`]).
    pub action_digest: String,
    /// How the ask ended: `ANSWERED`, `DEFAULTED`, `CANCELLED`, `EXPIRED`, ...
    pub resolution: String,
    /// What it decided about the action ([`Decision`]): only `approved` lets it run.
    /// Empty in a receipt from before decisions were stated: never approved.
    #[serde(default)]
    pub decision: String,
    /// The subject of the credential that asked: an approver equal to it approved its
    /// own request.
    #[serde(default)]
    pub asked_by: String,
    /// Lowercase hex SHA-256 of the answers' canonical JSON ([`answers_digest`]).
    pub answers_digest: String,
    /// The subjects whose answers resolved the ask (every approver of a quorum).
    pub approvers: Vec<String>,
    /// Who the ask allowed to answer, when it named its approvers: absent when anyone
    /// who may answer the session could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver_rule: Option<ApproverRule>,
    /// The person (their id) the approver stood in for while a delegation held: the
    /// receipt names both. Absent otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub on_behalf_of: String,
    /// Who resolved it: the last approver, the person who cancelled, or `askgate`.
    #[serde(default)]
    pub resolved_by: String,
    /// Issued at, in seconds since the Unix epoch.
    pub iat: u64,
    /// Expires at, in seconds since the Unix epoch.
    pub exp: u64,
    /// The rpc_id again: see [`Claims::rpc_id`].
    pub jti: String,
}

impl Claims {
    /// The decision the receipt states, if it names one this client knows.
    pub fn decision(&self) -> Option<Decision> {
        Decision::parse(&self.decision)
    }
}

/// Why a receipt is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// Not a compact JWS askgate could have signed (or not EdDSA).
    #[error("the receipt is malformed: {0}")]
    Malformed(String),
    /// Its `kid` is not in the key set: another server's receipt, or a key retired.
    #[error("the receipt was signed with a key the key set does not hold")]
    UnknownKey,
    /// The signature does not verify: the receipt was changed, or forged.
    #[error("the receipt's signature does not verify")]
    BadSignature,
    /// Past its `exp`.
    #[error("the receipt has expired")]
    Expired,
    /// It is a receipt of another tenant than the executor's.
    #[error("the receipt is of tenant {receipt:?}, not {expected:?}")]
    WrongTenant {
        /// The tenant the receipt names.
        receipt: String,
        /// The tenant the executor runs for.
        expected: String,
    },
    /// It is a receipt for another action than the one about to run.
    #[error("the receipt is for another action (digest {receipt}, this action's {action})")]
    WrongAction {
        /// The digest the receipt names.
        receipt: String,
        /// The digest of the action about to run.
        action: String,
    },
    /// A valid receipt of this tenant and action whose decision is not `approved`:
    /// the action must not run. The claims say what was decided, and by whom.
    #[error("the receipt's decision is {}, not approved", display_decision(&.0.decision))]
    NotApproved(Box<Claims>),
    /// The action's arguments are not JSON.
    #[error(transparent)]
    Digest(#[from] DigestError),
}

fn display_decision(decision: &str) -> &str {
    match decision.is_empty() {
        true => "not stated",
        false => decision,
    }
}

/// The answers that approve an ask's action: `action.approving_answers` when it names
/// any, else the first option of the first question, selected alone (none when that
/// question has no option).
pub fn approving_answers(action: &Action, questions: &[Question]) -> Vec<QuestionAnswer> {
    if !action.approving_answers.is_empty() {
        return action.approving_answers.clone();
    }
    questions
        .first()
        .and_then(|q| Some((q, q.options.first()?)))
        .map(|(question, option)| QuestionAnswer {
            id: question.id.clone(),
            selected: vec![option.label.clone()],
            custom: None,
        })
        .into_iter()
        .collect()
}

/// Checks a receipt before `action` runs for `tenant`: signed by a key of `keys`
/// (EdDSA), not expired, issued by askgate, of this tenant, bound to this very action,
/// and deciding `approved`. Returns its claims; any other decision is
/// [`ReceiptError::NotApproved`], holding them. One key may sign every tenant's
/// receipts: the tenant check is what keeps one tenant's approval from running
/// another's action.
///
/// ```no_run
/// # fn run(receipt: &str, keys: &askgate_contract::receipt::JwkSet) -> Result<(), Box<dyn std::error::Error>> {
/// use askgate_contract::receipt::verify_receipt;
/// use askgate_proto::v1::Action;
///
/// let action = Action {
///     name: "deploy".into(),
///     arguments_json: r#"{"service":"api","env":"prod"}"#.into(),
///     ..Default::default()
/// };
/// let claims = verify_receipt(receipt, keys, "acme", &action)?;
/// println!("approved by {:?}, asked by {}", claims.approvers, claims.asked_by);
/// # Ok(()) }
/// ```
pub fn verify_receipt(
    token: &str,
    keys: &JwkSet,
    tenant: &str,
    action: &Action,
) -> Result<Claims, ReceiptError> {
    verify_receipt_with(token, keys, tenant, action, &Verify::default())
}

/// How far the verifier's clock may be behind the server's: a receipt is refused once
/// it expired this long ago.
pub const DEFAULT_LEEWAY: std::time::Duration = std::time::Duration::from_secs(60);

/// How [`verify_receipt_with`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verify {
    /// How far this machine's clock may be behind the server's ([`DEFAULT_LEEWAY`]).
    pub leeway: std::time::Duration,
    /// Return the claims whatever the decision (to record a "no"), instead of
    /// [`ReceiptError::NotApproved`].
    pub any_decision: bool,
}

impl Default for Verify {
    fn default() -> Self {
        Self {
            leeway: DEFAULT_LEEWAY,
            any_decision: false,
        }
    }
}

/// [`verify_receipt`] with other [`Verify`] settings.
pub fn verify_receipt_with(
    token: &str,
    keys: &JwkSet,
    tenant: &str,
    action: &Action,
    verify: &Verify,
) -> Result<Claims, ReceiptError> {
    let expected = action_digest(&action.name, &action.arguments_json)?;
    let claims = verify_signed(token, keys, verify.leeway)?;
    if claims.tenant != tenant {
        return Err(ReceiptError::WrongTenant {
            receipt: claims.tenant,
            expected: tenant.to_owned(),
        });
    }
    if claims.action_digest != expected {
        return Err(ReceiptError::WrongAction {
            receipt: claims.action_digest,
            action: expected,
        });
    }
    match verify.any_decision || claims.decision() == Some(Decision::Approved) {
        true => Ok(claims),
        false => Err(ReceiptError::NotApproved(Box::new(claims))),
    }
}

/// The claims of a receipt signed by a key of `keys`, issued by askgate and not
/// expired, whatever its tenant, action and decision: what the server checks before
/// it consumes one.
pub fn verify_signed(
    token: &str,
    keys: &JwkSet,
    leeway: std::time::Duration,
) -> Result<Claims, ReceiptError> {
    let header =
        jsonwebtoken::decode_header(token).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
    if header.alg != Algorithm::EdDSA {
        return Err(ReceiptError::Malformed(format!(
            "signed with {:?}, not EdDSA",
            header.alg
        )));
    }
    if header.typ.as_deref() == Some(AUDIT_HEAD_TYPE) {
        return Err(ReceiptError::Malformed(
            "an audit head, not a receipt".into(),
        ));
    }
    let key = key_of(header.kid, keys)?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iss"]);
    validation.validate_aud = false;
    validation.leeway = leeway.as_secs();
    Ok(jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => ReceiptError::BadSignature,
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => ReceiptError::Expired,
            _ => ReceiptError::Malformed(e.to_string()),
        })?
        .claims)
}

/// The key `kid` names in `keys`.
fn key_of(kid: Option<String>, keys: &JwkSet) -> Result<DecodingKey, ReceiptError> {
    let kid = kid.ok_or(ReceiptError::UnknownKey)?;
    let jwk = keys.find(&kid).ok_or(ReceiptError::UnknownKey)?;
    DecodingKey::from_jwk(jwk).map_err(|e| ReceiptError::Malformed(e.to_string()))
}

/// The `typ` of a signed audit head: never taken for a receipt, nor a receipt for one.
pub const AUDIT_HEAD_TYPE: &str = "askgate-audit-head+jwt";

/// What a signed audit head states: the tenant's last record, as of `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadClaims {
    /// The tenant whose chain it ends.
    pub tenant: String,
    /// The last record's seq (0: no record yet).
    pub seq: u64,
    /// The last record's hash (empty: no record yet).
    pub hash: String,
    /// When the head was taken (RFC 3339).
    pub at: String,
}

/// Checks a signed audit head (`AuditHead.jws`): signed (EdDSA) by a key of `keys`, an
/// audit head, of `tenant`. Returns what it states.
pub fn verify_audit_head(
    jws: &str,
    keys: &JwkSet,
    tenant: &str,
) -> Result<HeadClaims, ReceiptError> {
    let header =
        jsonwebtoken::decode_header(jws).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
    if header.alg != Algorithm::EdDSA || header.typ.as_deref() != Some(AUDIT_HEAD_TYPE) {
        return Err(ReceiptError::Malformed(format!(
            "not an audit head signed with EdDSA ({:?}, typ {:?})",
            header.alg, header.typ
        )));
    }
    let key = key_of(header.kid, keys)?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_aud = false;
    let head = jsonwebtoken::decode::<HeadClaims>(jws, &key, &validation)
        .map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => ReceiptError::BadSignature,
            _ => ReceiptError::Malformed(e.to_string()),
        })?
        .claims;
    match head.tenant == tenant {
        true => Ok(head),
        false => Err(ReceiptError::WrongTenant {
            receipt: head.tenant,
            expected: tenant.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::QuestionOption;

    use super::*;

    fn answer(id: &str, selected: &[&str], custom: Option<&str>) -> QuestionAnswer {
        QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: custom.map(Into::into),
        }
    }

    #[test]
    fn only_the_approving_answers_of_an_answered_ask_approve() {
        let approving = [answer("go", &["Approve"], None)];
        let decide =
            |resolution, answers: &[QuestionAnswer]| Decision::of(resolution, answers, &approving);
        let approve = [
            answer("go", &["Approve"], None),
            answer("why", &[], Some("ok")),
        ];
        assert_eq!(decide(Resolution::Answered, &approve), Decision::Approved);
        for other in [
            answer("go", &["Reject"], None),
            answer("go", &[], Some("Approve")),
            answer("go", &[], None),
            answer("go", &["Approve"], Some("but not today")),
        ] {
            assert_eq!(
                decide(Resolution::Answered, std::slice::from_ref(&other)),
                Decision::Rejected,
                "{other:?}"
            );
        }
        // A default "Approve" is a default, never an approval.
        assert_eq!(decide(Resolution::Defaulted, &approve), Decision::Defaulted);
        assert_eq!(decide(Resolution::Cancelled, &[]), Decision::Cancelled);
        assert_eq!(decide(Resolution::Expired, &[]), Decision::Expired);
        assert_eq!(decide(Resolution::Aborted, &[]), Decision::Aborted);
        assert_eq!(decide(Resolution::Disposed, &[]), Decision::Aborted);
        // No approving answer: nothing approves.
        assert_eq!(
            Decision::of(Resolution::Answered, &approve, &[]),
            Decision::Rejected
        );
        // A multi-select's labels in any order.
        let both = [answer("envs", &["eu", "us"], None)];
        assert!(approves(&[answer("envs", &["us", "eu"], None)], &both));
        assert!(!approves(&[answer("envs", &["us"], None)], &both));
        for decision in [Decision::Approved, Decision::Rejected, Decision::Aborted] {
            assert_eq!(Decision::parse(decision.as_str()), Some(decision));
        }
    }

    #[test]
    fn the_default_approving_answer_is_the_first_option_of_the_first_question() {
        let question = |id: &str, labels: &[&str]| Question {
            id: id.into(),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    label: (*l).into(),
                    description: None,
                })
                .collect(),
            ..Default::default()
        };
        let action = Action {
            name: "deploy".into(),
            arguments_json: "{}".into(),
            approving_answers: Vec::new(),
        };
        let questions = [question("go", &["Ship it", "Stop"]), question("b", &["x"])];
        assert_eq!(
            approving_answers(&action, &questions),
            [answer("go", &["Ship it"], None)]
        );
        assert!(approving_answers(&action, &[question("free", &[])]).is_empty());
        let named = Action {
            approving_answers: vec![answer("b", &["x"], None)],
            ..action
        };
        assert_eq!(
            approving_answers(&named, &questions),
            named.approving_answers
        );
    }
}
