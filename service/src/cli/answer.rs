//! `askgate answer`: without `--rpc-id`, the interactive overlay over every pending
//! batch of a session (or of all sessions); with it, answer or cancel that one ask from
//! flags or JSON.

use std::{io::IsTerminal, process::ExitCode};

use askgate_client::answer;
use askgate_proto::v1::{AnswerRequest, QuestionAnswer};
use clap::Args;

use super::common::{ConnectArgs, EXIT_USAGE, ScopeArgs, fail, fail_local, parse_pair};
use super::{json, overlay};

#[derive(Debug, Clone, Args)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// The ask to answer without the overlay (its rpc_id, from `watch` or `pending`).
    #[arg(long, conflicts_with = "all_sessions")]
    pub rpc_id: Option<String>,
    /// Overlay: hold the session as its exclusive provider; batches still pending when
    /// the overlay closes are cancelled.
    #[arg(long, conflicts_with_all = ["rpc_id", "all_sessions"])]
    pub exclusive: bool,
    /// Choose an option: `QUESTION_ID=LABEL`; repeat for several labels or questions.
    #[arg(long = "select", value_parser = parse_pair)]
    pub select: Vec<(String, String)>,
    /// Free-text answer: `QUESTION_ID=TEXT`.
    #[arg(long = "text", value_parser = parse_pair)]
    pub text: Vec<(String, String)>,
    /// Skip a question explicitly: `QUESTION_ID`.
    #[arg(long = "skip")]
    pub skip: Vec<String>,
    /// The answers as JSON: an AnswerRequest, or just its `answers` list; `-` for stdin.
    #[arg(long, conflicts_with_all = ["select", "text", "skip", "cancel"])]
    pub json: Option<String>,
    /// Cancel the whole batch instead of answering.
    #[arg(long, conflicts_with_all = ["select", "text", "skip"])]
    pub cancel: bool,
    /// Reason given to the agent with --cancel.
    #[arg(long, requires = "cancel", default_value = "")]
    pub reason: String,
}

impl AnswerArgs {
    /// The batch the flags describe, one entry per question id, in first-mention order.
    fn answers(&self) -> Result<Vec<QuestionAnswer>, String> {
        if let Some(path) = &self.json {
            let text = json::read_input(path).map_err(|e| format!("{e:#}"))?;
            let text = text.trim_start();
            // A bare list is shorthand for {"answers": [...]}.
            let wrapped;
            let text = if text.starts_with('[') {
                wrapped = format!("{{\"answers\":{text}}}");
                &wrapped
            } else {
                text
            };
            let request: AnswerRequest =
                json::from_json("askgate.v1.AnswerRequest", text).map_err(|e| format!("{e:#}"))?;
            return Ok(request.answers);
        }
        let answers = answers_of(&self.select, &self.text, &self.skip);
        if answers.is_empty() {
            return Err("give --select, --text or --skip per question, --json, or --cancel".into());
        }
        Ok(answers)
    }
}

