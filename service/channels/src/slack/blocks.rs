//! What askgate shows in Slack, in Block Kit: the message of a pending ask (its
//! questions, plan reviews as the plan with the approve option marked, options with
//! their descriptions; buttons for a single choice, checkboxes and Submit for several,
//! a modal for free text, "Other" and batches), the same message once resolved (who
//! answered what, or how it ended, without controls), and the modals.
//!
//! Every text is cut to Slack's limits, and user text is escaped for mrkdwn, so no
//! question can break a message or mention someone.

use askgate_proto::v1::{Question, QuestionAnswer, Requested};
use serde_json::{Value, json};

/// Action ids of askgate's controls. An option's button is `askgate.choose.<index>`:
/// Slack refuses a message whose action ids repeat within a block.
pub const CHOOSE: &str = "askgate.choose";
pub const CHECKS: &str = "askgate.checks";
pub const SUBMIT: &str = "askgate.submit";
pub const OPEN: &str = "askgate.open";
pub const CANCEL: &str = "askgate.cancel";
/// Callback ids of the modals.
pub const ANSWER_VIEW: &str = "askgate.answer";
pub const CANCEL_VIEW: &str = "askgate.cancel";
/// The block of the message's checkboxes, and of a modal's reason.
pub const CHECKS_BLOCK: &str = "askgate.checks";
pub const REASON_BLOCK: &str = "reason";
/// The action id of every text input.
pub const TEXT: &str = "text";
/// The action id of a modal question's choice element.
pub const CHOICE: &str = "choice";

/// Slack's limits.
const MAX_HEADER: usize = 150;
const MAX_SECTION: usize = 3000;
const MAX_BUTTON: usize = 75;
const MAX_OPTION: usize = 75;
const MAX_LABEL: usize = 2000;
const BUTTONS_PER_BLOCK: usize = 25;
/// Radio buttons and checkboxes hold at most this many options; beyond, a menu.
const MAX_INLINE_OPTIONS: usize = 10;
const MAX_MENU_OPTIONS: usize = 100;
/// Blocks of one message, and of one modal.
const MAX_MESSAGE_BLOCKS: usize = 50;
const MAX_MODAL_BLOCKS: usize = 100;
/// Questions listed in a resolved message.
const MAX_DRAWN_QUESTIONS: usize = 20;

/// What a control carries back to askgate: which app of which tenant, which ask, and
/// for an option button which option. Slack returns it as set (button values, a
/// modal's private metadata); it is trusted only once the request's signature is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub tenant: String,
    pub app: String,
    pub session: String,
    pub rpc: String,
    pub option: Option<usize>,
}

impl Ref {
    pub fn encode(&self) -> String {
        json!([
            "ag1",
            self.tenant,
            self.app,
            self.session,
            self.rpc,
            self.option
        ])
        .to_string()
    }

    pub fn decode(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text).ok()?;
        let [tag, tenant, app, session, rpc, option] = value.as_array()?.as_slice() else {
            return None;
        };
        if tag.as_str()? != "ag1" {
            return None;
        }
        Some(Self {
            tenant: tenant.as_str()?.to_owned(),
            app: app.as_str()?.to_owned(),
            session: session.as_str()?.to_owned(),
            rpc: rpc.as_str()?.to_owned(),
            option: match option {
                Value::Null => None,
                n => Some(usize::try_from(n.as_u64()?).ok()?),
            },
        })
    }

    fn with_option(&self, option: usize) -> Self {
        Self {
            option: Some(option),
            ..self.clone()
        }
    }
}

/// The action id of option `index`'s button.
fn choose_action(index: usize) -> String {
    format!("{CHOOSE}.{index}")
}

/// Whether `action_id` is an option's button: `askgate.choose.<index>`, or plain
/// `askgate.choose` on messages posted before the ids were numbered.
pub fn is_choice(action_id: &str) -> bool {
    action_id
        .strip_prefix(CHOOSE)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

pub use crate::channel::chat::cut;

/// User text made inert in mrkdwn: no links, mentions or channel pings (`&`, `<`, `>`
/// as entities), and no formatting: `*`, `_`, `~` and backticks become look-alikes
/// (`∗ ˍ ∼ ˋ`) that Slack does not parse, so a label cannot end the bold or code span
/// around it and start its own. Bare URLs are not linked because every mrkdwn object
/// askgate sends is `verbatim`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '*' => out.push('∗'),
            '_' => out.push('ˍ'),
            '~' => out.push('∼'),
            _ => push_code(&mut out, c),
        }
    }
    out
}

