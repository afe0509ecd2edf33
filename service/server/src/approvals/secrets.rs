//! Secret answers (docs/approvals.md): the answers to secret questions travel with
//! their `resolved` event sealed with the server's key (AES-256-GCM, bound to the
//! ask), so the waiting call, and a retry of it, gets them, while nothing that hands
//! events out (subscribers, webhooks, chat channels, the audit log) can read them.

use askgate_contract::{answers::answers_value, canonical::canonical};
use askgate_proto::v1::{AnswerRequest, QuestionAnswer};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use prost::Message as _;

use crate::{
    auth::{sealed::SealingKey, secret::Secret},
    domain::{Error, SessionKey},
};

/// What a sealed answer is bound to: one ask of one session of one tenant. A sealed
/// value copied into another ask's event does not open.
pub fn context(key: &SessionKey, rpc_id: &str) -> String {
    format!(
        "answers\u{1f}{}\u{1f}{}\u{1f}{rpc_id}",
        key.tenant, key.session_id
    )
}

/// `answers` sealed for the ask `rpc_id` of `session`: their protobuf encoding (as
/// an `AnswerRequest` carries them), in base64, sealed.
pub fn seal(
    key: &SealingKey,
    session: &SessionKey,
    rpc_id: &str,
    answers: &[QuestionAnswer],
) -> Result<String, Error> {
    let encoded = AnswerRequest {
        answers: answers.to_vec(),
        ..Default::default()
    }
    .encode_to_vec();
    key.seal(
        &context(session, rpc_id),
        &Secret::new(BASE64.encode(encoded)),
    )
    .map_err(|e| Error::Internal(format!("sealing a secret answer: {e}")))
}

/// What the audit record holds of `answers`: lowercase hex HMAC-SHA256 of their
/// canonical JSON (as a record holds answers), under the key derived from the
/// sealing key.
pub fn mac(key: &SealingKey, answers: &[QuestionAnswer]) -> String {
    key.mac(canonical(&answers_value(answers, |_| false)).as_bytes())
}

/// The answers `seal` sealed for the same ask.
pub fn open(
    key: &SealingKey,
    session: &SessionKey,
    rpc_id: &str,
    sealed: &str,
) -> Result<Vec<QuestionAnswer>, Error> {
    let malformed = |_| Error::Internal("a secret answer's sealed form is malformed".into());
    let opened = key
        .open(&context(session, rpc_id), sealed)
        .map_err(|e| Error::Internal(format!("a secret answer: {e}")))?;
    let encoded = BASE64
        .decode(opened.expose())
        .map_err(|e| malformed(e.to_string()))?;
    let request =
        AnswerRequest::decode(encoded.as_slice()).map_err(|e| malformed(e.to_string()))?;
    Ok(request.answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_answers_open_for_their_own_ask_only() {
        let key = SealingKey::new(&[3u8; 32]).expect("key");
        let answers = vec![
            QuestionAnswer {
                id: "pin".into(),
                selected: Vec::new(),
                custom: Some("4711 \"quoted\" ✓".into()),
            },
            QuestionAnswer {
                id: "vault".into(),
                selected: vec!["prod".into(), "eu".into()],
                custom: None,
            },
        ];
        let s1 = SessionKey::new("acme", "s1");
        let sealed = seal(&key, &s1, "r1", &answers).expect("seal");
        assert!(!sealed.contains("4711"));
        assert_eq!(open(&key, &s1, "r1", &sealed).expect("open"), answers);
        assert!(open(&key, &s1, "r2", &sealed).is_err(), "another ask");
        let s2 = SessionKey::new("acme", "s2");
        assert!(open(&key, &s2, "r1", &sealed).is_err(), "another session");
        let globex = SessionKey::new("globex", "s1");
        assert!(
            open(&key, &globex, "r1", &sealed).is_err(),
            "another tenant"
        );
        let other = SealingKey::new(&[4u8; 32]).expect("key");
        assert!(open(&other, &s1, "r1", &sealed).is_err(), "another key");
    }

    #[test]
    fn a_malformed_sealed_form_is_an_error_not_a_guess() {
        let key = SealingKey::new(&[3u8; 32]).expect("key");
        let session = SessionKey::new("acme", "s1");
        let context = context(&session, "r1");
        for inside in ["not base64!", "AAEC/w=="] {
            let sealed = key.seal(&context, &Secret::new(inside)).expect("seal");
            assert!(open(&key, &session, "r1", &sealed).is_err(), "{inside}");
        }
    }
}
