//! Secret answers (docs/approvals.md): the answers to secret questions travel with
//! their `resolved` event sealed with the server's key (AES-256-GCM, bound to the
//! ask), so the waiting call, and a retry of it, gets them, while nothing that hands
//! events out (subscribers, webhooks, chat channels, the audit log) can read them.

use askgate_proto::v1::QuestionAnswer;
use serde_json::Value;

use crate::{
    auth::{sealed::SealingKey, secret::Secret},
    backend::audit,
    domain::Error,
};

/// What a sealed answer is bound to: one ask of one session. A sealed value copied
/// into another ask's event does not open.
pub fn context(session_id: &str, rpc_id: &str) -> String {
    format!("answers\u{1f}{session_id}\u{1f}{rpc_id}")
}

/// `answers` sealed for the ask `rpc_id` of `session_id`.
pub fn seal(
    key: &SealingKey,
    session_id: &str,
    rpc_id: &str,
    answers: &[QuestionAnswer],
) -> Result<String, Error> {
    key.seal(
        &context(session_id, rpc_id),
        &Secret::new(canonical(answers)),
    )
    .map_err(|e| Error::Internal(format!("sealing a secret answer: {e}")))
}

/// What the audit record holds of `answers`: lowercase hex HMAC-SHA256 of their
/// canonical JSON, under the key derived from the sealing key.
pub fn mac(key: &SealingKey, answers: &[QuestionAnswer]) -> String {
    key.mac(canonical(answers).as_bytes())
}

/// The canonical JSON of answers as a record holds them.
fn canonical(answers: &[QuestionAnswer]) -> String {
    audit::canonical(&audit::answers_json(answers))
}

/// The answers `seal` sealed for the same ask.
pub fn open(
    key: &SealingKey,
    session_id: &str,
    rpc_id: &str,
    sealed: &str,
) -> Result<Vec<QuestionAnswer>, Error> {
    let opened = key
        .open(&context(session_id, rpc_id), sealed)
        .map_err(|e| Error::Internal(format!("a secret answer: {e}")))?;
    parse(opened.expose()).map_err(|e| Error::Internal(format!("a secret answer: {e}")))
}

/// The answers of [`audit::answers_json`]'s JSON.
fn parse(text: &str) -> Result<Vec<QuestionAnswer>, &'static str> {
    const MALFORMED: &str = "its sealed form is malformed";
    let Ok(Value::Array(entries)) = serde_json::from_str::<Value>(text) else {
        return Err(MALFORMED);
    };
    entries
        .iter()
        .map(|entry| {
            let id = entry.get("id").and_then(Value::as_str).ok_or(MALFORMED)?;
            let selected = match entry.get("selected") {
                Some(Value::Array(labels)) => labels
                    .iter()
                    .map(|l| l.as_str().map(str::to_owned).ok_or(MALFORMED))
                    .collect::<Result<_, _>>()?,
                _ => Vec::new(),
            };
            let custom = match entry.get("custom") {
                Some(Value::String(text)) => Some(text.clone()),
                None => None,
                Some(_) => return Err(MALFORMED),
            };
            Ok(QuestionAnswer {
                id: id.to_owned(),
                selected,
                custom,
            })
        })
        .collect()
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
        let sealed = seal(&key, "s1", "r1", &answers).expect("seal");
        assert!(!sealed.contains("4711"));
        assert_eq!(open(&key, "s1", "r1", &sealed).expect("open"), answers);
        assert!(open(&key, "s1", "r2", &sealed).is_err(), "another ask");
        assert!(open(&key, "s2", "r1", &sealed).is_err(), "another session");
        let other = SealingKey::new(&[4u8; 32]).expect("key");
        assert!(open(&other, "s1", "r1", &sealed).is_err(), "another key");
    }

    #[test]
    fn a_malformed_sealed_form_is_an_error_not_a_guess() {
        assert!(parse("{}").is_err());
        assert!(parse(r#"[{"selected":[]}]"#).is_err());
        assert!(parse(r#"[{"id":"q","custom":7}]"#).is_err());
        assert_eq!(parse("[]").expect("empty"), Vec::new());
    }
}
