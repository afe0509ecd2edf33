//! The rules of approvals (docs/approvals.md): channels, actions, quorums, defaults
//! and secret questions, as an `Ask` may set them.

use std::borrow::Cow;

use askgate_proto::v1::{
    Approvers, AskRequest, EscalationStep, Question, QuestionAnswer, Requested,
};

use super::{
    Limits, Violation, bounded, echo,
    model::{CONSOLE_CHANNEL, MCP_CHANNEL, SERVER_CHANNEL},
};

/// Longest `Action.arguments_json`, in bytes.
pub const MAX_ACTION_ARGUMENTS_BYTES: usize = 64 * 1024;
/// Most entries of `allowed_channels`.
pub const MAX_ALLOWED_CHANNELS: usize = 16;
/// Longest channel name, in bytes.
pub const MAX_CHANNEL_BYTES: usize = 32;
/// Most subjects, and most groups, an ask's approvers may name.
pub const MAX_APPROVERS: usize = 32;
/// Longest approver subject or group, in bytes.
pub const MAX_APPROVER_BYTES: usize = 256;
/// Most escalation steps of one ask.
pub const MAX_ESCALATION_STEPS: usize = 8;
/// Most channel connections one escalation step notifies.
pub const MAX_NOTIFIED: usize = 8;
/// Longest channel connection id, in bytes.
pub const MAX_CONNECTION_ID_BYTES: usize = 64;
/// The quorum sizes an ask may ask for.
pub const QUORUM: std::ops::RangeInclusive<u32> = 2..=10;

/// The channels the server itself answers through besides the human channels (whose
/// names the channels' registry gives): a client cannot claim any of them through the
/// `askgate-channel` header.
pub const OWN_CHANNELS: [&str; 3] = [SERVER_CHANNEL, CONSOLE_CHANNEL, MCP_CHANNEL];

/// The prefix of the subjects the server resolves as itself (`askgate:default`, ...):
/// no credential may name one.
pub const RESERVED_SUBJECT_PREFIX: &str = "askgate:";

/// Whether a credential may name `subject`: not empty, and not one the server keeps
/// for itself (`askgate:…`, in any case: subjects are compared as [`person`]s).
pub fn credential_subject(subject: &str) -> Result<(), String> {
    if subject.is_empty() {
        return Err("must not be empty".into());
    }
    let reserved = subject
        .get(..RESERVED_SUBJECT_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED_SUBJECT_PREFIX));
    match reserved {
        true => Err(format!(
            "{} begins with {RESERVED_SUBJECT_PREFIX}, which the server keeps for itself",
            echo(subject)
        )),
        false => Ok(()),
    }
}

/// The person a subject names, for counting approvers and telling an asker from an
/// approver: subjects compared without case (`alice` and `Alice` are one person), and
/// an email identity (`email:…`) by its address without a `+tag` (`ana+1@x.org` is
/// `ana@x.org`). Two subjects are one person when their keys are equal.
pub fn person(subject: &str) -> String {
    let lower = subject.to_lowercase();
    let Some(address) = lower.strip_prefix("email:") else {
        return lower;
    };
    match address.rsplit_once('@') {
        Some((local, domain)) => {
            let local = local.split_once('+').map_or(local, |(base, _)| base);
            format!("email:{local}@{domain}")
        }
        None => lower,
    }
}

/// Whether two subjects name one person ([`person`]).
pub fn same_person(a: &str, b: &str) -> bool {
    a == b || person(a) == person(b)
}

/// Whether `question_id` is one whose answer approves `requested`'s action: a UI offers
/// its options alone there (no own words, no skip), so that a human who approves does
/// so by choosing what they were shown.
pub fn approves_action(requested: &Requested, question_id: &str) -> bool {
    requested
        .action
        .as_ref()
        .is_some_and(|a| a.approving_answers.iter().any(|ans| ans.id == question_id))
}

/// Whether `channel` may resolve `requested` (answer or cancel it): one of its allowed
/// channels.
pub fn may_resolve(requested: &Requested, channel: &str) -> bool {
    requested.allowed_channels.is_empty() || requested.allowed_channels.iter().any(|c| c == channel)
}

/// Whether `channel` may answer `requested`: it may resolve it, and, when the ask holds
/// a secret question, it is not a chat (`chat`: a channel that shows an ask to
/// whoever reads the chat, mailbox or phone; such an ask links to the console instead).
pub fn may_answer(requested: &Requested, channel: &str, chat: bool) -> bool {
    may_resolve(requested, channel) && !(chat && has_secret(&requested.questions))
}

