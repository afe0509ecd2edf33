//! `askgate bot`: resolves every question of a session (or of all sessions) by a fixed
//! policy. It makes demos and load tests work without a human, and reconnects (resuming
//! from its last cursor) when the server goes away.

use std::{process::ExitCode, time::Duration};

use askgate_client::{Client, Event, Reason, answer};
use askgate_proto::v1::{QuestionAnswer, Requested};
use clap::{Args, ValueEnum};
use tokio_stream::StreamExt;
use tracing::{debug, warn};

use super::common::{
    ConnectArgs, EXIT_USAGE, ScopeArgs, fail, fail_local, parse_duration, shutdown_signal,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// Choose the first option of every question (optionless ones get --text, or a skip).
    First,
    /// Skip every question.
    Skip,
    /// Cancel every batch (with --reason).
    Cancel,
    /// Answer every question with --text.
    Custom,
}

#[derive(Debug, Clone, Args)]
pub struct BotArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// How to resolve each batch.
    #[arg(long, value_enum, default_value = "first")]
    pub policy: Policy,
    /// Free text for `custom` (and for optionless questions under `first`).
    #[arg(long, required_if_eq("policy", "custom"))]
    pub text: Option<String>,
    /// Reason sent with `cancel`.
    #[arg(long, default_value = "cancelled by askgate bot")]
    pub reason: String,
    /// Wait this long before resolving each batch.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub delay: Duration,
    /// Print one JSON line per resolved batch.
    #[arg(long)]
    pub verbose: bool,
    /// Answer tool permission asks (`askgate hook claude-code`'s "Allow Claude to use
    /// …?") by the policy too. Without it the bot leaves them to a human: under
    /// `first` it would approve every tool call.
    #[arg(long)]
    pub approve_permissions: bool,
}

impl BotArgs {
    fn answers(&self, requested: &Requested) -> Vec<QuestionAnswer> {
        requested
            .questions
            .iter()
            .map(|q| match (self.policy, q.options.first(), &self.text) {
                (Policy::Custom, _, Some(text)) => answer::custom(&q.id, text),
                (Policy::First, Some(first), _) => answer::select(&q.id, [first.label.as_str()]),
                (Policy::First, None, Some(text)) => answer::custom(&q.id, text),
                _ => answer::skip(&q.id),
            })
            .collect()
    }
}

pub async fn run(args: BotArgs) -> ExitCode {
    if args.policy == Policy::Custom && args.text.as_deref().is_none_or(str::is_empty) {
        return fail_local("--policy custom needs --text", EXIT_USAGE);
    }
    // Lazily connected: the bot may start before the server and waits for it.
    let client = match args
        .connect
        .connect_lazy()
        .and_then(|c| c.with_channel("bot"))
    {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    // follow() reconnects with backoff and resumes from its last cursor on its own.
    let mut events = client.follow(args.scope.request(String::new(), false));
    let serve = async {
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Requested { requested, .. }) => {
                    tokio::spawn(resolve(client.clone(), args.clone(), requested));
                }
                Ok(_) => {}
                Err(e) => return fail(&e),
            }
        }
        ExitCode::SUCCESS
    };
    tokio::select! {
        () = shutdown_signal() => ExitCode::SUCCESS,
        code = serve => code,
    }
}

async fn resolve(mut client: Client, args: BotArgs, requested: Requested) {
    let (key, value) = super::agent_hooks::PERMISSION_LABEL;
    let permission = requested.labels.get(key).is_some_and(|v| v == value);
    if permission && !args.approve_permissions {
        warn!(
            rpc_id = %requested.rpc_id,
            "a tool permission ask: left to a human (--approve-permissions to resolve it)"
        );
        return;
    }
    if !args.delay.is_zero() {
        tokio::time::sleep(args.delay).await;
    }
    let (session_id, rpc_id) = (&requested.session_id, &requested.rpc_id);
    let result = match args.policy {
        Policy::Cancel => client.cancel(session_id, rpc_id, &args.reason).await,
        _ => {
            client
                .answer(session_id, rpc_id, args.answers(&requested))
                .await
        }
    };
    match result {
        Ok(()) => {
            if args.verbose {
                let line = serde_json::json!({
                    "session_id": session_id,
                    "rpc_id": rpc_id,
                    "policy": format!("{:?}", args.policy).to_lowercase(),
                });
                println!("{line}");
            }
        }
        // Someone else (or the deadline) got there first.
        Err(e) if e.reason() == Reason::NotPending => debug!(%rpc_id, "already resolved"),
        Err(e) => warn!(%rpc_id, "failed to resolve: {e}"),
    }
}
