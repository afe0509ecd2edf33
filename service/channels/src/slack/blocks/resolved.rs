//! The message of an ask once it is resolved: its questions, and who answered what
//! (a secret answer never shown), or how it ended; no controls.

use askgate_proto::v1::{CancelSource, Requested, Resolution, Resolved};
use serde_json::{Value, json};

use super::{
    MAX_DRAWN_QUESTIONS, MAX_HEADER, answer_text, context, cut, escape, fallback, plain, section,
    title,
};

/// Who resolved, for Slack: a Slack user as a mention, anyone else by name.
fn resolver(resolved_by: &str) -> String {
    match resolved_by
        .strip_prefix("slack:")
        .and_then(|rest| rest.split_once('/'))
    {
        Some((_, user)) if !user.is_empty() && user.chars().all(|c| c.is_ascii_alphanumeric()) => {
            format!("<@{user}>")
        }
        _ if resolved_by.is_empty() => "someone".to_owned(),
        _ => escape(resolved_by),
    }
}

/// The message once its ask is resolved: the questions, and who answered what (or how
/// the ask ended); no controls.
pub fn resolved_message(requested: &Requested, resolved: &Resolved) -> Value {
    let mut blocks = vec![
        json!({ "type": "header", "text": plain(&title(requested), MAX_HEADER) }),
        context(requested),
    ];
    let several = requested.questions.len() > 1;
    for (i, question) in requested
        .questions
        .iter()
        .enumerate()
        .take(MAX_DRAWN_QUESTIONS)
    {
        blocks.push(section(&format!(
            "*{}{}*",
            if several {
                format!("{}. ", i + 1)
            } else {
                String::new()
            },
            escape(&question.question)
        )));
    }
    let who = resolver(&resolved.resolved_by);
    let outcome = match resolved.reason() {
        reason @ (Resolution::Answered | Resolution::Defaulted) => {
            let mut lines = vec![match reason {
                Resolution::Defaulted => {
                    ":hourglass: Nobody answered in time: the default answers apply".to_owned()
                }
                _ => format!(":white_check_mark: Answered by {who}"),
            }];
            for asked in &requested.questions {
                // A secret answer is never in the event, and never shown in a chat.
                let text = match resolved.answers.iter().find(|a| a.id == asked.id) {
                    _ if asked.secret => "(secret)".to_owned(),
                    Some(answer) => answer_text(answer),
                    None => continue,
                };
                let question = asked.question.as_str();
                // "Ship it?: yes" reads badly: a question's own mark ends it.
                let question = escape(&cut(question, 200));
                let separator = match question.ends_with(['?', '!', ':', '.', '…']) {
                    true => " ",
                    false => ": ",
                };
                lines.push(format!("• {question}{separator}*{text}*"));
            }
            lines.join("\n")
        }
        Resolution::Cancelled if resolved.cancel_source() == CancelSource::UiClosed => {
            format!(":no_entry_sign: Closed unanswered: the answering UI of {who} closed")
        }
        Resolution::Cancelled => match resolved.cancel_reason.as_str() {
            "" => format!(":no_entry_sign: Cancelled by {who}"),
            reason => format!(":no_entry_sign: Cancelled by {who}: {}", escape(reason)),
        },
        Resolution::Aborted => ":x: Aborted: the asking agent went away.".to_owned(),
        Resolution::Expired => ":hourglass: Expired: the agent stopped waiting.".to_owned(),
        Resolution::Disposed => ":x: Disposed: the server shut down before an answer.".to_owned(),
        Resolution::AllowedByPolicy => format!(":white_check_mark: Allowed by {who}"),
        Resolution::Unspecified => "Resolved.".to_owned(),
    };
    blocks.push(json!({ "type": "divider" }));
    blocks.push(section(&outcome));
    let text = format!("{} — {}", fallback(requested), cut(&outcome, 200));
    json!({ "text": text, "blocks": blocks })
}
