//! The `askgate` command line: `serve` runs the service; `ask`, `watch`, `pending`,
//! `answer` and `bot` are clients of its public gRPC API. Every flag is also an
//! `ASKGATE_*` environment variable.
//!
//! Exit codes (documented in docs/cli.md, "CLI"): 0 success; 1 any other failure;
//! 3 ASK_CANCELLED; 4 ASK_EXPIRED; 5 ASK_ABORTED; 6 invalid input; 7 refused
//! (NO_PROVIDER, DUPLICATE_PROVIDER, CALLER_NOT_LIVE, DELEGATED_CALLER, TOO_MANY_PENDING,
//! TOO_MANY_WEBHOOKS, UNAUTHENTICATED, PERMISSION_DENIED); 8 NOT_PENDING, NOT_FOUND; 9
//! unavailable (server draining or
//! unreachable); 64 invalid command line or configuration.

mod agent_hooks;
mod answer;
mod ask;
mod attach;
mod audit;
mod backup;
mod bot;
mod common;
mod config;
mod credentials;
mod email;
mod health;
mod json;
mod log;
mod mcp;
mod ntfy;
pub mod overlay;
mod people;
mod policy;
mod receipt;
mod serve;
mod slack;
mod telegram;
mod watch;
mod webhooks;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use common::{ConnectArgs, EXIT_USAGE, ScopeArgs, exit_code, shutdown_signal};
pub use serve::ServeArgs;

/// askgate: AI agents ask humans structured questions over gRPC and wait for the answer.
#[derive(Debug, Parser)]
#[command(name = "askgate", version, about)]
pub struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info` or `askgate_service=debug`.
    #[arg(long, global = true, env = "ASKGATE_LOG")]
    pub log: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service (state in --data-dir by default; see --backend).
    Serve(Box<ServeArgs>),
    /// Copy a sqlite data directory's store while its node serves (a consistent
    /// copy, restorable with --data-dir).
    Backup(backup::BackupArgs),
    /// Ask questions and wait for the answer; prints the answer as JSON.
    Ask(Box<ask::AskArgs>),
    /// Follow a session (or all sessions) and print events as JSON lines.
    Watch(watch::WatchArgs),
    /// Print the pending asks of a session as JSON.
    Pending(watch::PendingArgs),
    /// Answer pending asks: a keyboard overlay over every pending batch, or (with
    /// --rpc-id) one ask from flags or JSON.
    Answer(answer::AnswerArgs),
    /// Resolve every question of a session (or of all sessions) by a fixed policy.
    Bot(bot::BotArgs),
    /// Hold an agent's liveness lease; prints the incarnation to ask with.
    Attach(attach::AttachArgs),
    /// An MCP server on stdio whose ask_user_question tool asks through askgate.
    Mcp(mcp::McpArgs),
    /// Agent hooks that ask through askgate (`askgate hook claude-code`).
    #[command(subcommand)]
    Hook(agent_hooks::HookCommand),
    /// Mint an HS256 JWT (for tests and demos).
    Token(credentials::TokenArgs),
    /// Manage an API keys file.
    #[command(subcommand)]
    Keys(credentials::KeysCommand),
    /// Manage the tenant's webhook endpoints and their deliveries (admin role).
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCommand),
    /// Connect the tenant's Slack apps: questions posted to a channel and answered
    /// there (admin role).
    #[command(subcommand)]
    Slack(slack::SlackCommand),
    /// Connect the tenant's Telegram bots: questions posted to a chat and answered
    /// there (admin role).
    #[command(subcommand)]
    Telegram(telegram::TelegramCommand),
    /// Connect the tenant's email routes: questions mailed, with signed links to
    /// answer them (admin role).
    #[command(subcommand)]
    Email(email::EmailCommand),
    /// Connect the tenant's ntfy topics: questions pushed to phones, with actions to
    /// answer them (admin role).
    #[command(subcommand)]
    Ntfy(ntfy::NtfyCommand),
    /// The tenant's people: the identities that count as one person on every channel,
    /// their groups, and who answers for them while they are away (admin role).
    #[command(subcommand)]
    People(people::PeopleCommand),
    /// The tenant's policy before asking: Cedar policies that allow, deny or route an
    /// action before anyone is asked (admin role).
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// The tenant's hash-chained audit log: export it, verify an export (admin role).
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Check receipts: what an executor runs before an approved action
    /// (docs/approvals.md).
    #[command(subcommand)]
    Receipt(receipt::ReceiptCommand),
    /// Check a node's health (grpc.health.v1): exit 0 when it is SERVING. For container
    /// HEALTHCHECKs and exec probes.
    Health(health::HealthArgs),
}

/// Parses `args`; for `serve --config FILE`, the file's settings fill in what the
/// command line and the environment leave unset.
pub fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let mut command = Cli::command();
    // Global flags (--log) become the subcommands' too, so a config file may set them.
    command.build();
    let matches = command.clone().try_get_matches_from(&args)?;
    if let Some(("serve", serve)) = matches.subcommand()
        && let Some(path) = serve.get_one::<PathBuf>("config")
    {
        let serve_command = command
            .find_subcommand("serve")
            .expect("askgate has a serve subcommand");
        let extra = config::file_args(path, serve_command, serve)
            .map_err(|e| Cli::command().error(clap::error::ErrorKind::InvalidValue, e))?;
        let mut args = args;
        args.extend(extra);
        let matches = command.try_get_matches_from(&args)?;
        return Cli::from_arg_matches(&matches);
    }
    Cli::from_arg_matches(&matches)
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.use_stderr() {
                true => ExitCode::from(EXIT_USAGE),
                false => ExitCode::SUCCESS,
            };
        }
    };
    let default_log = match cli.command {
        Command::Serve(_) => "info",
        _ => "warn",
    };
    let filter = cli.log.as_deref().unwrap_or(default_log);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("askgate: failed to start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let export = match &cli.command {
        Command::Serve(args) => args.trace_export(),
        _ => None,
    };
    // The exporter's connections live on the runtime.
    let traces = match runtime.block_on(async { log::init(filter, export.as_ref()) }) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("askgate: {e:#}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Backup(args) => backup::run(args).await,
            Command::Ask(args) => ask::run(*args).await,
            Command::Watch(args) => watch::run_watch(args).await,
            Command::Pending(args) => watch::run_pending(args).await,
            Command::Answer(args) => answer::run(args).await,
            Command::Bot(args) => bot::run(args).await,
            Command::Attach(args) => attach::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Hook(command) => agent_hooks::run(command).await,
            Command::Token(args) => credentials::token(args),
            Command::Keys(command) => credentials::keys(command),
            Command::Health(args) => health::run(args).await,
            Command::Webhooks(command) => webhooks::run(command).await,
            Command::Slack(command) => slack::run(command).await,
            Command::Telegram(command) => telegram::run(command).await,
            Command::Email(command) => email::run(command).await,
            Command::Ntfy(command) => ntfy::run(command).await,
            Command::People(command) => people::run(command).await,
            Command::Policy(command) => policy::run(command).await,
            Command::Receipt(command) => receipt::run(command).await,
            Command::Audit(command) => audit::run(command).await,
        }
    });
    if let Some(traces) = traces {
        traces.shutdown();
    }
    // Don't wait for blocking stdin readers or lingering tasks.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
