//! What askgate sends Telegram: an ask as an HTML message with an inline keyboard, the
//! same message once resolved, and the prompts of forced replies. Every text keeps to
//! the Bot API's rules: HTML parse mode with all user text escaped (`&`, `<`, `>`,
//! `"`), at most 4,096 characters once parsed (counted in UTF-16 code units, as
//! Telegram counts), button texts never blank, `callback_data` 1-64 bytes (an opaque
//! [`Data`], never a label), at most [`MAX_BUTTON_OPTIONS`] option buttons.

use std::collections::BTreeSet;

use askgate_proto::v1::{CancelSource, Question, QuestionAnswer, Requested, Resolution, Resolved};
use serde_json::{Value, json};

/// Characters of a message once its entities are parsed.
pub const MAX_MESSAGE: usize = 4096;
/// Options of one question shown as buttons; past it, answers are typed as numbers.
pub const MAX_BUTTON_OPTIONS: usize = 20;
/// Characters of a button's text askgate sends (Telegram shows about a line).
const MAX_BUTTON: usize = 60;
/// Characters of `answerCallbackQuery`'s text (the Bot API's limit is 200).
pub const MAX_NOTICE: usize = 200;
/// Characters of one question's text, option label and description in a message.
const MAX_QUESTION: usize = 1000;
const MAX_LABEL: usize = 200;
const MAX_DESCRIPTION: usize = 200;
/// Bytes of a detail (a plan, a tool's input) shown: its head and tail beyond it.
const MAX_DETAIL: usize = 1500;

/// What a button does, as its `callback_data`: `<kind>:<ask key>[:<n>[:<state>]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// Answers the only question with option `n`.
    Choose(String, usize),
    /// Marks (or unmarks) option `n` of a multi-select question; `on` is its state now.
    Toggle(String, usize, bool),
    /// Sends the marked options.
    Done(String),
    /// Asks for the answers as a reply (free text, a batch, many options).
    Answer(String),
    /// Asks for own words as a reply.
    Other(String),
    /// Asks for a reason to cancel as a reply.
    Cancel(String),
}

impl Data {
    pub fn encode(&self) -> String {
        match self {
            Self::Choose(key, n) => format!("c:{key}:{n}"),
            Self::Toggle(key, n, on) => format!("t:{key}:{n}:{}", u8::from(*on)),
            Self::Done(key) => format!("d:{key}"),
            Self::Answer(key) => format!("a:{key}"),
            Self::Other(key) => format!("o:{key}"),
            Self::Cancel(key) => format!("x:{key}"),
        }
    }

    pub fn decode(data: &str) -> Option<Self> {
        let mut parts = data.split(':');
        let kind = parts.next()?;
        let key = parts.next().filter(|k| is_key(k))?.to_owned();
        let mut number = || parts.next()?.parse::<usize>().ok();
        let data = match kind {
            "c" => Self::Choose(key, number()?),
            "t" => {
                let n = number()?;
                Self::Toggle(key, n, number()? == 1)
            }
            "d" => Self::Done(key),
            "a" => Self::Answer(key),
            "o" => Self::Other(key),
            "x" => Self::Cancel(key),
            _ => return None,
        };
        Some(data)
    }

    pub fn key(&self) -> &str {
        match self {
            Self::Choose(key, _)
            | Self::Toggle(key, ..)
            | Self::Done(key)
            | Self::Answer(key)
            | Self::Other(key)
            | Self::Cancel(key) => key,
        }
    }
}

/// The key of an ask in its buttons: 16 characters of base64url naming the session and
/// the ask (which a note maps back to them).
pub fn ask_key(tenant: &str, session: &str, rpc_id: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{tenant}\u{1f}{session}\u{1f}{rpc_id}"));
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..12])
}

