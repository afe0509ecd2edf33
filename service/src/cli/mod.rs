//! The `askgate` command line: `serve` runs the service; `ask`, `watch`, `pending`,
//! `answer` and `bot` are clients of its public gRPC API. Every flag is also an
//! `ASKGATE_*` environment variable.
//!
//! Exit codes (documented in docs/cli.md, "CLI"): 0 success; 1 any other failure;
//! 3 ASK_CANCELLED; 4 ASK_EXPIRED; 5 ASK_ABORTED; 6 invalid input; 7 refused
//! (NO_PROVIDER, DUPLICATE_PROVIDER, CALLER_NOT_LIVE, DELEGATED_CALLER, TOO_MANY_PENDING,
//! UNAUTHENTICATED, PERMISSION_DENIED); 8 NOT_PENDING; 9 unavailable (server draining or
//! unreachable); 64 invalid command line or configuration.

mod answer;
mod ask;
mod attach;
mod bench;
mod bot;
mod config;
mod credentials;
mod health;
mod hook;
mod json;
mod mcp;
pub mod overlay;
mod serve;
mod watch;

use std::{io::IsTerminal, path::PathBuf, process::ExitCode, time::Duration};

use askgate_client::{Client, ConnectOptions, Reason};
use askgate_proto::v1::SubscribeRequest;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use tonic::Code;
use tracing_subscriber::EnvFilter;

use crate::auth::secret::Secret;

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
    /// Run the service (in-memory backend).
    Serve(Box<ServeArgs>),
    /// Ask questions and wait for the answer; prints the answer as JSON.
    Ask(ask::AskArgs),
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
    Hook(hook::HookCommand),
    /// Mint an HS256 JWT (for tests and demos).
    Token(credentials::TokenArgs),
    /// Manage an API keys file.
    #[command(subcommand)]
    Keys(credentials::KeysCommand),
    /// Run a benchmark against `askgate serve` processes and print its figures.
    Bench(bench::BenchArgs),
    /// Check a node's health (grpc.health.v1): exit 0 when it is SERVING. For container
    /// HEALTHCHECKs and exec probes.
    Health(health::HealthArgs),
}

/// Where and how the client subcommands connect.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// askgate server address (`https://` for TLS).
    #[arg(long, env = "ASKGATE_ADDR", default_value = "http://127.0.0.1:50051")]
    pub addr: String,
    /// Bearer token: an API key or a JWT. Prefer --token-file or ASKGATE_TOKEN: a
    /// value on the command line shows in every process listing.
    #[arg(long, env = "ASKGATE_TOKEN", hide_env_values = true)]
    pub token: Option<Secret>,
    /// File holding the bearer token (trailing whitespace ignored; keep it mode 600).
    #[arg(long, env = "ASKGATE_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// CA certificate (PEM) to trust for the server (implies TLS).
    #[arg(long, env = "ASKGATE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM), for servers that require mTLS.
    #[arg(long, env = "ASKGATE_CERT", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Client private key (PEM).
    #[arg(long, env = "ASKGATE_KEY", requires = "cert")]
    pub key: Option<PathBuf>,
}

impl ConnectArgs {
    fn url(&self) -> String {
        match (self.addr.contains("://"), self.ca_file.is_some()) {
            (true, _) => self.addr.clone(),
            (false, true) => format!("https://{}", self.addr),
            (false, false) => format!("http://{}", self.addr),
        }
    }

    fn options(&self) -> Result<ConnectOptions, askgate_client::Error> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                askgate_client::Error::from(tonic::Status::invalid_argument(format!(
                    "failed to read {}: {e}",
                    path.display()
                )))
            })
        };
        let token = match (&self.token, &self.token_file) {
            (Some(token), _) => Some(token.expose().to_owned()),
            (None, Some(path)) => Some(read_token_file(path)?),
            (None, None) => None,
        };
        Ok(ConnectOptions {
            token,
            ca_pem: self.ca_file.as_ref().map(read).transpose()?,
            identity: match (&self.cert, &self.key) {
                (Some(cert), Some(key)) => {
                    if let Some(warning) = crate::auth::secret::loose_permissions(key) {
                        eprintln!("askgate: warning: {warning}");
                    }
                    Some((read(cert)?, read(key)?))
                }
                _ => None,
            },
        })
    }

    async fn connect(&self) -> Result<Client, askgate_client::Error> {
        Client::connect_with(self.url(), self.options()?).await
    }

    fn connect_lazy(&self) -> Result<Client, askgate_client::Error> {
        Client::connect_lazy_with(self.url(), self.options()?)
    }
}

