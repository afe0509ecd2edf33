//! `askgate telegram`: a tenant's Telegram bots (the `Telegram` service, admin role).
//! The bot token is read from a file or the environment, never from the command line
//! (which every process listing shows). Each command prints its result as one line of
//! JSON.

use std::{path::PathBuf, process::ExitCode};

use askgate_proto::v1::{ConnectTelegramRequest, ListTelegramBotsResponse};
use clap::{Args, Subcommand};

use super::{
    common::{ConnectArgs, FilterArgs, fail},
    json,
    slack::read_secret,
    webhooks::ConnectOnly,
};

#[derive(Debug, Clone, Subcommand)]
pub enum TelegramCommand {
    /// Connect a Telegram bot: its questions go to a chat, answered there. The server
    /// needs --public-url (https) and --secret-key-file.
    Connect(ConnectBotArgs),
    /// List the tenant's Telegram bots.
    List(ConnectOnly),
    /// Disconnect a Telegram bot.
    Disconnect(BotIdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ConnectBotArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// File holding the bot's token (from @BotFather: `123456:ABC…`).
    #[arg(long, env = "ASKGATE_TELEGRAM_BOT_TOKEN_FILE")]
    pub bot_token_file: PathBuf,
    /// The chat to post to: its numeric id (-100… for a group) or @channelusername,
    /// with the bot a member of it.
    #[arg(long, allow_hyphen_values = true)]
    pub chat_id: String,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct BotIdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The bot's id (`tg_…`).
    pub id: String,
}

fn connect_request(args: &ConnectBotArgs) -> Result<ConnectTelegramRequest, ExitCode> {
    Ok(ConnectTelegramRequest {
        bot_token: read_secret(&args.bot_token_file, "--bot-token-file")?
            .trim()
            .to_owned(),
        chat_id: args.chat_id.clone(),
        labels: args.filter.labels.iter().cloned().collect(),
        session_prefix: args.filter.session_prefix.clone(),
        description: args.filter.description.clone(),
        provides: args.filter.provides,
    })
}

pub async fn run(command: TelegramCommand) -> ExitCode {
    let (connect, request) = match &command {
        TelegramCommand::Connect(args) => match connect_request(args) {
            Ok(request) => (&args.connect, Some(request)),
            Err(code) => return code,
        },
        TelegramCommand::List(args) => (&args.connect, None),
        TelegramCommand::Disconnect(args) => (&args.connect, None),
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match (&command, request) {
        (TelegramCommand::Disconnect(args), _) => {
            client.disconnect_telegram(&args.id).await.map(|()| None)
        }
        (_, Some(request)) => client
            .connect_telegram(request)
            .await
            .map(|bot| Some(json::print("askgate.v1.TelegramBot", &bot))),
        (_, None) => client.list_telegram_bots().await.map(|bots| {
            Some(json::print(
                "askgate.v1.ListTelegramBotsResponse",
                &ListTelegramBotsResponse { bots },
            ))
        }),
    };
    match result {
        Ok(printed) => printed.unwrap_or(ExitCode::SUCCESS),
        Err(e) => fail(&e),
    }
}
