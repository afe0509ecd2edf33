//! Request validation (docs/protocol.md, Semantics 1 and 9): everything an `Ask` must satisfy
//! before it is stored, and the shape of ids and free text on the other calls.

use std::{collections::HashMap, fmt};

use askgate_proto::v1::{AskRequest, NotifyPolicy, Question, intent};

use super::{Error, Limits, Violation, echo, seen::Seen};

/// Longest session id, in characters.
pub const MAX_SESSION_ID_CHARS: usize = 128;
/// Longest rpc_id or request_id a caller may send, in bytes.
pub const MAX_ID_BYTES: usize = 128;

/// Longest tenant name, in characters.
pub const MAX_TENANT_CHARS: usize = 64;

/// Checks a tenant name as a credential states it: 1-64 characters of
/// `[A-Za-z0-9._-]`. The error says what is wrong, without echoing the name.
pub fn tenant_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the tenant name must not be empty".into());
    }
    if name.len() > MAX_TENANT_CHARS {
        return Err(format!(
            "the tenant name must be at most {MAX_TENANT_CHARS} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err("the tenant name may only hold the characters [A-Za-z0-9._-]".into());
    }
    Ok(())
}

/// Longest cancel reason, in bytes: it reaches the agent inside an error, which must
/// stay small (docs/protocol.md "Errors are bounded").
pub const MAX_CANCEL_REASON_BYTES: usize = 400;

/// Longest reattach grace an ask may ask for, in milliseconds.
pub const MAX_REATTACH_GRACE_MS: u32 = 3_600_000;

/// Checks a session id: 1-128 characters of `[A-Za-z0-9._:@/-]`.
pub fn session_id(field: &str, id: &str) -> Result<(), Error> {
    session_id_violation(field, id).map_or(Ok(()), |v| Err(Error::BadRequest(vec![v])))
}

fn session_id_violation(field: &str, id: &str) -> Option<Violation> {
    if id.is_empty() {
        return Some(Violation::new(field, "must not be empty"));
    }
    if id.len() > MAX_SESSION_ID_CHARS {
        return Some(Violation::new(
            field,
            format!("must be at most {MAX_SESSION_ID_CHARS} characters"),
        ));
    }
    if let Some(bad) = id.chars().find(|c| !is_session_id_char(*c)) {
        return Some(Violation::new(
            field,
            format!(
                "character {} is not allowed; use [A-Za-z0-9._:@/-]",
                echo(bad.encode_utf8(&mut [0; 4]))
            ),
        ));
    }
    None
}

fn is_session_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '/' | '-')
}

/// Checks an agent id: the same alphabet and length as a session id.
pub fn agent_id(field: &str, id: &str) -> Result<(), Error> {
    session_id(field, id)
}

/// Checks an rpc_id named by Answer or Cancel. Its content is opaque; only its shape is
/// checked so that absurd input is refused before any lookup.
pub fn rpc_id(id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::bad_request("rpc_id", "must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::bad_request(
            "rpc_id",
            format!("must be at most {MAX_ID_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// Checks a free-text field against a byte limit.
pub fn text(field: &str, value: &str, max_bytes: usize) -> Result<(), Error> {
    match too_long(field, value, max_bytes) {
        Some(v) => Err(Error::BadRequest(vec![v])),
        None => Ok(()),
    }
}

/// `field` is only written out when there is a violation to name: a valid request
/// formats no paths.
fn too_long(field: impl fmt::Display, value: &str, max_bytes: usize) -> Option<Violation> {
    (value.len() > max_bytes).then(|| {
        Violation::new(
            field.to_string(),
            format!("must be at most {max_bytes} bytes"),
        )
    })
}

/// The path of a question's field, `questions[i].name`, written only when a violation
/// names it.
#[derive(Clone, Copy)]
struct QuestionField {
    question: usize,
    name: &'static str,
}

impl fmt::Display for QuestionField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "questions[{}].{}", self.question, self.name)
    }
}

/// The path of an option's field, `questions[i].options[j].name`.
#[derive(Clone, Copy)]
struct OptionField {
    question: usize,
    option: usize,
    name: &'static str,
}

impl fmt::Display for OptionField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            question,
            option,
            name,
        } = self;
        write!(f, "questions[{question}].options[{option}].{name}")
    }
}

/// Validates a whole `Ask` request. Every violation is reported at once, so a caller (or
/// a model) can fix them in one go; the intent is checked once the rest is valid.
/// Shortest interval of a reminder schedule (a non-zero `NotifyPolicy` field), so that
/// one tenant's pending asks cannot flood the sessions' events and its webhooks.
pub const MIN_NOTIFY_MS: u32 = 1000;

