//! `askgate slack`: a tenant's Slack apps (the `Slack` service, admin role). The bot
//! token and signing secret are read from files or the environment, never from the
//! command line (which every process listing shows). Each command prints its result as
//! one line of JSON.

use std::{path::PathBuf, process::ExitCode};

use askgate_proto::v1::{ConnectSlackRequest, ListSlackAppsResponse};
use clap::{Args, Subcommand};

use super::{
    common::{ConnectArgs, FilterArgs, fail, fail_local},
    json,
    webhooks::ConnectOnly,
};
use askgate_server::auth::secret;

#[derive(Debug, Clone, Subcommand)]
pub enum SlackCommand {
    /// Connect a Slack app: its questions go to a channel, answered there.
    Connect(ConnectAppArgs),
    /// List the tenant's Slack apps.
    List(ConnectOnly),
    /// Disconnect a Slack app.
    Disconnect(IdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ConnectAppArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// File holding the app's bot token (`xoxb-…`; OAuth & Permissions).
    #[arg(long, env = "ASKGATE_SLACK_BOT_TOKEN_FILE")]
    pub bot_token_file: PathBuf,
    /// File holding the app's signing secret (Basic Information → App Credentials).
    #[arg(long, env = "ASKGATE_SLACK_SIGNING_SECRET_FILE")]
    pub signing_secret_file: PathBuf,
    /// The channel's id (C0123456789), with the app invited to it.
    #[arg(long)]
    pub channel: String,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct IdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The app's id (`sl_…`).
    pub id: String,
}

/// A secret file's contents as text (its warning, if others may read it, to stderr).
pub(super) fn read_secret(path: &std::path::Path, what: &str) -> Result<String, ExitCode> {
    let (bytes, warning) =
        secret::read_file(path).map_err(|e| fail_local(format!("{what}: {e:#}"), 2))?;
    if let Some(warning) = warning {
        eprintln!("warning: {warning}");
    }
    String::from_utf8(bytes).map_err(|_| fail_local(format!("{what} is not text"), 2))
}

/// The connect request of `args`, its secrets read from their files.
fn connect_request(args: &ConnectAppArgs) -> Result<ConnectSlackRequest, ExitCode> {
    Ok(ConnectSlackRequest {
        bot_token: read_secret(&args.bot_token_file, "--bot-token-file")?,
        signing_secret: read_secret(&args.signing_secret_file, "--signing-secret-file")?,
        channel: args.channel.clone(),
        labels: args.filter.labels.iter().cloned().collect(),
        session_prefix: args.filter.session_prefix.clone(),
        description: args.filter.description.clone(),
        provides: args.filter.provides,
    })
}

pub async fn run(command: SlackCommand) -> ExitCode {
    let (connect, request) = match &command {
        SlackCommand::Connect(args) => match connect_request(args) {
            Ok(request) => (&args.connect, Some(request)),
            Err(code) => return code,
        },
        SlackCommand::List(args) => (&args.connect, None),
        SlackCommand::Disconnect(args) => (&args.connect, None),
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match (&command, request) {
        (SlackCommand::Disconnect(args), _) => {
            client.disconnect_slack(&args.id).await.map(|()| None)
        }
        (_, Some(request)) => client
            .connect_slack(request)
            .await
            .map(|app| Some(json::print("askgate.v1.SlackApp", &app))),
        (_, None) => client.list_slack_apps().await.map(|apps| {
            Some(json::print(
                "askgate.v1.ListSlackAppsResponse",
                &ListSlackAppsResponse { apps },
            ))
        }),
    };
    match result {
        Ok(printed) => printed.unwrap_or(ExitCode::SUCCESS),
        Err(e) => fail(&e),
    }
}
