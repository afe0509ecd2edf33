//! `askgate hook claude-code`: a Claude Code hook command that lets a remote human
//! answer through askgate what Claude Code would ask at the keyboard.
//!
//! - `PreToolUse` on `AskUserQuestion`: the questions are asked through askgate; the
//!   human's answers go back to Claude as `permissionDecision: "allow"` with
//!   `updatedInput` = the tool's input plus `answers` (question text → the chosen
//!   labels joined with ", ", or the human's own words). A cancel is a `deny` whose
//!   reason reaches Claude.
//! - `PermissionRequest` (a tool approval, e.g. Bash): one single-select question
//!   ("Allow once" / "Deny"; the tool input is the action it approves, or its detail
//!   when it does not fit an action); the answer is the
//!   decision.
//! - A tool call the tenant's policy decides (docs/policy.md) is decided at once: an
//!   allowed one is allowed (its receipt names the policy), a denied one is a `deny`
//!   whose message is the policy's reason.
//! - When askgate cannot help (unreachable, nobody follows the session, no answer
//!   in time) the hook prints nothing and exits 0: Claude Code goes on with its own
//!   picker or permission dialog, and is never blocked for good.

use std::{io::Read as _, process::ExitCode, time::Duration};

use askgate_client::{
    Ask, Error, Reason,
    proto::{AskResponse, Question, QuestionAnswer, QuestionOption},
};
use clap::{Args, Subcommand};
use serde::Deserialize;
use serde_json::{Value, json};

use super::common::{ConnectArgs, EXIT_USAGE, fail_local, parse_duration};
use askgate_server::domain::{shown::head_and_tail, validate};