pub async fn run(args: AnswerArgs) -> ExitCode {
    let Some(rpc_id) = args.rpc_id.clone() else {
        return interactive(args).await;
    };
    let session = args.scope.session.clone().unwrap_or_default();
    let answers = match args.cancel {
        true => Vec::new(),
        false => match args.answers() {
            Ok(answers) => answers,
            Err(e) => return fail_local(e, EXIT_USAGE),
        },
    };
    // The command line's own channel (docs/approvals.md, "Channels").
    let mut client = match args
        .connect
        .connect()
        .await
        .and_then(|c| c.with_channel("cli"))
    {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match args.cancel {
        true => client
            .cancel(&session, &rpc_id, &args.reason)
            .await
            .map(|()| format!("cancelled ask {rpc_id} in session {session}")),
        false => client
            .answer_counted(&session, &rpc_id, answers)
            .await
            .map(|response| match response.needed {
                0 => format!("answered ask {rpc_id} in session {session}"),
                needed => format!(
                    "recorded your vote on ask {rpc_id} in session {session}: {} of {needed} \
                     approvals; it resolves when {} more give the same answers",
                    response.votes,
                    needed.saturating_sub(response.votes)
                ),
            }),
    };
    match result {
        Ok(done) => {
            // Said on stderr: stdout stays for data, as with the other commands.
            eprintln!("askgate: {done}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The overlay over every pending batch of the scope.
async fn interactive(args: AnswerArgs) -> ExitCode {
    let given = !args.select.is_empty()
        || !args.text.is_empty()
        || !args.skip.is_empty()
        || args.json.is_some()
        || args.cancel;
    if given {
        return fail_local(
            "--select, --text, --skip, --json and --cancel answer one ask: give its --rpc-id",
            EXIT_USAGE,
        );
    }
    // The terminal's channel, keyboard overlay or line prompts alike.
    let client = match args
        .connect
        .connect()
        .await
        .and_then(|c| c.with_channel(overlay::OVERLAY_CHANNEL))
    {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let scope = match &args.scope.session {
        Some(session) => format!("session {session}"),
        None => "all sessions".to_owned(),
    };
    let request = args.scope.request(String::new(), args.exclusive);
    let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let ended = match terminal {
        true => overlay::run::run(client, request, scope)
            .await
            .map(|()| overlay::lines::Ended::Done),
        // Scripted: the same rules as line prompts.
        false => overlay::lines::run(client, request, scope).await,
    };
    match ended {
        Ok(overlay::lines::Ended::Done) => ExitCode::SUCCESS,
        Ok(overlay::lines::Ended::Unanswered(left)) => {
            let asks: Vec<String> = left
                .iter()
                .map(|(session, rpc_id)| format!("ask {rpc_id} in session {session}"))
                .collect();
            fail_local(
                format!(
                    "input ended with {} still unanswered: {}",
                    match asks.len() {
                        1 => "1 batch".to_owned(),
                        n => format!("{n} batches"),
                    },
                    asks.join(", ")
                ),
                1,
            )
        }
        // A refusal the service gave (DUPLICATE_PROVIDER...) exits as any other command.
        Err(e) => match e.downcast_ref::<askgate_client::Error>() {
            Some(refused) => fail(refused),
            None => fail_local(format!("{e:#}"), 1),
        },
    }
}

/// One answer per question id, in first-mention order, from `ID=LABEL` picks (repeat
/// an id for several labels), `ID=TEXT` free texts and skipped ids.
pub(super) fn answers_of(
    select: &[(String, String)],
    text: &[(String, String)],
    skip: &[String],
) -> Vec<QuestionAnswer> {
    let mut answers: Vec<QuestionAnswer> = Vec::new();
    let mut entry = |id: &str| -> usize {
        match answers.iter().position(|a| a.id == id) {
            Some(i) => i,
            None => {
                answers.push(answer::skip(id));
                answers.len() - 1
            }
        }
    };
    let mut picks = Vec::new();
    for (id, label) in select {
        picks.push((entry(id), Some(label), None));
    }
    for (id, text) in text {
        picks.push((entry(id), None, Some(text)));
    }
    for id in skip {
        entry(id);
    }
    for (i, label, text) in picks {
        if let Some(label) = label {
            answers[i].selected.push(label.clone());
        }
        if let Some(text) = text {
            answers[i].custom = Some(text.clone());
        }
    }
    answers
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: AnswerArgs,
    }

    fn answers(flags: &[&str]) -> Result<Vec<QuestionAnswer>, String> {
        let argv = ["answer", "--session", "s", "--rpc-id", "r"]
            .into_iter()
            .chain(flags.iter().copied());
        Wrapper::try_parse_from(argv)
            .expect("valid flags")
            .args
            .answers()
    }

    #[test]
    fn flags_build_one_entry_per_question() {
        let got = answers(&[
            "--select",
            "db=Postgres",
            "--skip",
            "notes",
            "--select",
            "db=Redis",
            "--text",
            "why=it is fast",
        ])
        .expect("answers");
        assert_eq!(
            got,
            vec![
                answer::select("db", ["Postgres", "Redis"]),
                answer::custom("why", "it is fast"),
                answer::skip("notes"),
            ]
        );
    }

    #[test]
    fn no_answer_flags_is_a_usage_error() {
        assert!(answers(&[]).is_err());
    }
}
