//! `askgate ntfy`: a tenant's ntfy topics (the `Ntfy` service, admin role). A topic's
//! access token is read from a file, never from the command line. Each command prints
//! its result as one line of JSON.

use std::{path::PathBuf, process::ExitCode};

use askgate_proto::v1::{ConnectNtfyRequest, ListNtfyTopicsResponse};
use clap::{Args, Subcommand};

use super::{
    common::{ConnectArgs, FilterArgs, fail},
    json,
    slack::read_secret,
    webhooks::ConnectOnly,
};

#[derive(Debug, Clone, Subcommand)]
pub enum NtfyCommand {
    /// Connect an ntfy topic: its questions are pushed to phones, with actions to
    /// answer them. The server needs --public-url and --secret-key-file.
    Connect(ConnectTopicArgs),
    /// List the tenant's ntfy topics.
    List(ConnectOnly),
    /// Disconnect an ntfy topic.
    Disconnect(TopicIdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ConnectTopicArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The ntfy server (`https://ntfy.sh` or your own).
    #[arg(long, default_value = "https://ntfy.sh")]
    pub server_url: String,
    /// The topic (`A-Z a-z 0-9 _ -`, at most 64): on a public server, one nobody
    /// guesses.
    #[arg(long)]
    pub topic: String,
    /// File holding an access token (`tk_…`) for a protected topic (`--token-file`
    /// is askgate's own credential).
    #[arg(long, env = "ASKGATE_NTFY_TOKEN_FILE")]
    pub ntfy_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct TopicIdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The topic's id (`nt_…`).
    pub id: String,
}

pub async fn run(command: NtfyCommand) -> ExitCode {
    let connect = match &command {
        NtfyCommand::Connect(args) => &args.connect,
        NtfyCommand::List(args) => &args.connect,
        NtfyCommand::Disconnect(args) => &args.connect,
    };
    let request = match &command {
        NtfyCommand::Connect(args) => {
            let token = match &args.ntfy_token_file {
                Some(path) => match read_secret(path, "--ntfy-token-file") {
                    Ok(token) => Some(token.trim().to_owned()),
                    Err(code) => return code,
                },
                None => None,
            };
            Some(ConnectNtfyRequest {
                server_url: args.server_url.clone(),
                topic: args.topic.clone(),
                token,
                labels: args.filter.labels.iter().cloned().collect(),
                session_prefix: args.filter.session_prefix.clone(),
                description: args.filter.description.clone(),
                provides: args.filter.provides,
            })
        }
        _ => None,
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match (&command, request) {
        (NtfyCommand::Disconnect(args), _) => client.disconnect_ntfy(&args.id).await.map(|()| None),
        (_, Some(request)) => client
            .connect_ntfy(request)
            .await
            .map(|topic| Some(json::print("askgate.v1.NtfyTopic", &topic))),
        (_, None) => client.list_ntfy_topics().await.map(|topics| {
            Some(json::print(
                "askgate.v1.ListNtfyTopicsResponse",
                &ListNtfyTopicsResponse { topics },
            ))
        }),
    };
    match result {
        Ok(printed) => printed.unwrap_or(ExitCode::SUCCESS),
        Err(e) => fail(&e),
    }
}