/// User text made inert inside a code span or block, where only the entities and the
/// backtick that would close it matter.
pub fn escape_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_code(&mut out, c);
    }
    out
}

fn push_code(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '`' => out.push('ˋ'),
        c => out.push(c),
    }
}

/// `verbatim`: Slack neither links bare URLs nor turns names into mentions in it.
fn mrkdwn(text: &str) -> Value {
    json!({ "type": "mrkdwn", "text": cut(text, MAX_SECTION), "verbatim": true })
}

/// A question's detail (a tool's input, a plan) as a code block after `heading`, so
/// that it shows as written: whole when it fits, else its head and its tail around a
/// mark saying how much is left out (never silently cut: a human approves what was
/// shown).
fn detail_section(heading: &str, detail: &str) -> Value {
    const FENCE: &str = "```";
    // Bytes bound characters from above, so this fits Slack's limit in characters.
    let room = MAX_SECTION - heading.chars().count() - 2 * FENCE.len();
    let shown = crate::domain::shown::head_and_tail(&escape_code(detail), room).into_owned();
    section(&format!("{heading}{FENCE}{shown}{FENCE}"))
}

fn plain(text: &str, max: usize) -> Value {
    // Slack refuses an empty text object, and a blank one shows nothing.
    let text = if text.trim().is_empty() { "–" } else { text };
    json!({ "type": "plain_text", "text": cut(text, max), "emoji": true })
}

fn section(markdown: &str) -> Value {
    json!({ "type": "section", "text": mrkdwn(markdown) })
}

fn button(text: &str, action: &str, value: &Ref, style: Option<&str>) -> Value {
    let mut button = json!({
        "type": "button",
        "text": plain(text, MAX_BUTTON),
        "action_id": action,
        "value": value.encode(),
    });
    if let Some(style) = style {
        button["style"] = style.into();
    }
    button
}

use crate::domain::shown::{approve_label, title};

/// The text of notifications: the first question.
fn fallback(requested: &Requested) -> String {
    let first = requested
        .questions
        .first()
        .map_or("", |q| q.question.as_str());
    cut(&format!("askgate: {}", escape(first)), 300)
}

fn context(requested: &Requested) -> Value {
    let mut parts = vec![format!("session `{}`", escape_code(&requested.session_id))];
    if let Some(agent) = requested.agent.as_ref().filter(|a| !a.agent_id.is_empty()) {
        parts.push(format!("agent `{}`", escape_code(&agent.agent_id)));
    }
    let mut labels: Vec<_> = requested.labels.iter().collect();
    labels.sort();
    for (key, value) in labels.into_iter().take(10) {
        parts.push(format!("`{}={}`", escape_code(key), escape_code(value)));
    }
    json!({
        "type": "context",
        "elements": [mrkdwn(&parts.join(" · "))],
    })
}

/// A question's text, its detail (a plan to review as the plan), and its options with
/// their descriptions when they have any (buttons show labels only).
fn question_blocks(question: &Question, number: Option<usize>, list_options: bool) -> Vec<Value> {
    let approve = approve_label(question);
    let prefix = number.map_or(String::new(), |n| format!("{}. ", n + 1));
    let mut blocks = vec![section(&format!(
        "*{prefix}{}*",
        escape(&question.question)
    ))];
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        blocks.push(match approve {
            Some(_) => detail_section("*The plan to review*\n", detail),
            None => detail_section("", detail),
        });
    }
    let described = question.options.iter().any(|o| {
        o.description
            .as_deref()
            .is_some_and(|d| !d.trim().is_empty())
    });
    if !question.options.is_empty() && (list_options || described || approve.is_some()) {
        let lines: Vec<String> = question
            .options
            .iter()
            .map(|o| {
                let mut line = format!("• *{}*", escape(&o.label));
                if let Some(d) = o.description.as_deref().filter(|d| !d.trim().is_empty()) {
                    line.push_str(&format!(" — {}", escape(d)));
                }
                if Some(o.label.as_str()) == approve {
                    line.push_str(" _(approves the plan)_");
                }
                line
            })
            .collect();
        blocks.push(section(&lines.join("\n")));
    }
    blocks
}