fn is_key(key: &str) -> bool {
    key.len() == 16
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// User text made inert in HTML parse mode.
pub use crate::domain::shown::escape_html as escape;

/// Characters as Telegram counts them: UTF-16 code units.
fn units(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `text` cut to `max` characters, with an ellipsis when cut; a blank one is "–".
pub fn cut(text: &str, max: usize) -> String {
    let text = if text.trim().is_empty() { "–" } else { text };
    crate::channel::chat::cut(text, max)
}

/// One paragraph of a message: its HTML, and how long it is once parsed.
struct Piece {
    html: String,
    units: usize,
}

/// A message's paragraphs, assembled within [`MAX_MESSAGE`].
#[derive(Default)]
struct Text(Vec<Piece>);

impl Text {
    /// A paragraph of plain text, escaped.
    fn plain(&mut self, text: &str) {
        self.tagged("", text, "");
    }

    /// A paragraph of `text` (escaped) between an opening and a closing tag.
    fn tagged(&mut self, open: &str, text: &str, close: &str) {
        self.0.push(Piece {
            html: format!("{open}{}{close}", escape(text)),
            units: units(text),
        });
    }

    /// A paragraph whose HTML is built already, and its parsed text.
    fn html(&mut self, html: String, shown: &str) {
        self.0.push(Piece {
            html,
            units: units(shown),
        });
    }

    /// The message: its paragraphs as long as they fit, then a line saying what was
    /// left out and where to see it whole.
    fn finish(self, console: Option<&str>) -> String {
        let more = match console {
            Some(_) => "… (cut: the whole ask is in the askgate console)",
            None => "… (cut: the whole ask is in the askgate console or the agent's UI)",
        };
        let room = MAX_MESSAGE - units(more) - 2;
        let (mut out, mut used, mut cut) = (String::new(), 0, false);
        for piece in self.0 {
            let separator = usize::from(!out.is_empty()) * 2;
            if used + separator + piece.units > room {
                cut = true;
                break;
            }
            if separator > 0 {
                out.push_str("\n\n");
            }
            out.push_str(&piece.html);
            used += separator + piece.units;
        }
        if cut {
            out.push_str("\n\n");
            out.push_str(&escape(more));
        }
        out
    }
}

use crate::domain::shown::approve_label;

/// The title of a batch, within a line.
fn title(requested: &Requested) -> String {
    cut(&crate::domain::shown::title(requested), 200)
}

/// The session, the agent and the labels, in one italic line.
fn context(text: &mut Text, requested: &Requested) {
    let mut parts = vec![format!("session {}", cut(&requested.session_id, 200))];
    if let Some(agent) = requested.agent.as_ref().filter(|a| !a.agent_id.is_empty()) {
        parts.push(format!("agent {}", cut(&agent.agent_id, 200)));
    }
    let mut labels: Vec<_> = requested.labels.iter().collect();
    labels.sort();
    for (key, value) in labels.into_iter().take(10) {
        parts.push(cut(&format!("{key}={value}"), 200));
    }
    text.tagged("<i>", &parts.join(" · "), "</i>");
}

/// A question: its text, its detail as written (head and tail when long), its options
/// numbered with their descriptions.
fn question(text: &mut Text, question: &Question, number: Option<usize>) {
    let prefix = number.map_or(String::new(), |n| format!("{}. ", n + 1));
    text.tagged(
        "<b>",
        &format!("{prefix}{}", cut(&question.question, MAX_QUESTION)),
        "</b>",
    );
    let approve = approve_label(question);
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        let shown = crate::domain::shown::head_and_tail(detail, MAX_DETAIL);
        let heading = if approve.is_some() {
            "The plan to review:\n"
        } else {
            ""
        };
        let html = format!("{heading}<pre>{}</pre>", escape(&shown));
        text.html(html, &format!("{heading}{shown}"));
    }
    for (i, option) in question.options.iter().enumerate() {
        let mark = if approve == Some(option.label.as_str()) {
            " ✅"
        } else {
            ""
        };
        let label = cut(&option.label, MAX_LABEL);
        let mut html = format!("{}. <b>{}</b>{mark}", i + 1, escape(&label));
        let mut shown = format!("{}. {label}{mark}", i + 1);
        if let Some(description) = option
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
        {
            let description = cut(description, MAX_DESCRIPTION);
            html.push_str(&format!(" — {}", escape(&description)));
            shown.push_str(&format!(" — {description}"));
        }
        text.html(html, &shown);
    }
    if question.multi_select && !question.options.is_empty() {
        text.tagged("<i>", "(choose any)", "</i>");
    }
}

/// What the ask's answer approves and how it resolves: the action and its arguments,
/// a quorum, the default answers.
fn approval(text: &mut Text, requested: &Requested) {
    if let Some(action) = &requested.action {
        let arguments = crate::domain::shown::arguments(&action.arguments_json);
        let arguments = crate::domain::shown::head_and_tail(&arguments, MAX_DETAIL);
        let digest = requested.action_digest.get(..12).unwrap_or_default();
        let name = cut(&action.name, 200);
        let html = format!(
            "🔐 <b>Approves</b> <code>{}</code> (digest <code>{digest}</code>)\n<pre>{}</pre>",
            escape(&name),
            escape(&arguments)
        );
        text.html(
            html,
            &format!("🔐 Approves {name} (digest {digest})\n{arguments}"),
        );
    }
    let terms = crate::domain::shown::terms(requested, answer_words);
    if !terms.is_empty() {
        text.tagged("<i>", &terms.join(" · "), "</i>");
    }
}

/// One answer in words.
fn answer_words(answer: &QuestionAnswer) -> String {
    crate::domain::shown::answer_words(answer, |t| t.to_owned()).unwrap_or_else(|| "skipped".into())
}

/// How a question can be answered with buttons: one option at a time, several, or by
/// a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controls {
    Choose,
    Toggle,
    Reply,
}

