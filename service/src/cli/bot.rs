//! `askgate bot`: resolves every question of a session (or of all sessions) by a fixed
//! policy. It makes demos and load tests work without a human, and reconnects (resuming
//! from its last cursor) when the server goes away.

use std::{pin::pin, process::ExitCode, time::Duration};

use askgate_client::{Client, Event, Reason, answer};
use askgate_proto::v1::{QuestionAnswer, Requested};
use clap::{Args, ValueEnum};
use tokio_stream::StreamExt;
use tracing::{debug, warn};

use super::{ConnectArgs, EXIT_USAGE, ScopeArgs, fail_local, parse_duration, shutdown_signal};

/// First and longest pause between reconnection attempts.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

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
    let mut shutdown = pin!(shutdown_signal());
    let mut after = String::new();
    let mut pause = RECONNECT_MIN;
    loop {
        let serve = serve_until_disconnected(&args, &mut after);
        tokio::select! {
            () = &mut shutdown => return ExitCode::SUCCESS,
            served = serve => match served {
                Ok(()) => pause = RECONNECT_MIN,
                Err(e) => warn!("bot disconnected: {e}"),
            },
        }
        tokio::select! {
            () = &mut shutdown => return ExitCode::SUCCESS,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(RECONNECT_MAX);
    }
}

/// Subscribes and resolves batches until the stream ends. `after` tracks the last
/// cursor of a single-session subscription, so a reconnect resumes where it left off.
async fn serve_until_disconnected(
    args: &BotArgs,
    after: &mut String,
) -> Result<(), askgate_client::Error> {
    let mut client = args.connect.connect().await?;
    let mut events = client
        .subscribe(args.scope.request(after.clone(), false))
        .await?;
    while let Some(event) = events.next().await {
        match event? {
            Event::Requested { cursor, requested } => {
                *after = cursor;
                tokio::spawn(resolve(client.clone(), args.clone(), requested));
            }
            Event::Resolved { cursor, .. } | Event::Synced { cursor, .. } => *after = cursor,
            Event::Reset => {}
        }
        if args.scope.all_sessions {
            after.clear();
        }
    }
    Ok(())
}

async fn resolve(mut client: Client, args: BotArgs, requested: Requested) {
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