/// Slack option objects for a question's options (values: their indexes).
fn options(question: &Question, with_descriptions: bool) -> Vec<Value> {
    let approve = approve_label(question);
    question
        .options
        .iter()
        .enumerate()
        .take(MAX_MENU_OPTIONS)
        .map(|(i, o)| {
            let label = match Some(o.label.as_str()) == approve {
                true => format!("{} (approves the plan)", o.label),
                false => o.label.clone(),
            };
            let mut option = json!({ "text": plain(&label, MAX_OPTION), "value": i.to_string() });
            if let Some(d) = o
                .description
                .as_deref()
                .filter(|d| with_descriptions && !d.trim().is_empty())
            {
                option["description"] = plain(d, MAX_OPTION);
            }
            option
        })
        .collect()
}

/// The message of a pending ask, with its controls; for an ask Slack may not answer
/// ([`answerable_in_slack`]), a link to the console (`console`, when the server knows
/// its public URL) instead.
pub fn question_message(at: &Ref, requested: &Requested, console: Option<&str>) -> Value {
    let mut blocks = vec![
        json!({ "type": "header", "text": plain(&title(requested), MAX_HEADER) }),
        context(requested),
    ];
    blocks.extend(approval_blocks(requested));
    if !answerable_in_slack(requested) {
        blocks.extend(console_only(requested, console, blocks.len()));
        return json!({ "text": fallback(requested), "blocks": blocks });
    }
    let cancel = button("Cancel…", CANCEL, at, Some("danger"));
    match requested.questions.as_slice() {
        [question] => {
            blocks.extend(question_blocks(question, None, false));
            let approving = crate::domain::approval::approves_action(requested, &question.id);
            blocks.extend(one_question_controls(at, question, approving, cancel));
        }
        questions => {
            // Room for the "more" line and the controls within Slack's cap.
            let room = MAX_MESSAGE_BLOCKS - 2;
            let mut drawn = 0;
            for (i, question) in questions.iter().enumerate() {
                let more = question_blocks(question, Some(i), true);
                if blocks.len() + more.len() > room {
                    break;
                }
                blocks.extend(more);
                drawn += 1;
            }
            if drawn < questions.len() {
                blocks.push(section(&format!(
                    "_and {} more in the form_",
                    questions.len() - drawn
                )));
            }
            blocks.push(
                json!({ "type": "actions", "block_id": "askgate.controls", "elements": [
                    button("Answer…", OPEN, at, Some("primary")), cancel,
                ]}),
            );
        }
    }
    json!({ "text": fallback(requested), "blocks": blocks })
}

/// The controls of a message that asks one question: its options as buttons (single
/// select) or checkboxes (multi select), a form for free text (not on a question that
/// approves the ask's action: its options alone answer it), and Cancel.
fn one_question_controls(
    at: &Ref,
    question: &Question,
    approving: bool,
    cancel: Value,
) -> Vec<Value> {
    let other = |elements: Vec<Value>| match approving {
        true => elements,
        false => {
            let mut elements = elements;
            elements.insert(elements.len() - 1, button("Other…", OPEN, at, None));
            elements
        }
    };
    if question.options.is_empty() {
        return vec![
            json!({ "type": "actions", "block_id": "askgate.controls", "elements": [
                button("Answer…", OPEN, at, Some("primary")), cancel,
            ]}),
        ];
    }
    if question.multi_select {
        let element = match question.options.len() <= MAX_INLINE_OPTIONS {
            true => {
                json!({ "type": "checkboxes", "action_id": CHECKS, "options": options(question, true) })
            }
            false => json!({
                "type": "multi_static_select", "action_id": CHECKS,
                "placeholder": plain("Choose…", MAX_OPTION), "options": options(question, false),
            }),
        };
        return vec![
            json!({ "type": "actions", "block_id": CHECKS_BLOCK, "elements": [element] }),
            json!({ "type": "actions", "block_id": "askgate.controls", "elements": other(vec![
                button("Submit", SUBMIT, at, Some("primary")), cancel,
            ])}),
        ];
    }
    let approve = approve_label(question);
    let buttons: Vec<Value> = question
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let style = (Some(o.label.as_str()) == approve).then_some("primary");
            button(&o.label, &choose_action(i), &at.with_option(i), style)
        })
        .collect();
    let mut blocks: Vec<Value> = buttons
        .chunks(BUTTONS_PER_BLOCK)
        .enumerate()
        .map(|(n, chunk)| {
            json!({
                "type": "actions", "block_id": format!("askgate.options.{n}"), "elements": chunk,
            })
        })
        .collect();
    blocks.push(
        json!({ "type": "actions", "block_id": "askgate.controls", "elements": other(vec![cancel]) }),
    );
    blocks
}

