//! The pages a signed link opens: the ask as a form (the options as radio buttons or
//! checkboxes named `q.<question id>`, own words as `custom.<question id>`), a form to
//! cancel it, and a page saying what happened. Every text from an agent is escaped; a
//! page runs no script.

use askgate_proto::v1::{Question, Requested};

use crate::domain::shown::{self, approve_label, escape_html as escape};

/// Bytes of a detail or an action's arguments shown.
const MAX_DETAIL: usize = 16 * 1024;

/// The console's own style sheet, so that a link's page looks like the console (light
/// and dark, readable from phone width up), inlined: the pages load nothing.
const CONSOLE_CSS: &str = include_str!("../../../../../client/web/dist/console.css");

/// What the pages add to it: forms without the console's script (a chosen option is
/// marked by CSS alone).
const PAGE_CSS: &str = "fieldset{border:0;padding:0;margin:0 0 1.25rem}\
legend{font-weight:600;padding:0;margin-bottom:.25rem}\
.option-row:has(input:checked){border-color:var(--accent);background:var(--accent-soft)}\
.option-row input{margin-top:.3rem;flex:none}\
.answers{margin:.5rem 0;padding-left:1.25rem}main{margin-top:.25rem}";

/// A page: the console's bar (the session, when there is one) over one card.
fn page(title: &str, session: Option<&str>, body: &str) -> String {
    let session = session.map_or(String::new(), |s| {
        format!("<span class=\"session\">{}</span>", escape(s))
    });
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>askgate: {}</title><style>{CONSOLE_CSS}{PAGE_CSS}</style></head>\n<body>\
         <div id=\"app\"><header class=\"bar\"><span class=\"brand\">askgate</span>{session}\
         </header>\n<main><div class=\"card\">\n{body}</div></main></div></body></html>\n",
        escape(title)
    )
}

/// A page that only says something (what happened, why a link does nothing): its
/// title, then each of `lines` as a paragraph.
pub fn notice(title: &str, lines: &[String]) -> String {
    let mut body = format!("<h1>{}</h1>\n", escape(title));
    for line in lines {
        body.push_str(&format!("<p>{}</p>\n", escape(line)));
    }
    page(title, None, &body)
}

/// A page asking to confirm one thing: `lines`, then a form with one button that
/// sends it back here (POST).
pub fn confirm(title: &str, lines: &[String], button: &str) -> String {
    let mut body = format!("<h1>{}</h1>\n", escape(title));
    for line in lines {
        body.push_str(&format!("<p>{}</p>\n", escape(line)));
    }
    body.push_str(&format!(
        "<form method=\"post\"><div class=\"actions\"><button class=\"primary\" \
         type=\"submit\">{}</button></div></form>\n",
        escape(button)
    ));
    page(title, None, &body)
}

/// What a sent form did: `done` (the answer is sent, the vote recorded, the ask
/// cancelled), then what was sent, one line per question, and whom as.
pub fn sent(title: &str, done: &str, what: &[String], who: &str) -> String {
    let mut body = format!("<h1>{}</h1>\n<p>{}</p>\n", escape(title), escape(done));
    if !what.is_empty() {
        body.push_str("<ul class=\"answers\">\n");
        for line in what {
            body.push_str(&format!("<li>{}</li>\n", escape(line)));
        }
        body.push_str("</ul>\n");
    }
    body.push_str(&format!(
        "<p class=\"muted\">Sent as <b>{}</b>. You may close this page.</p>\n",
        escape(who)
    ));
    page(title, None, &body)
}

/// `text` escaped in a span of `class`; none when it is blank.
fn spanned(class: &str, text: Option<&str>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
        .map(|t| format!("<span class=\"{class}\">{}</span>", escape(t)))
}