#[derive(Debug, Clone, Subcommand)]
pub enum HookCommand {
    /// A Claude Code hook (PreToolUse on AskUserQuestion, PermissionRequest): reads
    /// the hook's JSON on stdin, asks through askgate, prints the decision JSON.
    ClaudeCode(ClaudeCodeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ClaudeCodeArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The askgate session to ask in. Default: `claude-code/<the hook's session_id>`.
    #[arg(long, env = "ASKGATE_SESSION")]
    pub session: Option<String>,
    /// How long to wait for the human before letting Claude Code ask locally. Keep it
    /// below the hook's `timeout` in settings.json.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// What Claude Code sends a hook on stdin (the fields this hook reads).
#[derive(Debug, Deserialize)]
struct HookInput {
    #[serde(default)]
    session_id: String,
    hook_event_name: String,
    #[serde(default)]
    tool_name: String,
    #[serde(default)]
    tool_input: Value,
}

/// One question of `AskUserQuestion`'s input.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaudeQuestion {
    question: String,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    options: Vec<ClaudeOption>,
    #[serde(default)]
    multi_select: bool,
}

#[derive(Debug, Deserialize)]
struct ClaudeOption {
    label: String,
    #[serde(default)]
    description: Option<String>,
}

/// The label that marks a tool permission ask: `askgate bot` never approves one unless
/// told to (`--approve-permissions`).
pub const PERMISSION_LABEL: (&str, &str) = ("kind", "tool-permission");

/// The labels of the permission question.
const ALLOW_ONCE: &str = "Allow once";
const DENY: &str = "Deny";

/// What the hook tells Claude Code: a decision (printed as JSON), or nothing (Claude
/// Code goes on as if there were no hook).
#[derive(Debug, PartialEq)]
enum Decision {
    Print(Value),
    FallBack(String),
}

/// The largest hook input read (the server's default message limit).
const MAX_HOOK_INPUT_BYTES: u64 = 4 * 1024 * 1024;

pub async fn run(command: HookCommand) -> ExitCode {
    let HookCommand::ClaudeCode(args) = command;
    let mut stdin = String::new();
    // A hook input is a few KiB; anything past the server's message limit could not be
    // asked anyway, so reading stops there.
    let read = std::io::stdin()
        .take(MAX_HOOK_INPUT_BYTES + 1)
        .read_to_string(&mut stdin);
    if let Err(e) = read {
        return fail_local(format!("cannot read the hook input: {e}"), 1);
    }
    if stdin.len() as u64 > MAX_HOOK_INPUT_BYTES {
        return fail_local(
            format!("the hook input is over {MAX_HOOK_INPUT_BYTES} bytes"),
            1,
        );
    }
    let input: HookInput = match serde_json::from_str(&stdin) {
        Ok(input) => input,
        Err(e) => return fail_local(format!("the hook input is not Claude Code's JSON: {e}"), 1),
    };
    let session = match &args.session {
        Some(session) => session.clone(),
        None => format!("claude-code/{}", input.session_id),
    };
    if let Err(e) = validate::session_id("--session", &session) {
        return fail_local(e.to_string(), EXIT_USAGE);
    }
    let decision = decide(&args, &session, &input).await;
    match decision {
        Decision::Print(output) => {
            println!("{output}");
        }
        Decision::FallBack(why) => {
            eprintln!("askgate: {why}; Claude Code asks locally");
        }
    }
    ExitCode::SUCCESS
}

async fn decide(args: &ClaudeCodeArgs, session: &str, input: &HookInput) -> Decision {
    let Some(mut questions) = questions_of(input) else {
        return Decision::FallBack(format!(
            "nothing for askgate in {} on {}",
            input.hook_event_name, input.tool_name
        ));
    };
    let client = match args.connect.connect_lazy() {
        Ok(client) => client,
        Err(e) => return Decision::FallBack(e.message().to_owned()),
    };
    let mut ask = Ask::new(session)
        .timeout(args.timeout)
        .label("source", "claude-code")
        .label("tool", &input.tool_name)
        // A short retry budget: an unreachable askgate must not hold Claude up.
        .retry_for(Duration::from_secs(5));
    if input.hook_event_name == "PermissionRequest" {
        ask = ask.label(PERMISSION_LABEL.0, PERMISSION_LABEL.1);
        // The approval is bound to the tool call it approves (docs/approvals.md): its
        // receipt names the digest of this tool and input, when they fit an action (at
        // most 64 KiB, every number exact in a double).
        let arguments = input.tool_input.to_string();
        if arguments.len() <= askgate_server::domain::approval::MAX_ACTION_ARGUMENTS_BYTES
            && askgate_client::receipt::ijson::first_inexact_number(&arguments).is_none()
        {
            ask = ask.action(&input.tool_name, &arguments);
            // Every answering UI shows the action's arguments: the command once, not
            // again as the question's detail.
            for question in &mut questions {
                question.detail = None;
            }
        }
    }
    for question in questions {
        ask = ask.question(question);
    }
    let outcome = client.clone().ask(ask).await;
    decision_of(input, outcome)
}

/// The questions to ask for this hook event, or `None` when it is not one this hook
/// handles.
fn questions_of(input: &HookInput) -> Option<Vec<Question>> {
    match (input.hook_event_name.as_str(), input.tool_name.as_str()) {
        ("PreToolUse", "AskUserQuestion") => {
            let questions: Vec<ClaudeQuestion> =
                serde_json::from_value(input.tool_input.get("questions")?.clone()).ok()?;
            (!questions.is_empty()).then(|| {
                questions
                    .into_iter()
                    .enumerate()
                    .map(|(i, q)| Question {
                        id: format!("q{}", i + 1),
                        question: q.question,
                        header: q.header.filter(|h| !h.is_empty()),
                        options: q
                            .options
                            .into_iter()
                            .map(|o| QuestionOption {
                                label: o.label,
                                description: o.description.filter(|d| !d.is_empty()),
                            })
                            .collect(),
                        multi_select: q.multi_select,
                        ..Default::default()
                    })
                    .collect()
            })
        }
        ("PermissionRequest", tool) if !tool.is_empty() => {
            let detail = serde_json::to_string_pretty(&input.tool_input).unwrap_or_default();
            Some(vec![Question {
                id: "permission".into(),
                question: format!("Allow Claude to use {tool}?"),
                header: Some("Permission".into()),
                // The human sees the command's end even when it does not fit whole.
                detail: Some(head_and_tail(&detail, MAX_DETAIL_BYTES).into_owned()),
                options: [ALLOW_ONCE, DENY]
                    .iter()
                    .map(|label| QuestionOption {
                        label: (*label).into(),
                        description: None,
                    })
                    .collect(),
                ..Default::default()
            }])
        }
        _ => None,
    }
}

/// Most of a tool's input shown as a permission's detail: under the server's default
/// `--max-detail-bytes`, with room for the question around it.
const MAX_DETAIL_BYTES: usize = 60 * 1024;

fn decision_of(input: &HookInput, outcome: Result<AskResponse, Error>) -> Decision {
    let permission = input.hook_event_name == "PermissionRequest";
    match outcome {
        Ok(response) if permission => {
            let answer = response.answers.first();
            let allowed = answer.is_some_and(|a| a.selected.iter().any(|s| s == ALLOW_ONCE));
            let decision = if allowed {
                json!({"behavior": "allow"})
            } else {
                let message = answer.and_then(|a| a.custom.clone()).unwrap_or_else(|| {
                    format!("{} denied it through askgate", response.resolved_by)
                });
                json!({"behavior": "deny", "message": message})
            };
            Decision::Print(json!({
                "hookSpecificOutput": {
                    "hookEventName": "PermissionRequest",
                    "decision": decision,
                }
            }))
        }
        Ok(response) => {
            let mut updated = input.tool_input.clone();
            let answers = answers_by_question(&updated, &response.answers);
            if let Some(object) = updated.as_object_mut() {
                object.insert("answers".into(), answers);
            }
            Decision::Print(json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "allow",
                    "permissionDecisionReason": format!("answered by {} through askgate", response.resolved_by),
                    "updatedInput": updated,
                }
            }))
        }
        Err(error)
            if matches!(
                error.reason(),
                Reason::AskCancelled | Reason::DeniedByPolicy
            ) =>
        {
            let reason = match (error.reason(), error.metadata("reason")) {
                (Reason::DeniedByPolicy, reason) => format!(
                    "askgate's policy {} denies this: {}",
                    error.metadata("policy").unwrap_or_default(),
                    reason.unwrap_or("denied by policy")
                ),
                (_, Some(reason)) if !reason.is_empty() => {
                    format!("The user cancelled the question: {reason}")
                }
                _ => "The user cancelled the question".to_owned(),
            };
            Decision::Print(match permission {
                true => json!({
                    "hookSpecificOutput": {
                        "hookEventName": "PermissionRequest",
                        "decision": {"behavior": "deny", "message": reason},
                    }
                }),
                false => json!({
                    "hookSpecificOutput": {
                        "hookEventName": "PreToolUse",
                        "permissionDecision": "deny",
                        "permissionDecisionReason": reason,
                    }
                }),
            })
        }
        Err(error) => Decision::FallBack(format!("{}: {}", error.reason(), error.message())),
    }
}