/// One answer in words: the chosen labels and the custom text, or "skipped".
fn answer_text(answer: &QuestionAnswer) -> String {
    crate::domain::shown::answer_words(answer, escape).unwrap_or_else(|| "_skipped_".to_owned())
}

/// The form that answers a whole batch: per question its choices (radio buttons or
/// checkboxes, a menu past ten options) and an "Other" text; a question left empty is
/// skipped. The question that approves the ask's action must be answered, by its
/// choices alone.
pub fn answer_modal(at: &Ref, requested: &Requested) -> Value {
    let mut blocks = Vec::new();
    for (i, question) in requested.questions.iter().enumerate() {
        let approving = crate::domain::approval::approves_action(requested, &question.id);
        if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
            let heading = match approve_label(question) {
                Some(_) => "*The plan to review*\n",
                None => "",
            };
            blocks.push(detail_section(heading, detail));
        }
        let label = plain(&question.question, MAX_LABEL);
        if question.options.is_empty() {
            blocks.push(json!({
                "type": "input", "block_id": format!("q{i}"), "optional": true, "label": label,
                "element": { "type": "plain_text_input", "action_id": TEXT, "multiline": true },
            }));
            continue;
        }
        let inline = question.options.len() <= MAX_INLINE_OPTIONS;
        let mut element = match (question.multi_select, inline) {
            (false, true) => json!({ "type": "radio_buttons", "options": options(question, true) }),
            (true, true) => json!({ "type": "checkboxes", "options": options(question, true) }),
            (false, false) => {
                json!({ "type": "static_select", "options": options(question, false) })
            }
            (true, false) => {
                json!({ "type": "multi_static_select", "options": options(question, false) })
            }
        };
        element["action_id"] = CHOICE.into();
        if !inline {
            element["placeholder"] = plain("Choose…", MAX_OPTION);
        }
        blocks.push(json!({
            "type": "input", "block_id": format!("q{i}"), "optional": !approving, "label": label,
            "element": element,
        }));
        if approving {
            continue;
        }
        let other = match question.multi_select {
            true => "Other (added to your choices)",
            false => "Other (instead of a choice)",
        };
        blocks.push(json!({
            "type": "input", "block_id": format!("q{i}.other"), "optional": true,
            "label": plain(other, MAX_LABEL),
            "element": { "type": "plain_text_input", "action_id": TEXT },
        }));
    }
    if blocks.len() > MAX_MODAL_BLOCKS {
        // More than a Slack form holds: no form that would skip what it cannot show.
        return json!({
            "type": "modal",
            "title": plain("Answer", 24),
            "close": plain("Back", 24),
            "blocks": [section(&format!(
                "This batch has {} questions, more than a Slack form holds: answer it in \
                 the askgate console, or cancel it here.",
                requested.questions.len()
            ))],
        });
    }
    json!({
        "type": "modal",
        "callback_id": ANSWER_VIEW,
        "private_metadata": at.encode(),
        "title": plain("Answer", 24),
        "submit": plain("Submit", 24),
        "close": plain("Back", 24),
        "blocks": blocks,
    })
}

/// The form that cancels a batch, with an optional reason for the agent.
pub fn cancel_modal(at: &Ref, max_reason: usize) -> Value {
    json!({
        "type": "modal",
        "callback_id": CANCEL_VIEW,
        "private_metadata": at.encode(),
        "title": plain("Cancel the batch", 24),
        "submit": plain("Cancel the batch", 24),
        "close": plain("Keep it", 24),
        "blocks": [
            section(
                "The agent is told you cancelled these questions, with your reason if you give one, \
                 and gets none of the answers.",
            ),
            {
                "type": "input", "block_id": REASON_BLOCK, "optional": true,
                "label": plain("Reason (optional)", MAX_LABEL),
                "element": { "type": "plain_text_input", "action_id": TEXT, "max_length": max_reason },
            },
        ],
    })
}

mod approval;
mod resolved;

pub use approval::answerable_in_slack;
use approval::{approval_blocks, console_only};
pub use resolved::resolved_message;

#[cfg(test)]
mod tests;