/// Whether one interval of a reminder schedule is allowed: none (0) or at least
/// [`MIN_NOTIFY_MS`].
pub fn notify_interval_allowed(ms: u32) -> bool {
    ms == 0 || ms >= MIN_NOTIFY_MS
}

/// An ask's reminder schedule: every non-zero interval at least [`MIN_NOTIFY_MS`].
pub fn notify_violations(notify: &NotifyPolicy) -> Vec<Violation> {
    [
        ("notify.remind_after_ms", notify.remind_after_ms),
        ("notify.remind_every_ms", notify.remind_every_ms),
        ("notify.escalate_after_ms", notify.escalate_after_ms),
    ]
    .into_iter()
    .filter(|(_, ms)| !notify_interval_allowed(*ms))
    .map(|(field, _)| {
        Violation::new(
            field,
            format!("must be 0 (none) or at least {MIN_NOTIFY_MS}"),
        )
    })
    .collect()
}

/// A labels map (an ask's, or a webhook endpoint's filter): at most `max_labels`
/// entries, keys and values within their sizes.
pub fn labels(labels: &HashMap<String, String>, limits: &Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    if labels.len() > limits.max_labels {
        violations.push(Violation::new(
            "labels",
            format!("at most {} labels", limits.max_labels),
        ));
    }
    for (key, value) in labels {
        let field = format_args!("labels[{}]", echo(key));
        violations.extend(too_long(field, key, limits.max_label_bytes));
        violations.extend(too_long(field, value, limits.max_text_bytes));
    }
    violations
}

pub fn ask(request: &AskRequest, limits: &Limits) -> Result<(), Error> {
    let mut violations = Vec::new();
    violations.extend(session_id_violation("session_id", &request.session_id));
    if request.questions.is_empty() {
        return match violations.is_empty() {
            true => Err(Error::EmptyQuestions),
            false => Err(Error::BadRequest(violations)),
        };
    }
    if request.questions.len() > limits.max_questions {
        violations.push(Violation::new(
            "questions",
            format!("at most {} questions per ask", limits.max_questions),
        ));
    }
    let mut ids = Seen::for_list(request.questions.len(), limits.max_questions);
    for (i, question) in request.questions.iter().enumerate() {
        question_violations(i, question, limits, &mut violations);
        let earlier = request.questions[..i].iter().map(|q| q.id.as_str());
        if !question.id.trim().is_empty() && ids.repeated(earlier, &question.id) {
            violations.push(Violation::new(
                format!("questions[{i}].id"),
                format!("duplicate question id {}", echo(&question.id)),
            ));
        }
    }
    if let Some(agent) = &request.agent {
        violations.extend(session_id_violation("agent.agent_id", &agent.agent_id));
        if agent.incarnation.is_empty() {
            violations.push(Violation::new(
                "agent.incarnation",
                "must not be empty: use the incarnation of the agent's Attach lease",
            ));
        }
        violations.extend(too_long(
            "agent.incarnation",
            &agent.incarnation,
            MAX_ID_BYTES,
        ));
    }
    violations.extend(too_long("request_id", &request.request_id, MAX_ID_BYTES));
    if request.reattach_grace_ms > MAX_REATTACH_GRACE_MS {
        violations.push(Violation::new(
            "reattach_grace_ms",
            format!("must be at most {MAX_REATTACH_GRACE_MS} (one hour)"),
        ));
    }
    if let Some(notify) = &request.notify {
        violations.extend(notify_violations(notify));
    }
    violations.extend(labels(&request.labels, limits));
    violations.extend(super::approval::violations(request, limits));
    if !violations.is_empty() {
        return Err(Error::BadRequest(violations));
    }
    for (i, question) in request.questions.iter().enumerate() {
        intent(i, question)?;
    }
    Ok(())
}

/// An id or a label: not empty, not whitespace only, and without leading or trailing
/// whitespace (`"a"` and `"a "` would otherwise be two labels that read alike).
fn name_violation(field: impl fmt::Display, name: &str) -> Option<Violation> {
    if name.trim().is_empty() {
        Some(Violation::new(field.to_string(), "must not be empty"))
    } else if name.trim() != name {
        Some(Violation::new(
            field.to_string(),
            "must not begin or end with whitespace",
        ))
    } else {
        None
    }
}