/// The controls of `requested`: buttons for one question with a few options, else a
/// reply.
pub fn controls(requested: &Requested) -> Controls {
    match requested.questions.as_slice() {
        [q] if !q.options.is_empty() && q.options.len() <= MAX_BUTTON_OPTIONS => {
            match q.multi_select {
                true => Controls::Toggle,
                false => Controls::Choose,
            }
        }
        _ => Controls::Reply,
    }
}

fn button(text: &str, data: &Data) -> Value {
    json!({ "text": cut(text, MAX_BUTTON), "callback_data": data.encode() })
}

/// The keyboard of an ask Telegram may answer; for a multi-select question, `marked`
/// are its options marked so far. A question that approves the ask's action gets no
/// "Other…": its options alone answer it.
pub fn keyboard(key: &str, requested: &Requested, marked: &BTreeSet<usize>) -> Value {
    let key = key.to_owned();
    let mut rows: Vec<Value> = Vec::new();
    let cancel = button("✖ Cancel…", &Data::Cancel(key.clone()));
    let other = |q: &askgate_proto::v1::Question| {
        (!crate::domain::approval::approves_action(requested, &q.id))
            .then(|| button("✍ Other…", &Data::Other(key.clone())))
    };
    match (controls(requested), requested.questions.first()) {
        (Controls::Choose, Some(q)) => {
            let approve = approve_label(q);
            for (i, option) in q.options.iter().enumerate() {
                let mark = if approve == Some(option.label.as_str()) {
                    "✅ "
                } else {
                    ""
                };
                let text = format!("{mark}{}. {}", i + 1, option.label.trim());
                rows.push(json!([button(&text, &Data::Choose(key.clone(), i))]));
            }
            let row: Vec<Value> = other(q).into_iter().chain([cancel]).collect();
            rows.push(Value::Array(row));
        }
        (Controls::Toggle, Some(q)) => {
            for (i, option) in q.options.iter().enumerate() {
                let on = marked.contains(&i);
                let text = format!(
                    "{} {}. {}",
                    if on { "☑" } else { "☐" },
                    i + 1,
                    option.label.trim()
                );
                rows.push(json!([button(&text, &Data::Toggle(key.clone(), i, on))]));
            }
            let row: Vec<Value> = [button("✔ Send", &Data::Done(key.clone()))]
                .into_iter()
                .chain(other(q))
                .chain([cancel])
                .collect();
            rows.push(Value::Array(row));
        }
        _ => rows.push(json!([
            button("✍ Answer…", &Data::Answer(key.clone())),
            cancel
        ])),
    }
    json!({ "inline_keyboard": rows })
}

/// The options marked in a multi-select keyboard as Telegram shows it now.
pub fn marked(markup: &Value) -> BTreeSet<usize> {
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|b| Data::decode(b["callback_data"].as_str()?))
        .filter_map(|data| match data {
            Data::Toggle(_, n, true) => Some(n),
            _ => None,
        })
        .collect()
}

