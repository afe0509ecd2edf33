//! The pages a signed link opens: the ask as a form (the options as radio buttons or
//! checkboxes named `q.<question id>`, own words as `custom.<question id>`), a form to
//! cancel it, and a page saying what happened. Every text from an agent is escaped; a
//! page runs no script.

use askgate_proto::v1::{Question, Requested};

use crate::domain::shown::{self, approve_label, escape_html as escape};

/// Bytes of a detail or an action's arguments shown.
const MAX_DETAIL: usize = 16 * 1024;

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;\
padding:0 1rem;line-height:1.4}fieldset{margin:1rem 0;border:1px solid #ccc;border-radius:6px}\
label{display:block;margin:.3rem 0}pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}\
.context{color:#555}button{font-size:1rem;padding:.4rem 1rem;margin:.5rem 0}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>askgate: {}</title><style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n",
        escape(title)
    )
}

/// A page that only says something (what happened, why a link does nothing).
pub fn notice(title: &str, text: &str) -> String {
    page(
        title,
        &format!("<h1>{}</h1>\n<p>{}</p>\n", escape(title), escape(text)),
    )
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
    out.push_str(&format!(
        "<fieldset><legend><b>{prefix}{}</b></legend>\n",
        escape(&question.question)
    ));
    let approve = approve_label(question);
    if let Some(detail) = question.detail.as_deref().filter(|d| !d.trim().is_empty()) {
        if approve.is_some() {
            out.push_str("<p>The plan to review:</p>\n");
        }
        let detail = shown::head_and_tail(detail, MAX_DETAIL);
        out.push_str(&format!("<pre>{}</pre>\n", escape(&detail)));
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
    for (i, option) in question.options.iter().enumerate() {
        let checked = if chosen == Some(i) { " checked" } else { "" };
        let mark = if approve == Some(option.label.as_str()) {
            " (approves the plan)"
        } else {
            ""
        };
        let description = option
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map_or(String::new(), |d| format!(" — {}", escape(d)));
        out.push_str(&format!(
            "<label><input type=\"{kind}\" name=\"{name}\" value=\"{}\"{checked}{required}> <b>{}</b>{mark}{description}</label>\n",
            escape(&option.label),
            escape(&option.label),
        ));
    }
    let custom = escape(&format!("custom.{}", question.id));
    match (question.options.is_empty(), approving) {
        (true, _) => out.push_str(&format!(
            "<label>Your answer<br><textarea name=\"{custom}\" rows=\"4\" cols=\"60\"></textarea></label>\n"
        )),
        (false, true) => {
            out.push_str("<p class=\"context\">This answer approves the action: choose an option.</p>\n")
        }
        (false, false) => out.push_str(&format!(
            "<label>Other: <input type=\"text\" name=\"{custom}\" size=\"40\"></label>\n"
        )),
    }
    out.push_str("</fieldset>\n");
}

/// The ask as a form: `answerable` when the link may answer it (else the console is
/// named instead), `cancellable` when it may cancel it; `chosen` is the option the
/// link was for. `error` is why the last sending was refused.
pub fn form(
    requested: &Requested,
    answerable: bool,
    cancellable: bool,
    chosen: Option<usize>,
    error: Option<&str>,
) -> String {
    let title = shown::title(requested);
    let mut body = format!("<h1>{}</h1>\n", escape(&title));
    let mut context = vec![format!("session {}", requested.session_id)];
    if let Some(agent) = requested.agent.as_ref().filter(|a| !a.agent_id.is_empty()) {
        context.push(format!("agent {}", agent.agent_id));
    }
    body.push_str(&format!(
        "<p class=\"context\">{}</p>\n",
        escape(&context.join(" · "))
    ));
    if let Some(error) = error {
        body.push_str(&format!("<p><b>Not sent:</b> {}</p>\n", escape(error)));
    }
    if let Some(action) = &requested.action {
        let arguments = shown::arguments(&action.arguments_json);
        body.push_str(&format!(
            "<p>🔐 <b>Approves</b> <code>{}</code> (digest <code>{}</code>)</p>\n<pre>{}</pre>\n",
            escape(&action.name),
            escape(requested.action_digest.get(..12).unwrap_or_default()),
            escape(&shown::head_and_tail(&arguments, MAX_DETAIL))
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
            body.push_str("<button type=\"submit\">Send</button>\n</form>\n");
        }
        false => {
            for (i, q) in requested.questions.iter().enumerate() {
                body.push_str(&format!(
                    "<p><b>{}. {}</b></p>\n",
                    i + 1,
                    escape(&q.question)
                ));
            }
            body.push_str("<p>🔒 This ask cannot be answered by email: answer it in the askgate console.</p>\n");
        }
    }
    if cancellable {
        body.push_str(
            "<form method=\"post\"><input type=\"hidden\" name=\"cancel\" value=\"1\">\
             <label>Or cancel the ask, with a reason (optional): \
             <input type=\"text\" name=\"reason\" maxlength=\"400\" size=\"40\"></label>\
             <button type=\"submit\">Cancel the ask</button></form>\n",
        );
    }
    body.push_str("<p class=\"context\">Nothing is sent until you press a button.</p>\n");
    page(&title, &body)
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
        let open = form(&requested, true, true, None, None);
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
        let gated = form(&requested, true, true, None, None);
        assert!(!gated.contains("name=\"custom.go\""), "{gated}");
        assert!(gated.contains(" required>"), "{gated}");
    }
}