fn question_violations(i: usize, q: &Question, limits: &Limits, out: &mut Vec<Violation>) {
    let field = |name| QuestionField { question: i, name };
    out.extend(name_violation(field("id"), &q.id));
    out.extend(too_long(field("id"), &q.id, limits.max_label_bytes));
    if q.question.trim().is_empty() {
        out.push(Violation::new(
            field("question").to_string(),
            "must not be empty",
        ));
    }
    out.extend(too_long(
        field("question"),
        &q.question,
        limits.max_text_bytes,
    ));
    if let Some(header) = &q.header {
        out.extend(too_long(field("header"), header, limits.max_label_bytes));
    }
    if let Some(detail) = &q.detail {
        out.extend(too_long(field("detail"), detail, limits.max_detail_bytes));
    }
    if q.options.len() > limits.max_options {
        out.push(Violation::new(
            field("options").to_string(),
            format!("at most {} options per question", limits.max_options),
        ));
    }
    let mut labels = Seen::for_list(q.options.len(), limits.max_options);
    for (j, option) in q.options.iter().enumerate() {
        let field = |name| OptionField {
            question: i,
            option: j,
            name,
        };
        if let Some(violation) = name_violation(field("label"), &option.label) {
            out.push(violation);
        } else if labels.repeated(
            q.options[..j].iter().map(|o| o.label.as_str()),
            &option.label,
        ) {
            out.push(Violation::new(
                field("label").to_string(),
                format!("duplicate option label {}", echo(&option.label)),
            ));
        }
        out.extend(too_long(
            field("label"),
            &option.label,
            limits.max_label_bytes,
        ));
        if let Some(description) = &option.description {
            out.extend(too_long(
                field("description"),
                description,
                limits.max_text_bytes,
            ));
        }
    }
}