/// Whether `requested` names approvers now or at any of its escalation steps: who
/// answers it must then be told apart by person.
pub fn names_approvers(requested: &Requested) -> bool {
    names_approvers_of(&requested.approvers, &requested.escalation)
}

/// [`names_approvers`], of an ask's approvers and escalation steps.
pub fn names_approvers_of(
    approvers: &Option<Box<Approvers>>,
    escalation: &[EscalationStep],
) -> bool {
    approvers.is_some()
        || escalation
            .iter()
            .any(|s| s.approvers.as_ref().is_some_and(named))
}

/// The escalation steps of `requested` whose time has come by `now_ms` (its
/// `requested_at` plus their `after_ms`), in order.
pub fn steps_due(requested: &Requested, now_ms: u64) -> impl Iterator<Item = &EscalationStep> {
    let asked_ms = requested.requested_at.map_or(u64::MAX, asked_ms);
    requested
        .escalation
        .iter()
        .take_while(move |s| asked_ms.saturating_add(s.after_ms) <= now_ms)
}

/// `requested_at` in ms since the epoch, rounded up: the time an ask's schedule
/// (reminders, escalation steps) counts from, so nothing comes before its time.
pub fn asked_ms(requested_at: impl TryInto<std::time::SystemTime>) -> u64 {
    requested_at
        .try_into()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| {
            u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
        })
}

/// Who may answer `requested` at `now_ms`: its approvers, widened or replaced by each
/// escalation step whose time has come (None: anyone who may answer the session).
pub fn approvers_at(requested: &Requested, now_ms: u64) -> Option<Cow<'_, Approvers>> {
    let mut current = requested.approvers.as_deref().map(Cow::Borrowed);
    for step in steps_due(requested, now_ms) {
        let Some(added) = step.approvers.as_ref().filter(|a| named(a)) else {
            continue;
        };
        current = match (current, step.replace) {
            (_, true) => Some(Cow::Borrowed(added)),
            // Nobody named: anyone may answer, and still may.
            (None, false) => None,
            (Some(base), false) => {
                let mut joined = base.into_owned();
                joined.subjects.extend(added.subjects.iter().cloned());
                joined.groups.extend(added.groups.iter().cloned());
                joined.cancel_too |= added.cancel_too;
                Some(Cow::Owned(joined))
            }
        };
    }
    current
}

/// Whether `approvers` name anyone.
fn named(approvers: &Approvers) -> bool {
    !approvers.subjects.is_empty() || !approvers.groups.is_empty()
}

/// Whether `approvers` name one of `identities` (as [`person`]s) or one of `groups`.
pub fn names(approvers: &Approvers, identities: &[&str], groups: &[String]) -> bool {
    approvers
        .subjects
        .iter()
        .any(|s| identities.iter().any(|i| same_person(s, i)))
        || approvers.groups.iter().any(|g| groups.contains(g))
}

/// Who may answer an ask, for people: "alice, bob or a member of ops". At most
/// [`MAX_WHO_BYTES`] bytes, cut with a count of the rest.
pub fn approvers_text(approvers: &Approvers) -> String {
    let mut names: Vec<String> = approvers
        .subjects
        .iter()
        .map(|s| bounded(s).to_string())
        .collect();
    names.extend(
        approvers
            .groups
            .iter()
            .map(|g| format!("a member of {}", bounded(g))),
    );
    let mut text = String::new();
    for (i, name) in names.iter().enumerate() {
        let glue = match i {
            0 => "",
            i if i + 1 == names.len() => " or ",
            _ => ", ",
        };
        if text.len() + glue.len() + name.len() > MAX_WHO_BYTES {
            text.push_str(&format!(" (and {} more)", names.len() - i));
            break;
        }
        text.push_str(glue);
        text.push_str(name);
    }
    text
}

/// Longest [`approvers_text`].
pub const MAX_WHO_BYTES: usize = 240;

/// Whether any of `questions` is secret.
pub fn has_secret(questions: &[Question]) -> bool {
    questions.iter().any(|q| q.secret)
}

/// `answers` apart: those to questions that are not secret, and those to secret ones.
pub fn split_secret(
    questions: &[Question],
    answers: Vec<QuestionAnswer>,
) -> (Vec<QuestionAnswer>, Vec<QuestionAnswer>) {
    answers
        .into_iter()
        .partition(|a| !questions.iter().any(|q| q.secret && q.id == a.id))
}