/// The token in `path`, warning on stderr when others may read the file.
fn read_token_file(path: &std::path::Path) -> Result<String, askgate_client::Error> {
    let refuse = |why: String| askgate_client::Error::from(tonic::Status::invalid_argument(why));
    let (bytes, warning) =
        crate::auth::secret::read_file(path).map_err(|e| refuse(format!("--token-file: {e:#}")))?;
    if let Some(warning) = warning {
        eprintln!("askgate: warning: {warning}");
    }
    let token = String::from_utf8(bytes)
        .map_err(|_| refuse(format!("--token-file {}: not UTF-8", path.display())))?;
    if token.is_empty() {
        return Err(refuse(format!("--token-file {} is empty", path.display())));
    }
    Ok(token)
}

/// Which sessions a subscribing subcommand follows.
#[derive(Debug, Clone, Args)]
pub struct ScopeArgs {
    /// One session.
    #[arg(
        long,
        env = "ASKGATE_SESSION",
        required_unless_present = "all_sessions"
    )]
    pub session: Option<String>,
    /// Every session.
    #[arg(long, conflicts_with = "session")]
    pub all_sessions: bool,
}

impl ScopeArgs {
    /// A subscription to this scope, resuming after `after` when it is not empty.
    fn request(&self, after: String, exclusive: bool) -> SubscribeRequest {
        SubscribeRequest {
            session_id: self.session.clone().unwrap_or_default(),
            all_sessions: self.all_sessions,
            after,
            exclusive,
        }
    }
}

/// Exit code for invalid command lines and configuration (EX_USAGE).
pub const EXIT_USAGE: u8 = 64;

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
    match EnvFilter::try_new(filter) {
        Ok(filter) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .init(),
        Err(e) => {
            eprintln!("askgate: invalid --log filter {filter:?}: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("askgate: failed to start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Ask(args) => ask::run(args).await,
            Command::Watch(args) => watch::run_watch(args).await,
            Command::Pending(args) => watch::run_pending(args).await,
            Command::Answer(args) => answer::run(args).await,
            Command::Bot(args) => bot::run(args).await,
            Command::Attach(args) => attach::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Hook(command) => hook::run(command).await,
            Command::Token(args) => credentials::token(args),
            Command::Keys(command) => credentials::keys(command),
            Command::Bench(args) => bench::run(args).await,
            Command::Health(args) => health::run(args).await,
        }
    });
    // Don't wait for blocking stdin readers or lingering tasks.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// The exit code of a failed client call.
pub fn exit_code(error: &askgate_client::Error) -> u8 {
    match error.reason() {
        Reason::AskCancelled => 3,
        Reason::AskExpired => 4,
        Reason::AskAborted => 5,
        Reason::EmptyQuestions | Reason::BadRequest | Reason::BadIntent | Reason::BadAnswer => 6,
        Reason::NoProvider
        | Reason::DuplicateProvider
        | Reason::CallerNotLive
        | Reason::DelegatedCaller
        | Reason::TooManyPending
        | Reason::TooManySubscribers
        | Reason::TooManyAgents
        | Reason::TooManySessions
        | Reason::RateLimited
        | Reason::Unauthenticated
        | Reason::PermissionDenied => 7,
        Reason::NotPending => 8,
        Reason::ShuttingDown | Reason::BackendUnavailable => 9,
        _ if error.code() == Code::Unavailable => 9,
        _ => 1,
    }
}

/// Prints a failed call as one JSON object on stderr and returns its exit code.
fn fail(error: &askgate_client::Error) -> ExitCode {
    let mut metadata = serde_json::Map::new();
    for key in ["session_id", "rpc_id", "reason", "resolution"] {
        if let Some(value) = error.metadata(key) {
            metadata.insert(key.to_owned(), value.into());
        }
    }
    let violations: Vec<_> = error
        .violations()
        .iter()
        .map(|(field, description)| serde_json::json!({"field": field, "description": description}))
        .collect();
    let report = serde_json::json!({
        "error": {
            "reason": error.reason().as_str_name(),
            "code": format!("{:?}", error.code()),
            "message": error.message(),
            "metadata": metadata,
            "violations": violations,
        }
    });
    eprintln!("{report}");
    ExitCode::from(exit_code(error))
}

/// Reports a local failure (bad input file, I/O) and returns exit code 1, or 64 for
/// usage errors.
fn fail_local(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("askgate: {message}");
    ExitCode::from(code)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// Parses durations such as `250ms`, `30s`, `5m`, `1h`.
pub(crate) fn parse_duration(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|e| e.to_string())
}

/// Splits `KEY=VALUE`.
fn parse_pair(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {value:?}"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_and_pairs_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_pair("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_pair("nope").is_err());
    }
}
