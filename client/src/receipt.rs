//! Receipts: what an executor checks before it runs an action a human approved
//! (docs/approvals.md).
//!
//! A resolution of an ask that carries an [`Action`] comes with a receipt: a compact
//! JWS signed by the server (EdDSA over Ed25519) whose claims bind the resolution to
//! the action's digest. [`verify_receipt`] checks the signature against the server's
//! published keys (`GET /.well-known/jwks.json`), the expiry, and that the digest is
//! the digest of the action about to run: an executor handed other arguments than
//! the ones the human saw refuses to run them.
//!
//! The digests are SHA-256 over RFC 8785 canonical JSON, so the key order and the
//! spacing of the arguments do not matter, and any client in any language computes
//! the same digest.

/// A JWK Set: the server's public keys, as `GET /.well-known/jwks.json` serves them
/// (parse it with `serde_json`).
pub use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::proto::{Action, QuestionAnswer};

/// The `iss` of every receipt.
pub const ISSUER: &str = "askgate";

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
    /// Lowercase hex SHA-256 of the answers' canonical JSON ([`answers_digest`]).
    pub answers_digest: String,
    /// The subjects whose answers resolved the ask (every approver of a quorum).
    pub approvers: Vec<String>,
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

/// Why an action's digest could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The arguments could not be parsed as JSON.
    #[error("arguments_json is not JSON: {0}")]
    NotJson(String),
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
    /// It is a receipt for another action than the one about to run.
    #[error("the receipt is for another action (digest {receipt}, this action's {action})")]
    WrongAction {
        /// The digest the receipt names.
        receipt: String,
        /// The digest of the action about to run.
        action: String,
    },
    /// The action's arguments are not JSON.
    #[error(transparent)]
    Digest(#[from] DigestError),
}

/// The digest of an action: lowercase hex SHA-256 of the RFC 8785 canonical JSON of
/// `{"name": name, "arguments": <arguments_json parsed>}`.
pub fn action_digest(name: &str, arguments_json: &str) -> Result<String, DigestError> {
    let arguments: Value =
        serde_json::from_str(arguments_json).map_err(|e| DigestError::NotJson(e.to_string()))?;
    Ok(digest(&json!({ "name": name, "arguments": arguments })))
}

/// The answers as the tool's success text holds them (one object per question,
/// `custom` only when given), with the answer of every question `is_secret` names
/// replaced by `{"id": .., "secret": true}`: a receipt or an audit record never
/// carries a secret, nor a hash of one (a short secret could be guessed from it).
pub fn answers_value(answers: &[QuestionAnswer], is_secret: impl Fn(&str) -> bool) -> Value {
    Value::Array(
        answers
            .iter()
            .map(|answer| {
                let mut entry = Map::new();
                entry.insert("id".into(), Value::String(answer.id.clone()));
                if is_secret(&answer.id) {
                    entry.insert("secret".into(), Value::Bool(true));
                } else {
                    entry.insert("selected".into(), json!(answer.selected));
                    if let Some(custom) = &answer.custom {
                        entry.insert("custom".into(), Value::String(custom.clone()));
                    }
                }
                Value::Object(entry)
            })
            .collect(),
    )
}

/// The digest of the answers: lowercase hex SHA-256 of the canonical JSON of
/// [`answers_value`].
pub fn answers_digest(answers: &[QuestionAnswer], is_secret: impl Fn(&str) -> bool) -> String {
    digest(&answers_value(answers, is_secret))
}

/// RFC 8785 canonical JSON of `value`.
pub fn canonical(value: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings and its numbers finite.
    serde_jcs::to_string(value).unwrap_or_default()
}

fn digest(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical(value).as_bytes()))
}