/// The answers again in the questions' order, the secret ones put back: what the
/// waiting call gets. `order` lists the questions' ids.
pub fn merge_secret(
    order: &[String],
    mut answers: Vec<QuestionAnswer>,
    secret: Vec<QuestionAnswer>,
) -> Vec<QuestionAnswer> {
    answers.extend(secret);
    answers.sort_by_key(|a| order.iter().position(|id| *id == a.id));
    answers
}

/// A channel name: 1-32 characters of `[a-z0-9._-]`.
pub fn channel_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_CHANNEL_BYTES {
        return Err(format!("must be 1-{MAX_CHANNEL_BYTES} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may only hold the characters [a-z0-9._-]".into());
    }
    Ok(())
}

/// The channel a client names in its `askgate-channel` header: a valid name that is
/// neither one of the server's own ([`OWN_CHANNELS`]) nor one of `human` (the human
/// channels' names, from their registry).
pub fn claimed_channel<'a>(
    name: &str,
    mut human: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    channel_name(name)?;
    if OWN_CHANNELS.contains(&name) || human.any(|h| h == name) {
        return Err(format!(
            "{} is one of the server's own channels; a client cannot claim it",
            echo(name)
        ));
    }
    Ok(())
}

/// The approving answers of an ask's action, normalised (`approving`: those the action
/// names, or the default the caller took): each selects options of a question that is
/// not secret, with no own words, so that a receipt's `approved` always means a
/// choice the human was shown. Errors name `action.approving_answers`.
pub fn approving_answers(
    questions: &[Question],
    approving: Vec<QuestionAnswer>,
    named: bool,
    limits: &Limits,
) -> Result<Vec<QuestionAnswer>, super::Error> {
    const FIELD: &str = "action.approving_answers";
    if approving.is_empty() {
        return Err(super::Error::bad_request(
            FIELD,
            "the first question has no options: name the answers that approve the action",
        ));
    }
    let normalized =
        super::answer::normalize_some(questions, approving, limits).map_err(|e| match e {
            super::Error::BadAnswer(violations) => super::Error::BadRequest(
                violations
                    .into_iter()
                    .map(|v| Violation::new(v.field.replacen("answers", FIELD, 1), v.description))
                    .collect(),
            ),
            other => other,
        })?;
    let mut violations = Vec::new();
    for (i, answer) in normalized.iter().enumerate() {
        let field = match named {
            true => format!("{FIELD}[{i}]"),
            false => FIELD.to_owned(),
        };
        let secret = questions.iter().any(|q| q.secret && q.id == answer.id);
        if secret {
            violations.push(Violation::new(
                &field,
                "a secret question cannot approve an action (its answer stays with the asker)",
            ));
        }
        if answer.selected.is_empty() || answer.custom.is_some() {
            violations.push(Violation::new(
                &field,
                "an approving answer selects options, without own words",
            ));
        }
    }
    match violations.is_empty() {
        true => Ok(normalized),
        false => Err(super::Error::BadRequest(violations)),
    }
}

/// What is wrong with the approval fields of an ask (the default answers are checked
/// against the questions by the caller, as an answer batch is).
pub fn violations(request: &AskRequest, limits: &Limits) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(action) = &request.action {
        if action.name.trim().is_empty() {
            out.push(Violation::new("action.name", "must not be empty"));
        }
        if action.name.len() > limits.max_label_bytes {
            out.push(Violation::new(
                "action.name",
                format!("must be at most {} bytes", limits.max_label_bytes),
            ));
        }
        if action.arguments_json.len() > MAX_ACTION_ARGUMENTS_BYTES {
            out.push(Violation::new(
                "action.arguments_json",
                format!("must be at most {MAX_ACTION_ARGUMENTS_BYTES} bytes"),
            ));
        } else if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&action.arguments_json)
        {
            out.push(Violation::new(
                "action.arguments_json",
                format!("must be a JSON text (e.g. {{}}): {e}"),
            ));
        }
    }
    let quorum = request.quorum.map(|q| q.count);
    if let Some(count) = quorum.filter(|c| !QUORUM.contains(c)) {
        out.push(Violation::new(
            "quorum.count",
            format!(
                "{count} is not a quorum: ask for {} to {} approvers",
                QUORUM.start(),
                QUORUM.end()
            ),
        ));
    }
    if request.allowed_channels.len() > MAX_ALLOWED_CHANNELS {
        out.push(Violation::new(
            "allowed_channels",
            format!("at most {MAX_ALLOWED_CHANNELS} channels"),
        ));
    }
    for (i, channel) in request.allowed_channels.iter().enumerate() {
        if let Err(e) = channel_name(channel) {
            out.push(Violation::new(format!("allowed_channels[{i}]"), e));
        }
    }
    if let Some(approvers) = &request.approvers {
        approver_violations("approvers", approvers, quorum, &mut out);
    }
    escalation_violations(&request.escalation, &mut out);
    for (i, question) in request.questions.iter().enumerate() {
        if !question.secret {
            continue;
        }
        if quorum.is_some() {
            out.push(Violation::new(
                format!("questions[{i}].secret"),
                "a quorum ask compares its approvers' answers; it cannot hold a secret question",
            ));
        }
        if request.default_answers.iter().any(|a| a.id == question.id) {
            out.push(Violation::new(
                format!("questions[{i}].secret"),
                "a secret question cannot have a default answer",
            ));
        }
    }
    out
}