/// The message of a pending ask (`sendMessage`'s text, parse mode and keyboard):
/// controls when Telegram may answer it, else a link to the console (`console`).
pub fn question_message(
    key: &str,
    requested: &Requested,
    answerable: bool,
    cancellable: bool,
    console: Option<&str>,
) -> Value {
    let mut text = Text::default();
    text.tagged("<b>", &title(requested), "</b>");
    context(&mut text, requested);
    let several = requested.questions.len() > 1;
    for (i, q) in requested.questions.iter().enumerate() {
        question(&mut text, q, several.then_some(i));
    }
    approval(&mut text, requested);
    let markup = if answerable {
        if controls(requested) == Controls::Reply {
            let hint = format!("Press Answer… and {}", reply_hint(requested));
            text.tagged("<i>", &hint, "</i>");
        }
        Some(keyboard(key, requested, &BTreeSet::new()))
    } else {
        text.plain(
            "🔒 This ask cannot be answered from Telegram: answer it in the askgate console.",
        );
        let mut row = Vec::new();
        if let Some(url) = console {
            row.push(json!({ "text": "Open the askgate console", "url": url }));
        }
        if cancellable {
            row.push(button("✖ Cancel…", &Data::Cancel(key.to_owned())));
        }
        (!row.is_empty()).then(|| json!({ "inline_keyboard": [row] }))
    };
    let mut message = json!({
        "text": text.finish(console),
        "parse_mode": "HTML",
        "link_preview_options": { "is_disabled": true },
    });
    if let Some(markup) = markup {
        message["reply_markup"] = markup;
    }
    message
}

/// Who resolved, for Telegram: a Telegram user as a mention, anyone else by name.
fn resolver(resolved_by: &str) -> (String, String) {
    match resolved_by.strip_prefix("telegram:") {
        Some(user) if !user.is_empty() && user.bytes().all(|b| b.is_ascii_digit()) => (
            format!(
                "<a href=\"tg://user?id={user}\">{}</a>",
                escape(resolved_by)
            ),
            resolved_by.to_owned(),
        ),
        _ if resolved_by.is_empty() => ("someone".into(), "someone".into()),
        _ => (escape(resolved_by), resolved_by.to_owned()),
    }
}

/// The message once its ask is resolved (`editMessageText`'s text and parse mode, no
/// keyboard): the questions, and who answered what (a secret never), or how it ended.
pub fn resolved_message(requested: &Requested, resolved: &Resolved) -> Value {
    let mut text = Text::default();
    text.tagged("<b>", &title(requested), "</b>");
    context(&mut text, requested);
    let (who_html, who) = resolver(&resolved.resolved_by);
    let (html, shown) = match resolved.reason() {
        Resolution::Answered => (
            format!("✅ Answered by {who_html}"),
            format!("✅ Answered by {who}"),
        ),
        Resolution::Defaulted => {
            let line = "⌛ Nobody answered in time: the default answers apply";
            (line.to_owned(), line.to_owned())
        }
        Resolution::Cancelled if resolved.cancel_source() == CancelSource::UiClosed => (
            format!("🚫 Closed unanswered: the answering UI of {who_html} closed"),
            format!("🚫 Closed unanswered: the answering UI of {who} closed"),
        ),
        Resolution::Cancelled if resolved.cancel_reason.is_empty() => (
            format!("🚫 Cancelled by {who_html}"),
            format!("🚫 Cancelled by {who}"),
        ),
        Resolution::Cancelled => {
            let reason = cut(&resolved.cancel_reason, 500);
            (
                format!("🚫 Cancelled by {who_html}: {}", escape(&reason)),
                format!("🚫 Cancelled by {who}: {reason}"),
            )
        }
        other => {
            let line = match other {
                Resolution::Aborted => "❌ Aborted: the asking agent went away.",
                Resolution::Expired => "⌛ Expired: the agent stopped waiting.",
                Resolution::Disposed => "❌ Disposed: the server shut down before an answer.",
                _ => "Resolved.",
            };
            (line.to_owned(), line.to_owned())
        }
    };
    text.html(html, &shown);
    let several = requested.questions.len() > 1;
    for (i, asked) in requested.questions.iter().enumerate() {
        let prefix = if several {
            format!("{}. ", i + 1)
        } else {
            String::new()
        };
        let words = match resolved.answers.iter().find(|a| a.id == asked.id) {
            _ if asked.secret => Some("(secret)".to_owned()),
            Some(answer) => Some(answer_words(answer)),
            None => None,
        };
        let q = cut(&asked.question, 300);
        match words {
            Some(words) => {
                let words = cut(&words, 500);
                let html = format!("{}{}\n→ <b>{}</b>", prefix, escape(&q), escape(&words));
                text.html(html, &format!("{prefix}{q}\n→ {words}"));
            }
            None => text.plain(&format!("{prefix}{q}")),
        }
    }
    json!({
        "text": text.finish(None),
        "parse_mode": "HTML",
        "link_preview_options": { "is_disabled": true },
    })
}

mod reply;
use reply::reply_hint;
pub use reply::{Prompted, parse_reply, prompt};

#[cfg(test)]
mod tests;
