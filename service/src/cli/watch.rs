//! `askgate watch` (events as JSON lines) and `askgate pending` (pending asks as JSON).

use std::process::ExitCode;

use askgate_proto::v1::ListPendingResponse;
use clap::Args;
use tokio_stream::StreamExt;

use super::common::{ConnectArgs, ScopeArgs, fail, fail_local, shutdown_signal};
use super::json;

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Resume after this cursor.
    #[arg(long)]
    pub after: Option<String>,
    /// Hold the session as its exclusive subscriber.
    #[arg(long)]
    pub exclusive: bool,
}

/// Prints each event as one line of JSON (a `SubscribeResponse`) until the server ends
/// the stream or the process is interrupted.
pub async fn run_watch(args: WatchArgs) -> ExitCode {
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let request = args
        .scope
        .request(args.after.clone().unwrap_or_default(), args.exclusive);
    let mut events = match client.subscribe_raw(request).await {
        Ok(events) => events,
        Err(e) => return fail(&e),
    };
    let follow = async {
        while let Some(message) = events.next().await {
            match message {
                Ok(message) => match json::to_json("askgate.v1.SubscribeResponse", &message) {
                    Ok(line) => println!("{line}"),
                    Err(e) => return fail_local(format!("{e:#}"), 1),
                },
                Err(status) => return fail(&status.into()),
            }
        }
        ExitCode::SUCCESS
    };
    tokio::select! {
        code = follow => code,
        () = shutdown_signal() => ExitCode::SUCCESS,
    }
}

#[derive(Debug, Clone, Args)]
pub struct PendingArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Session to list.
    #[arg(long, env = "ASKGATE_SESSION")]
    pub session: String,
}

pub async fn run_pending(args: PendingArgs) -> ExitCode {
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    match client.list_pending(&args.session).await {
        Ok(pending) => {
            match json::to_json(
                "askgate.v1.ListPendingResponse",
                &ListPendingResponse { pending },
            ) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail_local(format!("{e:#}"), 1),
            }
        }
        Err(e) => fail(&e),
    }
}