/// What is wrong with an ask's approvers: too many, a name that is empty, too long,
/// holds control characters or is one of the server's own, `cancel_too` naming nobody,
/// or a quorum that the subjects named cannot meet (with no group to widen them).
fn approver_violations(
    at: &str,
    approvers: &Approvers,
    quorum: Option<u32>,
    out: &mut Vec<Violation>,
) {
    let (subjects, groups) = (format!("{at}.subjects"), format!("{at}.groups"));
    for (field, names) in [
        (subjects.as_str(), &approvers.subjects),
        (groups.as_str(), &approvers.groups),
    ] {
        if names.len() > MAX_APPROVERS {
            out.push(Violation::new(field, format!("at most {MAX_APPROVERS}")));
            continue;
        }
        for (i, name) in names.iter().enumerate() {
            let wrong = match name.len() {
                0 => Some("must not be empty".to_owned()),
                n if n > MAX_APPROVER_BYTES => {
                    Some(format!("must be at most {MAX_APPROVER_BYTES} bytes"))
                }
                _ if name.chars().any(char::is_control) => {
                    Some("must not hold control characters".to_owned())
                }
                _ if field == subjects => credential_subject(name).err(),
                _ => None,
            };
            if let Some(wrong) = wrong {
                out.push(Violation::new(format!("{field}[{i}]"), wrong));
            }
        }
    }
    let named = !approvers.subjects.is_empty() || !approvers.groups.is_empty();
    if approvers.cancel_too && !named {
        out.push(Violation::new(
            format!("{at}.cancel_too"),
            "name the approvers (subjects or groups) who alone may cancel",
        ));
    }
    if let Some(count) = quorum.filter(|_| named && approvers.groups.is_empty()) {
        let mut people: Vec<String> = approvers.subjects.iter().map(|s| person(s)).collect();
        people.sort_unstable();
        people.dedup();
        if people.len() < count as usize {
            out.push(Violation::new(
                "quorum.count",
                format!(
                    "a quorum of {count} needs {count} approvers, but approvers name {} people",
                    people.len()
                ),
            ));
        }
    }
}

/// What is wrong with an ask's escalation: too many steps, a time that is not after
/// the step before, a step that does nothing, a replace that names nobody, too many or
/// malformed connection ids, and their approvers as [`approver_violations`] says.
fn escalation_violations(steps: &[EscalationStep], out: &mut Vec<Violation>) {
    if steps.len() > MAX_ESCALATION_STEPS {
        out.push(Violation::new(
            "escalation",
            format!("at most {MAX_ESCALATION_STEPS} steps"),
        ));
        return;
    }
    let mut last = 0;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("escalation[{i}]");
        if step.after_ms <= last {
            out.push(Violation::new(
                format!("{at}.after_ms"),
                "must be after the step before (and after 0)",
            ));
        }
        last = step.after_ms;
        let names = step.approvers.as_ref().is_some_and(named);
        if let Some(approvers) = &step.approvers {
            approver_violations(&format!("{at}.approvers"), approvers, None, out);
        }
        if step.replace && !names {
            out.push(Violation::new(
                format!("{at}.replace"),
                "name the approvers who replace the ask's",
            ));
        }
        if !names && step.notify_channels.is_empty() {
            out.push(Violation::new(
                at.clone(),
                "a step names approvers or channel connections to notify",
            ));
        }
        if step.notify_channels.len() > MAX_NOTIFIED {
            out.push(Violation::new(
                format!("{at}.notify_channels"),
                format!("at most {MAX_NOTIFIED}"),
            ));
        }
        for (n, id) in step.notify_channels.iter().enumerate() {
            let ok = !id.is_empty()
                && id.len() <= MAX_CONNECTION_ID_BYTES
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok {
                out.push(Violation::new(
                    format!("{at}.notify_channels[{n}]"),
                    "a channel connection's id (e.g. sl_… or wh_…)",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
