//! What a Slack message shows of an ask's approval terms (docs/approvals.md): what its
//! answer approves, and, for an ask Slack may not answer, the console instead of
//! controls.

use askgate_core::domain::{approval, model::SLACK_CHANNEL};
use askgate_proto::v1::Requested;
use serde_json::{Value, json};

use super::{
    MAX_MESSAGE_BLOCKS, answer_text, cut, detail_section, escape_code, mrkdwn, question_blocks,
    section,
};

/// Whether Slack may collect the answer of `requested`: the ask allows the channel,
/// and holds no secret question (a chat keeps what is typed in it).
pub fn answerable_in_slack(requested: &Requested) -> bool {
    approval::may_answer(requested, SLACK_CHANNEL, true)
}

/// What the ask's answer approves and how it resolves (docs/approvals.md): the action
/// with its arguments pretty-printed (head and tail when long), the approvers a quorum
/// needs, the answers that apply when nobody answers in time.
pub(super) fn approval_blocks(requested: &Requested) -> Vec<Value> {
    let mut blocks = Vec::new();
    if let Some(action) = &requested.action {
        let arguments = crate::domain::shown::arguments(&action.arguments_json);
        let heading = format!(
            ":closed_lock_with_key: *Approves* `{}` (digest `{}`)\n",
            escape_code(&cut(&action.name, 200)),
            escape_code(requested.action_digest.get(..12).unwrap_or_default())
        );
        blocks.push(detail_section(&heading, &arguments));
    }
    let terms = crate::domain::shown::terms(requested, |a| format!("*{}*", answer_text(a)));
    if !terms.is_empty() {
        blocks.push(json!({ "type": "context", "elements": [mrkdwn(&terms.join(" · "))] }));
    }
    blocks
}

/// The questions of an ask Slack may not answer, within what a message holds after
/// `used` blocks, and a link to the console (`console`, when the server knows its
/// public URL) where it can be answered.
pub(super) fn console_only(
    requested: &Requested,
    console: Option<&str>,
    used: usize,
) -> Vec<Value> {
    let mut blocks = Vec::new();
    for (i, question) in requested.questions.iter().enumerate() {
        let number = (requested.questions.len() > 1).then_some(i);
        let more = question_blocks(question, number, true);
        if used + blocks.len() + more.len() >= MAX_MESSAGE_BLOCKS {
            break;
        }
        blocks.extend(more);
    }
    let link = match console {
        Some(url) => format!("<{url}|Open the askgate console>"),
        None => "the askgate console".to_owned(),
    };
    blocks.push(section(&format!(
        ":lock: This ask cannot be answered from Slack: answer it in {link}."
    )));
    blocks
}