/// Checks a receipt before `action` runs: signed by a key of `keys` (EdDSA), not
/// expired, issued by askgate, and bound to this very action. Returns its claims: the
/// caller still decides what the resolution and the answers allow (an `ANSWERED`
/// receipt may record a "Reject").
pub fn verify_receipt(token: &str, keys: &JwkSet, action: &Action) -> Result<Claims, ReceiptError> {
    verify_receipt_with(token, keys, action, DEFAULT_LEEWAY)
}

/// How far the verifier's clock may be behind the server's: a receipt is refused once
/// it expired this long ago.
pub const DEFAULT_LEEWAY: std::time::Duration = std::time::Duration::from_secs(60);

/// [`verify_receipt`] with another allowance for clock skew than [`DEFAULT_LEEWAY`].
pub fn verify_receipt_with(
    token: &str,
    keys: &JwkSet,
    action: &Action,
    leeway: std::time::Duration,
) -> Result<Claims, ReceiptError> {
    let expected = action_digest(&action.name, &action.arguments_json)?;
    let header =
        jsonwebtoken::decode_header(token).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
    if header.alg != Algorithm::EdDSA {
        return Err(ReceiptError::Malformed(format!(
            "signed with {:?}, not EdDSA",
            header.alg
        )));
    }
    let kid = header.kid.ok_or(ReceiptError::UnknownKey)?;
    let jwk = keys.find(&kid).ok_or(ReceiptError::UnknownKey)?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| ReceiptError::Malformed(e.to_string()))?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iss"]);
    validation.validate_aud = false;
    validation.leeway = leeway.as_secs();
    let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => ReceiptError::BadSignature,
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => ReceiptError::Expired,
            _ => ReceiptError::Malformed(e.to_string()),
        })?
        .claims;
    if claims.action_digest != expected {
        return Err(ReceiptError::WrongAction {
            receipt: claims.action_digest,
            action: expected,
        });
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_digest_ignores_key_order_and_spacing() {
        let a = action_digest("deploy", r#"{"env":"prod","replicas":3}"#).expect("in a test");
        let b =
            action_digest("deploy", "{ \"replicas\": 3,\n \"env\": \"prod\" }").expect("in a test");
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(
            a,
            action_digest("deploy", r#"{"env":"prod","replicas":4}"#).expect("in a test")
        );
        assert_ne!(
            a,
            action_digest("Deploy", r#"{"env":"prod","replicas":3}"#).expect("in a test")
        );
    }

    #[test]
    fn the_action_digest_is_sha256_of_the_canonical_json() {
        // RFC 8785: keys sorted by UTF-16 code units, no spaces, numbers as ES6 prints
        // them (1e3 is 1000, 1.50 is 1.5).
        let digest = action_digest("x", r#"{"b":1e3,"a":[1.50,"é"]}"#).expect("in a test");
        let text = r#"{"arguments":{"a":[1.5,"é"],"b":1000},"name":"x"}"#;
        assert_eq!(digest, hex::encode(Sha256::digest(text.as_bytes())));
    }

    #[test]
    fn arguments_that_are_not_json_have_no_digest() {
        assert!(matches!(
            action_digest("x", "{nope"),
            Err(DigestError::NotJson(_))
        ));
    }

    #[test]
    fn secret_answers_leave_only_their_id() {
        let answers = [
            QuestionAnswer {
                id: "go".into(),
                selected: vec!["Yes".into()],
                custom: None,
            },
            QuestionAnswer {
                id: "otp".into(),
                selected: Vec::new(),
                custom: Some("123456".into()),
            },
        ];
        let value = answers_value(&answers, |id| id == "otp");
        assert_eq!(
            canonical(&value),
            r#"[{"id":"go","selected":["Yes"]},{"id":"otp","secret":true}]"#
        );
        assert_eq!(
            answers_digest(&answers, |id| id == "otp"),
            answers_digest(
                &[
                    answers[0].clone(),
                    QuestionAnswer {
                        custom: Some("654321".into()),
                        ..answers[1].clone()
                    }
                ],
                |id| id == "otp"
            )
        );
    }
}
