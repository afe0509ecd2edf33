//! `askgate receipt verify` and `consume`: an executor's check before it runs the
//! action a human approved (docs/approvals.md). `verify`: signed by one of the
//! server's keys, not expired, of this tenant, bound to exactly this action, and
//! deciding `approved` (prints the claims as JSON); `consume` (or `verify --consume`):
//! used up on the server, so that a replayed receipt runs nothing twice.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use askgate_client::receipt::{self, JwkSet, ReceiptError, Verify};
use askgate_proto::v1::Action;
use askgate_server::egress::send::{Sender, Target};
use clap::{Args, Subcommand};
use serde::Deserialize;

use super::common::{ConnectArgs, fail, fail_local};

#[derive(Debug, Clone, Subcommand)]
pub enum ReceiptCommand {
    /// Verify a receipt against the server's keys, the tenant and the action about to
    /// run: exit 0 when it approves that action (its claims are printed), 3 when it is
    /// valid but decides otherwise (rejected, defaulted, cancelled, expired, aborted:
    /// printed), 1 when it is not valid for them, 2 when the keys or the action cannot
    /// be read. With --consume, an approving receipt is then used up on the server.
    Verify(VerifyArgs),
    /// Use up a receipt on the server (agent or admin credential of its tenant): exit
    /// 0 the first time (printing its decision), 8 (RECEIPT_CONSUMED) after.
    Consume(ConsumeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The server's public keys: its `/.well-known/jwks.json` URL, or a file holding
    /// that JWK Set.
    #[arg(long)]
    pub jwks: String,
    /// The tenant the action runs for: a receipt of any other tenant is refused.
    #[arg(long)]
    pub tenant: String,
    /// The action about to run, as JSON: `{"name": ..., "arguments": {...}}` (or
    /// `"arguments_json"`: the arguments as a JSON text); `-` for stdin.
    #[arg(long)]
    pub action: PathBuf,
    /// How far this machine's clock may be behind the server's.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub leeway: Duration,
    /// Exit 0 for any decision once everything else holds (to record a "no"); the
    /// claims say which.
    #[arg(long, conflicts_with = "consume")]
    pub any_decision: bool,
    /// Once it verifies, use the receipt up on the server (`receipt consume`): exit 8
    /// when it was used before.
    #[arg(long)]
    pub consume: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The receipt (a compact JWS).
    pub receipt: String,
}

#[derive(Debug, Clone, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The receipt (a compact JWS).
    pub receipt: String,
}

/// Exit code of a receipt that does not verify.
const EXIT_INVALID: u8 = 1;
/// Exit code when the keys or the action cannot be read.
const EXIT_INPUT: u8 = 2;
/// Exit code of a valid receipt whose decision is not `approved`.
const EXIT_NOT_APPROVED: u8 = 3;
/// Largest key set or action file read.
const MAX_INPUT_BYTES: usize = 1024 * 1024;

/// An action file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionFile {
    name: String,
    #[serde(default)]
    arguments: Option<serde_json::Value>,
    #[serde(default)]
    arguments_json: Option<String>,
}

pub async fn run(command: ReceiptCommand) -> ExitCode {
    match command {
        ReceiptCommand::Verify(args) => verify(args).await,
        ReceiptCommand::Consume(args) => consume(&args.connect, args.receipt.trim()).await,
    }
}

async fn verify(args: VerifyArgs) -> ExitCode {
    let keys = match keys(&args.jwks).await {
        Ok(keys) => keys,
        Err(e) => return fail_local(format!("cannot read the keys: {e}"), EXIT_INPUT),
    };
    let action = match action(&args.action) {
        Ok(action) => action,
        Err(e) => return fail_local(format!("cannot read the action: {e}"), EXIT_INPUT),
    };
    let checks = Verify {
        leeway: args.leeway,
        any_decision: args.any_decision,
    };
    let token = args.receipt.trim();
    let print = |claims: &receipt::Claims| {
        println!(
            "{}",
            serde_json::to_string_pretty(claims).unwrap_or_default()
        );
    };
    match receipt::verify_receipt_with(token, &keys, &args.tenant, &action, &checks) {
        Ok(claims) => {
            print(&claims);
            match args.consume {
                true => consume(&args.connect, token).await,
                false => ExitCode::SUCCESS,
            }
        }
        Err(ReceiptError::NotApproved(claims)) => {
            print(&claims);
            let error = ReceiptError::NotApproved(claims);
            fail_local(format!("{error}: do not run the action"), EXIT_NOT_APPROVED)
        }
        Err(ReceiptError::Digest(e)) => fail_local(e.to_string(), EXIT_INPUT),
        Err(e) => fail_local(format!("invalid receipt: {e}"), EXIT_INVALID),
    }
}

async fn consume(connect: &ConnectArgs, token: &str) -> ExitCode {
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    match client.consume_receipt(token).await {
        Ok(consumed) => {
            let at = consumed
                .consumed_at
                .and_then(|t| std::time::SystemTime::try_from(t).ok())
                .map(|t| humantime::format_rfc3339_millis(t).to_string())
                .unwrap_or_default();
            eprintln!(
                "askgate: receipt consumed at {at}: its decision is {}",
                consumed.decision
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The JWK Set at a URL, or in a file.
pub(crate) async fn keys(source: &str) -> Result<JwkSet, String> {
    let bytes = match source.starts_with("http://") || source.starts_with("https://") {
        true => {
            let target = Target::parse(source).map_err(|e| format!("{source} {e}"))?;
            // The operator names the server: a loopback or private one is fine.
            let sender =
                Sender::new(true, Duration::from_secs(10)).with_max_response(MAX_INPUT_BYTES);
            let (status, body) = sender.get(&target).await?;
            if !status.is_success() {
                return Err(format!("{source} answered {status}"));
            }
            body.to_vec()
        }
        false => read(&PathBuf::from(source))?,
    };
    serde_json::from_slice(&bytes).map_err(|e| format!("not a JWK Set: {e}"))
}

fn action(path: &PathBuf) -> Result<Action, String> {
    let bytes = read(path)?;
    let file: ActionFile = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let arguments_json = match (file.arguments, file.arguments_json) {
        (Some(arguments), None) => arguments.to_string(),
        (None, Some(text)) => text,
        _ => return Err("give exactly one of `arguments` and `arguments_json`".into()),
    };
    Ok(Action {
        name: file.name,
        arguments_json,
        approving_answers: Vec::new(),
    })
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    let limit = MAX_INPUT_BYTES as u64 + 1;
    let read = match path.as_os_str() == "-" {
        true => std::io::stdin().take(limit).read_to_end(&mut bytes),
        false => std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes)),
    };
    read.map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "{} is larger than {MAX_INPUT_BYTES} bytes",
            path.display()
        ));
    }
    Ok(bytes)
}
