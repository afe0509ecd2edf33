//! Digests: lowercase hex SHA-256 of canonical JSON ([`crate::canonical`]), the same in
//! every askgate SDK (`tests/contract/vectors.json`).

use askgate_proto::v1::QuestionAnswer;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{answers::answers_value, canonical::canonical, ijson};

/// Why an action's digest could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The arguments could not be parsed as JSON.
    #[error("arguments_json is not JSON: {0}")]
    NotJson(String),
    /// A number of the arguments is not I-JSON (RFC 7493): a double would change it,
    /// so it has no exact digest. Send it as a string.
    #[error("arguments_json holds {number}, {why}: send it as a string")]
    Inexact {
        /// The number as written (cut to 64 bytes).
        number: String,
        /// Why a double does not hold it.
        why: &'static str,
    },
}

/// The digest of an action: lowercase hex SHA-256 of the RFC 8785 canonical JSON of
/// `{"name": name, "arguments": <arguments_json parsed>}`. The arguments must be
/// I-JSON ([`ijson`]).
pub fn action_digest(name: &str, arguments_json: &str) -> Result<String, DigestError> {
    let arguments: Value =
        serde_json::from_str(arguments_json).map_err(|e| DigestError::NotJson(e.to_string()))?;
    if let Some((mut number, why)) = ijson::first_inexact_number(arguments_json) {
        if number.len() > 64 {
            number.truncate(64);
            number.push('…');
        }
        return Err(DigestError::Inexact { number, why });
    }
    Ok(digest(&json!({ "name": name, "arguments": arguments })))
}

/// The digest of the answers: lowercase hex SHA-256 of the canonical JSON of
/// [`answers_value`].
pub fn answers_digest(answers: &[QuestionAnswer], is_secret: impl Fn(&str) -> bool) -> String {
    digest(&answers_value(answers, is_secret))
}

/// Lowercase hex SHA-256 of `value`'s canonical JSON.
pub fn digest(value: &Value) -> String {
    sha256_hex(canonical(value).as_bytes())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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
    fn arguments_a_double_would_change_have_no_digest() {
        // The digest of 1234567890123456789 would be that of 1234567890123456800: two
        // actions, one digest. Both are refused, naming the number.
        for arguments in [
            r#"{"user_id": 1234567890123456789}"#,
            r#"{"user_id": 1234567890123456800}"#,
            r#"{"amount": 0.30000000000000000001}"#,
        ] {
            assert!(
                matches!(
                    action_digest("pay", arguments),
                    Err(DigestError::Inexact { .. })
                ),
                "{arguments}"
            );
        }
        assert!(action_digest("pay", r#"{"user_id": "1234567890123456789"}"#).is_ok());
        assert!(action_digest("pay", r#"{"amount": 0.3, "n": 9007199254740991}"#).is_ok());
    }

    #[test]
    fn arguments_that_are_not_json_have_no_digest() {
        assert!(matches!(
            action_digest("x", "{nope"),
            Err(DigestError::NotJson(_))
        ));
    }

    #[test]
    fn a_secret_answer_does_not_move_the_digest() {
        let answer = |custom: &str| QuestionAnswer {
            id: "otp".into(),
            selected: Vec::new(),
            custom: Some(custom.into()),
        };
        let secret = |id: &str| id == "otp";
        assert_eq!(
            answers_digest(&[answer("123456")], secret),
            answers_digest(&[answer("654321")], secret)
        );
        assert_ne!(
            answers_digest(&[answer("123456")], |_| false),
            answers_digest(&[answer("654321")], |_| false)
        );
    }
}