/// One question's fieldset; `approving`: it approves the ask's action, so its options
/// alone answer it (no own words; a radio button must be chosen).
fn question(
    out: &mut String,
    question: &Question,
    number: Option<usize>,
    chosen: Option<usize>,
    approving: bool,
) {
    let prefix = number.map_or(String::new(), |n| format!("{}. ", n + 1));
    // The legend first (a fieldset's name), the header's chip inside it.
    let chip = spanned("chip", question.header.as_deref()).map_or(String::new(), |c| c + "<br>");
    out.push_str(&format!(
        "<fieldset><legend>{chip}{prefix}{}</legend>\n",
        escape(&question.question)
    ));
    let approve = approve_label(question);
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        let detail = shown::head_and_tail(detail, MAX_DETAIL);
        match approve {
            Some(_) => out.push_str(&format!(
                "<div class=\"plan\"><p class=\"muted\">The plan to review:</p><pre>{}</pre></div>\n",
                escape(&detail)
            )),
            None => out.push_str(&format!("<p class=\"detail\">{}</p>\n", escape(&detail))),
        }
    }
    let name = escape(&format!("q.{}", question.id));
    let kind = if question.multi_select {
        "checkbox"
    } else {
        "radio"
    };
    let required = match approving && !question.multi_select {
        true => " required",
        false => "",
    };
    out.push_str("<div class=\"options\">\n");
    for (i, option) in question.options.iter().enumerate() {
        let checked = if chosen == Some(i) { " checked" } else { "" };
        let marked = shown::recommended(&option.label);
        let badge = match (approve == Some(option.label.as_str()), marked.is_some()) {
            (true, _) => "<span class=\"badge approve\">approves the plan</span>",
            (false, true) => "<span class=\"badge\">recommended</span>",
            (false, false) => "",
        };
        let description = spanned("description", option.description.as_deref()).unwrap_or_default();
        out.push_str(&format!(
            "<label class=\"option-row\"><input type=\"{kind}\" name=\"{name}\" value=\"{}\"{checked}{required}>\
             <span class=\"body\"><span class=\"label\">{}</span>{description}</span>{badge}</label>\n",
            escape(&option.label),
            escape(marked.unwrap_or(&option.label)),
        ));
    }
    out.push_str("</div>\n");
    let custom = escape(&format!("custom.{}", question.id));
    match (question.options.is_empty(), approving) {
        (true, _) => out.push_str(&format!(
            "<label class=\"text-label\" for=\"{custom}\">Your answer</label>\
             <textarea class=\"text\" id=\"{custom}\" name=\"{custom}\" rows=\"4\"></textarea>\n"
        )),
        (false, true) => out.push_str(
            "<p class=\"muted\">This answer approves the action: choose an option.</p>\n",
        ),
        (false, false) => out.push_str(&format!(
            "<label class=\"text-label\" for=\"{custom}\">Or in your own words</label>\
             <input class=\"text\" type=\"text\" id=\"{custom}\" name=\"{custom}\">\n"
        )),
    }
    out.push_str("</fieldset>\n");
}