/// `AskUserQuestion`'s `answers`: each question's text → the chosen labels joined with
/// ", " (a multi-select's own words after them), or the human's own words; a skipped
/// question is left out.
fn answers_by_question(tool_input: &Value, answers: &[QuestionAnswer]) -> Value {
    let texts: Vec<&str> = tool_input
        .get("questions")
        .and_then(Value::as_array)
        .map(|qs| {
            qs.iter()
                .map(|q| q.get("question").and_then(Value::as_str).unwrap_or(""))
                .collect()
        })
        .unwrap_or_default();
    let mut by_question = serde_json::Map::new();
    for answer in answers {
        let index = answer
            .id
            .strip_prefix('q')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        let Some(text) = index.and_then(|i| texts.get(i)) else {
            continue;
        };
        let mut parts: Vec<&str> = answer.selected.iter().map(String::as_str).collect();
        parts.extend(answer.custom.as_deref());
        if !parts.is_empty() {
            by_question.insert((*text).to_owned(), Value::String(parts.join(", ")));
        }
    }
    Value::Object(by_question)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(event: &str, tool: &str, tool_input: Value) -> HookInput {
        HookInput {
            session_id: "abc".into(),
            hook_event_name: event.into(),
            tool_name: tool.into(),
            tool_input,
        }
    }

    fn claude_questions() -> Value {
        json!({"questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": false,
             "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite"}]},
            {"question": "Which features?", "header": "Features", "multiSelect": true,
             "options": [{"label": "Auth"}, {"label": "Billing"}]}
        ]})
    }

    #[test]
    fn ask_user_question_maps_to_askgate_questions() {
        let questions = questions_of(&input("PreToolUse", "AskUserQuestion", claude_questions()))
            .expect("asked");
        assert_eq!(questions.len(), 2);
        assert_eq!(
            (questions[0].id.as_str(), questions[0].multi_select),
            ("q1", false)
        );
        assert_eq!(questions[1].options[1].label, "Billing");
        assert!(questions[1].multi_select);
        assert_eq!(questions_of(&input("PreToolUse", "Bash", json!({}))), None);
        assert_eq!(
            questions_of(&input(
                "PreToolUse",
                "AskUserQuestion",
                json!({"questions": []})
            )),
            None
        );
    }

    #[test]
    fn answers_are_keyed_by_question_text_and_joined() {
        let answers = [
            QuestionAnswer {
                id: "q1".into(),
                selected: vec![],
                custom: Some("DuckDB".into()),
            },
            QuestionAnswer {
                id: "q2".into(),
                selected: vec!["Auth".into(), "Billing".into()],
                custom: Some("SSO too".into()),
            },
        ];
        assert_eq!(
            answers_by_question(&claude_questions(), &answers),
            json!({"Which database?": "DuckDB", "Which features?": "Auth, Billing, SSO too"})
        );
        let skipped = [QuestionAnswer {
            id: "q1".into(),
            ..Default::default()
        }];
        assert_eq!(
            answers_by_question(&claude_questions(), &skipped),
            json!({})
        );
    }
}
