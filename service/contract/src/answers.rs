//! The answers JSON: how every askgate surface writes a batch's answers. One entry per
//! answered question, `{"id", "selected": [...], "custom"?}` (`custom` only when own
//! words were given), or `{"id", "secret": true}` where the answer must not be shown
//! (a receipt, an audit record: neither carries a secret, nor a hash of one, since a
//! short secret could be guessed from it).
//!
//! The tool's result text is `{"answers": [...]}` with these entries in this field
//! order; a digest takes their canonical JSON ([`crate::canonical`]), whose key order is
//! RFC 8785's. Both come from [`Entry`], so they cannot drift apart.

use askgate_proto::v1::QuestionAnswer;
use serde::Serialize;
use serde_json::Value;

/// One answer as the answers JSON holds it.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    selected: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    custom: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    secret: bool,
}

fn entries<'a>(answers: &'a [QuestionAnswer], is_secret: impl Fn(&str) -> bool) -> Vec<Entry<'a>> {
    answers
        .iter()
        .map(|answer| match is_secret(&answer.id) {
            true => Entry {
                id: &answer.id,
                selected: None,
                custom: None,
                secret: true,
            },
            false => Entry {
                id: &answer.id,
                selected: Some(&answer.selected),
                custom: answer.custom.as_deref(),
                secret: false,
            },
        })
        .collect()
}

/// The answers as a JSON value, the answer of every question `is_secret` names
/// replaced by `{"id": .., "secret": true}`.
pub fn answers_value(answers: &[QuestionAnswer], is_secret: impl Fn(&str) -> bool) -> Value {
    // Strings, string lists and booleans always make a value.
    serde_json::to_value(entries(answers, is_secret)).unwrap_or_default()
}

/// The answers as the compact JSON the model receives from `ask_user_question`, every
/// answer shown: `{"answers":[{"id":"db","selected":["Postgres"]}]}`.
pub fn answers_text(answers: &[QuestionAnswer]) -> String {
    #[derive(Serialize)]
    struct ToolResult<'a> {
        answers: Vec<Entry<'a>>,
    }
    let result = ToolResult {
        answers: entries(answers, |_| false),
    };
    serde_json::to_string(&result).unwrap_or_else(|e| format!("Error: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::canonical;

    fn answer(id: &str, selected: &[&str], custom: Option<&str>) -> QuestionAnswer {
        QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).into()).collect(),
            custom: custom.map(Into::into),
        }
    }

    #[test]
    fn the_tool_text_keeps_its_field_order_and_a_digest_takes_rfc_8785s() {
        let answers = [
            answer("db", &["Postgres"], None),
            answer("why", &[], Some("\"fast\"\n")),
        ];
        assert_eq!(
            answers_text(&answers),
            r#"{"answers":[{"id":"db","selected":["Postgres"]},{"id":"why","selected":[],"custom":"\"fast\"\n"}]}"#
        );
        assert_eq!(
            canonical(&answers_value(&answers, |_| false)),
            r#"[{"id":"db","selected":["Postgres"]},{"custom":"\"fast\"\n","id":"why","selected":[]}]"#
        );
    }

    #[test]
    fn secret_answers_leave_only_their_id() {
        let answers = [
            answer("go", &["Yes"], None),
            answer("otp", &[], Some("123456")),
        ];
        assert_eq!(
            canonical(&answers_value(&answers, |id| id == "otp")),
            r#"[{"id":"go","selected":["Yes"]},{"id":"otp","secret":true}]"#
        );
        // The model that asked gets every answer.
        assert!(answers_text(&answers).contains("123456"));
    }
}
