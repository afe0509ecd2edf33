//! What the chat channels (Slack, Telegram, email, ntfy) build on alike: a delivery's
//! body (the ask, and its resolution for an update), the record of a connection, and
//! the words of an outcome, cut to a channel's limits.

use askgate_proto::v1::{CancelSource, QuestionAnswer, Requested, Resolution, Resolved};

use crate::{
    backend::{
        hooks::HookStore,
        people::{self, Standing},
    },
    domain::{Error, shown},
};

/// What a chat channel's delivery carries: the ask, and (for an update) its
/// resolution, in proto3 JSON.
pub fn chat_body(
    requested: &askgate_proto::v1::Requested,
    resolved: Option<&askgate_proto::v1::Resolved>,
) -> Result<String, Error> {
    let failed = |e: anyhow::Error| Error::Internal(format!("a chat delivery's body: {e:#}"));
    let mut body = serde_json::json!({
        "requested": crate::protojson::to_value("askgate.v1.Requested", requested).map_err(failed)?,
    });
    if let Some(resolved) = resolved {
        body["resolved"] =
            crate::protojson::to_value("askgate.v1.Resolved", resolved).map_err(failed)?;
    }
    Ok(body.to_string())
}

/// What [`chat_body`] made, read back.
pub fn read_chat_body(
    body: &str,
) -> Result<
    (
        askgate_proto::v1::Requested,
        Option<askgate_proto::v1::Resolved>,
    ),
    String,
> {
    let corrupt = |e: anyhow::Error| format!("corrupt delivery: {e:#}");
    let body: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("corrupt delivery: {e}"))?;
    let requested = crate::protojson::from_value("askgate.v1.Requested", &body["requested"])
        .map_err(corrupt)?;
    let resolved = match body.get("resolved") {
        Some(resolved) => {
            Some(crate::protojson::from_value("askgate.v1.Resolved", resolved).map_err(corrupt)?)
        }
        None => None,
    };
    Ok((requested, resolved))
}

/// The record of a chat channel a tenant connects (a Slack app, a Telegram bot; its
/// target set by the caller): it takes each ask and its resolution, filtered by
/// session prefix and labels, and provides for its sessions unless told otherwise.
pub fn chat_endpoint(
    id: String,
    tenant: &str,
    description: String,
    labels: std::collections::HashMap<String, String>,
    session_prefix: String,
    provides: Option<bool>,
) -> crate::backend::hooks::records::EndpointRecord {
    use crate::backend::hooks::records::{EndpointRecord, EventType};
    EndpointRecord {
        id,
        tenant: tenant.to_owned(),
        url: String::new(),
        events: vec![EventType::Requested, EventType::Resolved],
        description,
        labels,
        secret: String::new(),
        provides: provides.unwrap_or(true),
        created_ms: crate::channel::clock::now_ms(),
        session_prefix,
        slack: None,
        channel: None,
    }
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if text[at..].chars().nth(1).is_some() => format!("{}…", &text[..at]),
        _ => text.to_owned(),
    }
}

/// `text` on one line (no control characters), cut to `max` characters.
pub fn line(text: &str, max: usize) -> String {
    let one: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(one.trim(), max)
}

/// Where the person answering through `channel` as `who` stands on `requested` of
/// `tenant` ([`people::standing`]): NOT_AN_APPROVER unless its approvers name them or
/// their person (an ntfy topic names nobody). What a chat checks before it offers a
/// form or takes a click; the answer itself is checked again as every answer is.
/// Nothing is read for a plain ask.
pub async fn standing(
    store: &dyn HookStore,
    (tenant, requested): (&str, &Requested),
    (channel, who): (&str, &str),
    cancelling: bool,
) -> Result<Standing, Error> {
    if !people::needs_person(requested) {
        return Ok(Standing::default());
    }
    let identity = crate::knows_who(channel).then_some(who);
    people::standing(Some(store), tenant, requested, identity, &[], cancelling).await
}

/// Why an answer or a cancel given in a chat was refused, as the person who gave it
/// is told: the error's text as a sentence ("Only ana may answer this.").
pub fn refusal(error: &Error) -> String {
    let text = error.to_string();
    let mut chars = text.chars();
    let mut sentence: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    sentence.push_str(chars.as_str());
    if !sentence.ends_with(['.', '!', '?']) {
        sentence.push('.');
    }
    sentence
}

/// How an ask ended, in a sentence: who answered, or why it ended unanswered.
pub fn outcome(resolved: &Resolved) -> String {
    let who = match resolved.resolved_by.as_str() {
        "" => "someone",
        who => who,
    };
    match resolved.reason() {
        Resolution::Answered => format!("Answered by {who}."),
        Resolution::Defaulted => "Nobody answered in time: the default answers apply.".to_owned(),
        Resolution::Cancelled if resolved.cancel_source() == CancelSource::UiClosed => {
            format!("Closed unanswered: the answering UI of {who} closed.")
        }
        Resolution::Cancelled if resolved.cancel_reason.is_empty() => {
            format!("Cancelled by {who}.")
        }
        Resolution::Cancelled => format!("Cancelled by {who}: {}", resolved.cancel_reason),
        Resolution::Aborted => "Aborted: the asking agent went away.".to_owned(),
        Resolution::Expired => "Expired: the agent stopped waiting.".to_owned(),
        Resolution::Disposed => "Disposed: the server shut down before an answer.".to_owned(),
        // Never posted (an allowed ask asks nobody), but named all the same.
        Resolution::AllowedByPolicy => format!("Allowed by {who}."),
        Resolution::Unspecified => "Resolved.".to_owned(),
    }
}

/// `question → answer` for each answered question of `requested` (a secret never).
pub fn answered_lines(requested: &Requested, answers: &[QuestionAnswer]) -> Vec<String> {
    requested
        .questions
        .iter()
        .filter_map(|asked| {
            let answer = answers.iter().find(|a| a.id == asked.id)?;
            let words = match asked.secret {
                true => "(secret)".to_owned(),
                false => {
                    shown::answer_words(answer, str::to_owned).unwrap_or_else(|| "skipped".into())
                }
            };
            Some(format!("{} → {words}", asked.question))
        })
        .collect()
}