/// docs/protocol.md, Semantics 9: a plan review names one of the question's option labels as
/// the approval and carries the plan in `detail`.
fn intent(i: usize, q: &Question) -> Result<(), Error> {
    let Some(intent::Kind::PlanReview(review)) = q.intent.as_ref().and_then(|i| i.kind.as_ref())
    else {
        return Ok(());
    };
    if !q.options.iter().any(|o| o.label == review.approve) {
        return Err(Error::BadIntent(Violation::new(
            format!("questions[{i}].intent.plan_review.approve"),
            format!(
                "{} is not an option label of this question; approve must name one",
                echo(&review.approve)
            ),
        )));
    }
    if q.detail.as_deref().is_none_or(|d| d.trim().is_empty()) {
        return Err(Error::BadIntent(Violation::new(
            format!("questions[{i}].detail"),
            "a plan review needs the plan in detail",
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{AgentRef, Intent, PlanReview, QuestionOption};

    use super::*;

    fn question(id: &str, labels: &[&str]) -> Question {
        Question {
            id: id.into(),
            question: format!("question {id}?"),
            options: labels
                .iter()
                .map(|l| QuestionOption {
                    label: (*l).into(),
                    description: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn request(questions: Vec<Question>) -> AskRequest {
        AskRequest {
            session_id: "s-1".into(),
            questions,
            ..Default::default()
        }
    }

    fn fields(err: Error) -> Vec<String> {
        err.violations().iter().map(|v| v.field.clone()).collect()
    }

    fn check(req: &AskRequest) -> Result<(), Error> {
        ask(req, &Limits::default())
    }

    #[test]
    fn a_valid_request_passes() {
        let req = request(vec![question("a", &["yes", "no"]), question("b", &[])]);
        assert_eq!(check(&req), Ok(()));
    }

    #[test]
    fn session_ids_allow_the_documented_alphabet_only() {
        for ok in ["a", "A.b_c:d@e/f-9", &"x".repeat(128)] {
            assert_eq!(session_id("session_id", ok), Ok(()), "{ok}");
        }
        for bad in ["", "has space", "ünï", "a#b", &"x".repeat(129)] {
            let err = session_id("session_id", bad).expect_err(bad);
            assert_eq!(err.reason(), "BAD_REQUEST", "{bad}");
            assert_eq!(fields(err), ["session_id"]);
        }
    }

    #[test]
    fn tenant_names_allow_the_documented_alphabet_only() {
        for ok in ["acme", "A.b_c-9", &"t".repeat(64)] {
            assert_eq!(tenant_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "acme/x", "a{b}", "a b", "a:b", "ä", &"t".repeat(65)] {
            assert!(tenant_name(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn no_questions_is_empty_questions() {
        assert_eq!(check(&request(vec![])), Err(Error::EmptyQuestions));
    }

    #[test]
    fn a_bad_session_id_wins_over_empty_questions() {
        let mut req = request(vec![]);
        req.session_id = String::new();
        assert_eq!(fields(check(&req).expect_err("invalid")), ["session_id"]);
    }

    #[test]
    fn every_violation_is_named_by_field() {
        let mut dup_label = question("b", &["x", "x"]);
        dup_label.question = "  ".into();
        let req = request(vec![question("", &[""]), dup_label, question("b", &[])]);
        let err = check(&req).expect_err("invalid");
        assert_eq!(err.reason(), "BAD_REQUEST");
        assert_eq!(
            fields(err),
            [
                "questions[0].id",
                "questions[0].options[0].label",
                "questions[1].question",
                "questions[1].options[1].label",
                "questions[2].id",
            ]
        );
    }

    #[test]
    fn ids_and_labels_with_surrounding_whitespace_are_refused() {
        for bad in [" ", "\t", " a", "a ", "a\n"] {
            let req = request(vec![question(bad, &["ok"])]);
            assert_eq!(
                fields(check(&req).expect_err(bad)),
                ["questions[0].id"],
                "{bad:?}"
            );
            let req = request(vec![question("q", &["a", bad])]);
            assert_eq!(
                fields(check(&req).expect_err(bad)),
                ["questions[0].options[1].label"],
                "{bad:?}"
            );
        }
        // Inner whitespace is part of the name.
        assert_eq!(check(&request(vec![question("a b", &["x y"])])), Ok(()));
    }

    #[test]
    fn sizes_are_bounded() {
        let limits = Limits::default();
        let many = (0..=limits.max_questions)
            .map(|i| question(&i.to_string(), &[]))
            .collect();
        assert_eq!(
            fields(check(&request(many)).expect_err("too many")),
            ["questions"]
        );

        let labels: Vec<String> = (0..=limits.max_options).map(|i| i.to_string()).collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let err = check(&request(vec![question("a", &labels)])).expect_err("options");
        assert_eq!(fields(err), ["questions[0].options"]);

        let mut long = question("a", &[]);
        long.question = "q".repeat(limits.max_text_bytes + 1);
        long.detail = Some("d".repeat(limits.max_detail_bytes + 1));
        let err = check(&request(vec![long])).expect_err("long");
        assert_eq!(
            fields(err),
            ["questions[0].question", "questions[0].detail"]
        );

        let mut req = request(vec![question("a", &[])]);
        req.request_id = "r".repeat(MAX_ID_BYTES + 1);
        req.agent = Some(AgentRef::default());
        assert_eq!(
            fields(check(&req).expect_err("ids")),
            ["agent.agent_id", "agent.incarnation", "request_id"]
        );
    }

    #[test]
    fn repeats_are_named_in_lists_within_and_past_their_limits() {
        let limits = Limits::default();
        for count in [3, limits.max_options + 8] {
            let mut labels: Vec<String> = (0..count).map(|i| format!("o{i}")).collect();
            labels[count - 1] = "o1".into();
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            let mut questions: Vec<Question> = (0..count.min(limits.max_questions + 8))
                .map(|i| question(&format!("q{i}"), &[]))
                .collect();
            questions[0] = question("q0", &labels);
            let last = questions.len() - 1;
            questions[last].id = "q0".into();
            let fields = fields(check(&request(questions)).expect_err("repeats"));
            let repeats: Vec<&String> = fields
                .iter()
                .filter(|f| f.ends_with(".label") || f.ends_with(".id"))
                .collect();
            assert_eq!(
                repeats,
                [
                    &format!("questions[0].options[{}].label", count - 1),
                    &format!("questions[{last}].id"),
                ],
                "{count} options"
            );
        }
    }

    fn plan_review(approve: &str, detail: Option<&str>) -> Question {
        let mut q = question("plan", &["Approve", "Revise"]);
        q.detail = detail.map(str::to_owned);
        q.intent = Some(Intent {
            kind: Some(intent::Kind::PlanReview(PlanReview {
                approve: approve.into(),
            })),
        });
        q
    }

    #[test]
    fn plan_review_needs_an_approve_label_and_a_detail() {
        assert_eq!(
            check(&request(vec![plan_review("Approve", Some("1. do it"))])),
            Ok(())
        );
        let err = check(&request(vec![plan_review("Ship it", Some("plan"))])).expect_err("label");
        assert_eq!(err.reason(), "BAD_INTENT");
        assert_eq!(fields(err), ["questions[0].intent.plan_review.approve"]);
        for detail in [None, Some(" ")] {
            let err = check(&request(vec![plan_review("Approve", detail)])).expect_err("detail");
            assert_eq!(err.reason(), "BAD_INTENT");
            assert_eq!(fields(err), ["questions[0].detail"]);
        }
    }

    #[test]
    fn an_empty_intent_is_no_intent() {
        let mut q = question("a", &[]);
        q.intent = Some(Intent::default());
        assert_eq!(check(&request(vec![q])), Ok(()));
    }
}
