//! Forced replies: the prompts askgate sends for own words, a batch's answers or a
//! reason to cancel, and how a reply's text becomes answers.

use askgate_proto::v1::{QuestionAnswer, Requested};
use serde_json::{Value, json};

use super::{MAX_MESSAGE, cut, escape, units};

/// Characters of a force-reply placeholder (the Bot API's limit is 64).
const MAX_PLACEHOLDER: usize = 64;

/// What a prompt asks for by a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompted {
    Answer,
    Other,
    Cancel,
}

/// A prompt for a forced reply from `user` (id and name), replying to the ask's
/// message `message_id`.
pub fn prompt(
    requested: &Requested,
    prompted: Prompted,
    user: (i64, &str),
    message_id: i64,
) -> Value {
    let (id, name) = user;
    let name = cut(name, 64);
    let mention = format!("<a href=\"tg://user?id={id}\">{}</a>", escape(&name));
    let (ask, placeholder) = match prompted {
        Prompted::Cancel => (
            "reply to this message with why you cancel (or - for no reason).",
            "Why cancel?",
        ),
        Prompted::Other => ("reply to this message with your own answer.", "Your answer"),
        Prompted::Answer => (reply_hint(requested), "Your answer"),
    };
    let question = requested
        .questions
        .first()
        .map_or("", |q| q.question.as_str());
    let question = cut(question, 300);
    let html = format!("{mention}, {}\n<i>{}</i>", escape(ask), escape(&question));
    let shown = format!("{name}, {ask}\n{question}");
    debug_assert!(units(&shown) <= MAX_MESSAGE);
    json!({
        "text": html,
        "parse_mode": "HTML",
        "reply_parameters": { "message_id": message_id, "allow_sending_without_reply": true },
        "reply_markup": {
            "force_reply": true,
            "selective": true,
            "input_field_placeholder": cut(placeholder, MAX_PLACEHOLDER),
        },
    })
}

/// How to answer `requested` by a reply (its controls are [`Controls::Reply`]).
pub(super) fn reply_hint(requested: &Requested) -> &'static str {
    match requested.questions.as_slice() {
        [q] if q.options.is_empty() => "reply to this message with your answer.",
        [_] => "reply to this message with the option's number (several: 1, 3) or your own words.",
        _ => {
            "reply to this message with one line per question: an option's number \
             (several: 1, 3), your own words, or - to skip."
        }
    }
}

/// The answers a reply gives to `requested`: one line per question (a single question
/// takes the whole text); a line of option numbers chooses them, `-` skips, anything
/// else is own words. An error names what is wrong.
pub fn parse_reply(requested: &Requested, reply: &str) -> Result<Vec<QuestionAnswer>, String> {
    let reply = reply.trim();
    let lines: Vec<&str> = match requested.questions.len() {
        1 => vec![reply],
        _ => reply
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect(),
    };
    if lines.len() > requested.questions.len() {
        return Err(format!(
            "{} lines for {} questions: one line per question, please.",
            lines.len(),
            requested.questions.len()
        ));
    }
    let mut answers = Vec::with_capacity(requested.questions.len());
    for (i, question) in requested.questions.iter().enumerate() {
        let line = lines.get(i).copied().unwrap_or("-");
        let mut answer = QuestionAnswer {
            id: question.id.clone(),
            selected: Vec::new(),
            custom: None,
        };
        if line != "-" {
            match numbers(line, question.options.len()) {
                Some(chosen) if chosen.len() > 1 && !question.multi_select => {
                    return Err(format!("question {}: choose one option.", i + 1));
                }
                Some(chosen) => {
                    answer.selected = chosen
                        .into_iter()
                        .map(|n| question.options[n - 1].label.clone())
                        .collect();
                }
                None => answer.custom = Some(line.to_owned()),
            }
        }
        answers.push(answer);
    }
    Ok(answers)
}

/// The option numbers of `line` ("2", "1, 3"), each within 1..=`options`; `None` when
/// it is not such a list (own words).
fn numbers(line: &str, options: usize) -> Option<Vec<usize>> {
    if options == 0 {
        return None;
    }
    let mut chosen = Vec::new();
    for part in line.split([',', ' ']).filter(|p| !p.is_empty()) {
        let n: usize = part.parse().ok()?;
        if n == 0 || n > options {
            return None;
        }
        if !chosen.contains(&n) {
            chosen.push(n);
        }
    }
    (!chosen.is_empty()).then_some(chosen)
}