/// The ask as a form: `answerable` when the link may answer it (else the console is
/// named instead), `cancellable` when it may cancel it; `chosen` is the option the
/// link was for; `who` is whom the page answers as. `error` is why the last sending
/// was refused.
pub fn form(
    requested: &Requested,
    (answerable, cancellable): (bool, bool),
    chosen: Option<usize>,
    who: &str,
    error: Option<&str>,
) -> String {
    let title = shown::title(requested);
    let mut body = format!("<h1>{}</h1>\n", escape(&title));
    let mut context = Vec::new();
    if !requested.asked_by.is_empty() {
        context.push(format!("asked by {}", requested.asked_by));
    }
    if let Some(agent) = requested.agent.as_ref().filter(|a| !a.agent_id.is_empty()) {
        context.push(format!("agent {}", agent.agent_id));
    }
    context.push(format!("you answer as {who}"));
    body.push_str(&format!(
        "<p class=\"muted\">{}</p>\n",
        escape(&context.join(" · "))
    ));
    if let Some(error) = error {
        body.push_str(&format!(
            "<p class=\"error\" role=\"alert\"><b>Not sent:</b> {}</p>\n",
            escape(error)
        ));
    }
    if let Some(action) = &requested.action {
        let arguments = shown::arguments(&action.arguments_json);
        body.push_str(&format!(
            "<section class=\"approval\"><h3>🔐 Approves <code>{}</code></h3><pre>{}</pre>\
             <p class=\"digest\">Its digest, {}…, is what the signed receipt binds: the \
             action that runs must be exactly this one.</p></section>\n",
            escape(&action.name),
            escape(&shown::head_and_tail(&arguments, MAX_DETAIL)),
            escape(requested.action_digest.get(..12).unwrap_or_default()),
        ));
    }
    let terms = shown::terms(requested, |a| {
        shown::answer_words(a, str::to_owned).unwrap_or_default()
    });
    if !terms.is_empty() {
        body.push_str(&format!("<p>{}</p>\n", escape(&terms.join(" · "))));
    }
    let single = chosen.filter(|_| requested.questions.len() == 1);
    match answerable {
        true => {
            body.push_str("<form method=\"post\">\n");
            let several = requested.questions.len() > 1;
            for (i, q) in requested.questions.iter().enumerate() {
                let approving = crate::domain::approval::approves_action(requested, &q.id);
                question(&mut body, q, several.then_some(i), single, approving);
            }
            body.push_str(
                "<div class=\"actions\"><button class=\"primary\" type=\"submit\">Send</button></div>\n</form>\n",
            );
        }
        false => {
            for (i, q) in requested.questions.iter().enumerate() {
                body.push_str(&format!(
                    "<p><b>{}. {}</b></p>\n",
                    i + 1,
                    escape(&q.question)
                ));
            }
            let secret = crate::domain::approval::has_secret(&requested.questions);
            let now = crate::channel::clock::now_ms();
            let approvers = crate::domain::approval::approvers_at(requested, now);
            let why = match approvers.filter(|_| !secret) {
                Some(approvers) => format!(
                    "🔒 Only {} may answer this.",
                    escape(&crate::domain::approval::approvers_text(&approvers))
                ),
                None => "🔒 This ask cannot be answered by email: answer it in the askgate \
                         console."
                    .to_owned(),
            };
            body.push_str(&format!("<p>{why}</p>\n"));
        }
    }
    if cancellable {
        body.push_str(
            "<form method=\"post\"><input type=\"hidden\" name=\"cancel\" value=\"1\">\
             <label class=\"text-label\" for=\"reason\">Or cancel the ask, with a reason (optional)</label>\
             <input class=\"text\" type=\"text\" id=\"reason\" name=\"reason\" maxlength=\"400\">\
             <div class=\"actions\"><button class=\"danger\" type=\"submit\">Cancel the ask</button></div></form>\n",
        );
    }
    body.push_str("<p class=\"muted\">Nothing is sent until you press a button.</p>\n");
    page(&title, Some(&requested.session_id), &body)
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{Action, QuestionAnswer, QuestionOption};

    use super::*;

    #[test]
    fn the_question_that_approves_an_action_takes_a_chosen_option_only() {
        let mut requested = Requested {
            rpc_id: "r".into(),
            session_id: "s".into(),
            questions: vec![Question {
                id: "go".into(),
                question: "Deploy?".into(),
                options: ["Approve", "Reject"]
                    .map(|label| QuestionOption {
                        label: label.into(),
                        description: None,
                    })
                    .to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let open = form(
            &requested,
            (true, true),
            None,
            "email:ana@example.com",
            None,
        );
        assert!(open.contains("name=\"custom.go\""), "{open}");
        requested.action = Some(Box::new(Action {
            name: "deploy".into(),
            arguments_json: "{}".into(),
            approving_answers: vec![QuestionAnswer {
                id: "go".into(),
                selected: vec!["Approve".into()],
                custom: None,
            }],
        }));
        let gated = form(
            &requested,
            (true, true),
            None,
            "email:ana@example.com",
            None,
        );
        assert!(!gated.contains("name=\"custom.go\""), "{gated}");
        assert!(gated.contains(" required>"), "{gated}");
    }
}
