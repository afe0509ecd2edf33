//! What the subcommands share: how a client connects, the session scope flags, exit
//! codes and the reporting of failures, signals, and flag value parsers.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use askgate_client::{Client, ConnectOptions, Reason};
use askgate_proto::v1::SubscribeRequest;
use clap::Args;
use tonic::Code;

use askgate_server::auth::secret::Secret;

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
    pub(crate) fn url(&self) -> String {
        match (self.addr.contains("://"), self.ca_file.is_some()) {
            (true, _) => self.addr.clone(),
            (false, true) => format!("https://{}", self.addr),
            (false, false) => format!("http://{}", self.addr),
        }
    }

    pub(crate) fn options(&self) -> Result<ConnectOptions, askgate_client::Error> {
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
                    if let Some(warning) = askgate_server::auth::secret::loose_permissions(key) {
                        eprintln!("askgate: warning: {warning}");
                    }
                    Some((read(cert)?, read(key)?))
                }
                _ => None,
            },
        })
    }

    pub(crate) async fn connect(&self) -> Result<Client, askgate_client::Error> {
        Client::connect_with(self.url(), self.options()?).await
    }

    pub(crate) fn connect_lazy(&self) -> Result<Client, askgate_client::Error> {
        Client::connect_lazy_with(self.url(), self.options()?)
    }
}

/// The token in `path`, warning on stderr when others may read the file.
fn read_token_file(path: &std::path::Path) -> Result<String, askgate_client::Error> {
    let refuse = |why: String| askgate_client::Error::from(tonic::Status::invalid_argument(why));
    let (bytes, warning) = askgate_server::auth::secret::read_file(path)
        .map_err(|e| refuse(format!("--token-file: {e:#}")))?;
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
    pub(crate) fn request(&self, after: String, exclusive: bool) -> SubscribeRequest {
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

/// Exit code of `ask` when nobody answered in time and the ask resolved with its
/// default answers (DEFAULTED): the answers are printed, as for an answer, but a
/// script must not take them for a person's.
pub const EXIT_DEFAULTED: u8 = 10;

/// The exit code of a failed client call. Every reason is decided here: the match
/// names each one, so that a new reason cannot fall through to 1 unnoticed.
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
        | Reason::TooManyWebhooks
        | Reason::RateLimited
        | Reason::Unauthenticated
        | Reason::PermissionDenied
        | Reason::AlreadyApproved
        | Reason::SelfApproval
        | Reason::ChannelNotAllowed
        | Reason::NotAnApprover
        | Reason::DeniedByPolicy
        | Reason::RequestIdReused => 7,
        Reason::NotPending | Reason::NotFound | Reason::ReceiptConsumed => 8,
        Reason::ShuttingDown | Reason::BackendUnavailable => 9,
        // No askgate reason: the transport's code decides (unreachable, or a proxy).
        Reason::Unspecified if error.code() == Code::Unavailable => 9,
        Reason::Unspecified | Reason::Internal => 1,
    }
}

/// Prints a failed call as one JSON object on stderr and returns its exit code.
pub(crate) fn fail(error: &askgate_client::Error) -> ExitCode {
    // Every key the server sent (serde_json's map keeps them sorted).
    let metadata: serde_json::Map<String, serde_json::Value> = error
        .metadata_entries()
        .map(|(key, value)| (key.to_owned(), value.into()))
        .collect();
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
pub(crate) fn fail_local(message: impl std::fmt::Display, code: u8) -> ExitCode {
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

/// A duration as a flag's default is written (`5s`, `1h`, `1day`): the flags take
/// their defaults from the config types, which write each one once.
pub(crate) fn span(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// A switch written `on` or `off` (as the help says; `true`/`false`, `yes`/`no` and
/// `1`/`0` are taken as well, unlisted).
pub(crate) fn on_off() -> impl clap::builder::TypedValueParser<Value = bool> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    let hidden = ["true", "false", "yes", "no", "1", "0"].map(|v| PossibleValue::new(v).hide(true));
    PossibleValuesParser::new(
        [PossibleValue::new("on"), PossibleValue::new("off")]
            .into_iter()
            .chain(hidden),
    )
    .map(|value| matches!(value.as_str(), "on" | "true" | "yes" | "1"))
}

/// Splits `KEY=VALUE`.
pub(crate) fn parse_pair(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reason has its row in docs/cli.md's exit-code table, with the code this
    /// build gives it: a new reason is decided (the match names each) and documented.
    #[test]
    fn the_exit_code_table_names_every_reason_with_its_code() {
        use tonic_types::{ErrorDetails, StatusExt as _};
        let doc = include_str!("../../../docs/cli.md");
        let table = &doc[doc.find("| code | meaning |").expect("the exit-code table")..];
        let rows: Vec<&str> = table.lines().take_while(|l| l.starts_with('|')).collect();
        for reason in Reason::all().filter(|r| *r != Reason::Unspecified) {
            let name = format!("`{}`", reason.as_str_name());
            let row = rows
                .iter()
                .find(|row| row.contains(&name))
                .unwrap_or_else(|| panic!("docs/cli.md's exit codes do not name {name}"));
            let documented: u8 = row[1..]
                .split('|')
                .next()
                .expect("code")
                .trim()
                .parse()
                .expect("a number");
            let details = ErrorDetails::with_error_info(reason.as_str_name(), "askgate", []);
            let status = tonic::Status::with_error_details(Code::Unknown, "x", details);
            let error = askgate_client::Error::from(status);
            assert_eq!(exit_code(&error), documented, "{name}");
        }
    }

    #[test]
    fn durations_and_pairs_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_pair("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_pair("nope").is_err());
    }
}

/// Which asks a chat channel gets, and whether it counts as following them.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only sessions whose id starts with this.
    #[arg(long, default_value = "")]
    pub session_prefix: String,
    /// Only asks with this label (KEY=VALUE; repeat it: all must match).
    #[arg(long = "label", value_parser = parse_pair)]
    pub labels: Vec<(String, String)>,
    #[arg(long, default_value = "")]
    pub description: String,
    /// Whether the channel counts as someone following its sessions, so that asks
    /// with if_unattended FAIL are held for it (default: true).
    #[arg(long, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub provides: Option<bool>,
}
