//! What an email route sends: an ask as a mail with a plain-text and an HTML part (the
//! questions, the options as links, a link to a form for the whole ask, and the
//! console), and a follow-up once the ask is resolved. Every text from an agent is
//! escaped in the HTML part; a detail is shown whole when it fits, else as its head
//! and tail around a mark saying how much is left out.

use askgate_proto::v1::{Question, Requested, Resolved};

use crate::{
    channel::chat::{line, outcome},
    domain::shown::{self, approve_label, escape_html as escape},
};

/// Characters of a subject (headers fold, but a long one reads badly).
const MAX_SUBJECT: usize = 150;
/// Bytes of a detail or an action's arguments shown.
const MAX_DETAIL: usize = 8 * 1024;

/// The links of one recipient's mail: the form for the whole ask, one per option of a
/// single question (empty otherwise), and the console's inbox.
pub struct Links {
    pub form: String,
    pub options: Vec<String>,
}

/// A mail's subject and its two parts.
pub struct Mail {
    pub subject: String,
    pub text: String,
    pub html: String,
}

fn subject(requested: &Requested, prefix: &str) -> String {
    line(&format!("{prefix}{}", shown::title(requested)), MAX_SUBJECT)
}

/// Both parts, written side by side.
#[derive(Default)]
struct Parts {
    text: String,
    html: String,
}

impl Parts {
    fn paragraph(&mut self, text: &str) {
        self.text.push_str(text);
        self.text.push_str("\n\n");
        self.html.push_str(&format!("<p>{}</p>\n", escape(text)));
    }

    fn pre(&mut self, heading: &str, body: &str) {
        let body = shown::head_and_tail(body, MAX_DETAIL);
        self.text.push_str(&format!("{heading}\n{body}\n\n"));
        self.html.push_str(&format!(
            "<p>{}</p>\n<pre style=\"white-space:pre-wrap\">{}</pre>\n",
            escape(heading),
            escape(&body)
        ));
    }

    fn link(&mut self, label: &str, url: &str) {
        self.text.push_str(&format!("{label}: {url}\n\n"));
        self.html.push_str(&format!(
            "<p><a href=\"{}\">{}</a></p>\n",
            escape(url),
            escape(label)
        ));
    }
}

fn question(
    parts: &mut Parts,
    question: &Question,
    number: Option<usize>,
    links: Option<&[String]>,
) {
    let prefix = number.map_or(String::new(), |n| format!("{}. ", n + 1));
    parts
        .text
        .push_str(&format!("{prefix}{}\n\n", question.question));
    parts.html.push_str(&format!(
        "<h3>{}{}</h3>\n",
        prefix,
        escape(&question.question)
    ));
    let approve = approve_label(question);
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        let heading = if approve.is_some() {
            "The plan to review:"
        } else {
            "Detail:"
        };
        parts.pre(heading, detail);
    }
    if question.options.is_empty() {
        return;
    }
    parts.html.push_str("<ul>\n");
    for (i, option) in question.options.iter().enumerate() {
        let mark = if approve == Some(option.label.as_str()) {
            " (approves)"
        } else {
            ""
        };
        let description = option
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map_or(String::new(), |d| format!(" — {d}"));
        let link = links.and_then(|l| l.get(i));
        parts.text.push_str(&format!(
            "  {}. {}{mark}{description}\n",
            i + 1,
            option.label
        ));
        if let Some(link) = link {
            parts.text.push_str(&format!("     choose: {link}\n"));
        }
        let label = match link {
            Some(link) => format!("<a href=\"{}\">{}</a>", escape(link), escape(&option.label)),
            None => escape(&option.label),
        };
        parts
            .html
            .push_str(&format!("<li>{label}{mark}{}</li>\n", escape(&description)));
    }
    parts.html.push_str("</ul>\n");
    parts.text.push('\n');
    if question.multi_select {
        parts.paragraph("(choose any)");
    }
}

fn context(parts: &mut Parts, requested: &Requested) {
    let mut context = vec![format!("session {}", requested.session_id)];
    if let Some(agent) = requested.agent.as_ref().filter(|a| !a.agent_id.is_empty()) {
        context.push(format!("agent {}", agent.agent_id));
    }
    let mut labels: Vec<_> = requested.labels.iter().collect();
    labels.sort();
    context.extend(labels.into_iter().take(10).map(|(k, v)| format!("{k}={v}")));
    parts.paragraph(&context.join(" · "));
}

/// The mail of a pending ask to one recipient: `links` when the route may answer it,
/// else the console only.
pub fn ask_mail(requested: &Requested, links: Option<&Links>, console: &str) -> Mail {
    let mut parts = Parts::default();
    parts
        .html
        .push_str(&format!("<h2>{}</h2>\n", escape(&shown::title(requested))));
    context(&mut parts, requested);
    let several = requested.questions.len() > 1;
    for (i, q) in requested.questions.iter().enumerate() {
        let options = links
            .map(|l| l.options.as_slice())
            .filter(|o| !o.is_empty());
        question(&mut parts, q, several.then_some(i), options);
    }
    if let Some(action) = &requested.action {
        let digest = requested.action_digest.get(..12).unwrap_or_default();
        let heading = format!("Approves {} (digest {digest}):", action.name);
        parts.pre(&heading, &shown::arguments(&action.arguments_json));
    }
    let terms = shown::terms(requested, |a| {
        shown::answer_words(a, str::to_owned).unwrap_or_default()
    });
    if !terms.is_empty() {
        parts.paragraph(&terms.join(" · "));
    }
    match links {
        Some(links) => parts.link("Answer or cancel", &links.form),
        None => parts
            .paragraph("This ask cannot be answered by email: answer it in the askgate console."),
    }
    parts.link("The askgate console", console);
    parts.paragraph("Each link works once, until the ask is resolved. Opening a link changes nothing: you confirm on the page.");
    Mail {
        subject: subject(requested, "[askgate] "),
        text: parts.text,
        html: wrap(parts.html),
    }
}

/// The follow-up once the ask is resolved: who answered what (a secret never), or how
/// it ended.
pub fn resolved_mail(requested: &Requested, resolved: &Resolved) -> Mail {
    let outcome = outcome(resolved);
    let mut parts = Parts::default();
    parts
        .html
        .push_str(&format!("<h2>{}</h2>\n", escape(&shown::title(requested))));
    parts.paragraph(&outcome);
    for asked in &requested.questions {
        let words = match resolved.answers.iter().find(|a| a.id == asked.id) {
            _ if asked.secret => "(secret)".to_owned(),
            Some(answer) => {
                shown::answer_words(answer, str::to_owned).unwrap_or_else(|| "skipped".into())
            }
            None => continue,
        };
        parts.paragraph(&format!("{} → {words}", asked.question));
    }
    parts.paragraph("The links of the earlier mail answer nothing now.");
    Mail {
        subject: subject(requested, "Re: [askgate] "),
        text: parts.text,
        html: wrap(parts.html),
    }
}

fn wrap(body: String) -> String {
    format!(
        "<!doctype html>\n<html><body style=\"font-family:sans-serif\">\n{body}</body></html>\n"
    )
}
