//! `askgate receipt verify`: checks a receipt as an executor would before it runs the
//! action (docs/approvals.md): signed by one of the server's keys, not expired, and
//! bound to exactly this action. Prints the receipt's claims as JSON.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use askgate_client::receipt::{self, JwkSet, ReceiptError};
use askgate_proto::v1::Action;
use askgate_server::webhooks::send::{Sender, Target};
use clap::{Args, Subcommand};
use serde::Deserialize;

use super::common::fail_local;

#[derive(Debug, Clone, Subcommand)]
pub enum ReceiptCommand {
    /// Verify a receipt against the server's keys and the action about to run; exit 0
    /// when it is valid and bound to that action (its claims are printed), 1 when it
    /// is not, 2 when the keys or the action cannot be read.
    Verify(VerifyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The server's public keys: its `/.well-known/jwks.json` URL, or a file holding
    /// that JWK Set.
    #[arg(long)]
    pub jwks: String,
    /// The action about to run, as JSON: `{"name": ..., "arguments": {...}}` (or
    /// `"arguments_json"`: the arguments as a JSON text); `-` for stdin.
    #[arg(long)]
    pub action: PathBuf,
    /// How far this machine's clock may be behind the server's.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub leeway: Duration,
    /// The receipt (a compact JWS).
    pub token: String,
}

/// Exit code of a receipt that does not verify.
const EXIT_INVALID: u8 = 1;
/// Exit code when the keys or the action cannot be read.
const EXIT_INPUT: u8 = 2;
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
    let ReceiptCommand::Verify(args) = command;
    let keys = match keys(&args.jwks).await {
        Ok(keys) => keys,
        Err(e) => return fail_local(format!("cannot read the keys: {e}"), EXIT_INPUT),
    };
    let action = match action(&args.action) {
        Ok(action) => action,
        Err(e) => return fail_local(format!("cannot read the action: {e}"), EXIT_INPUT),
    };
    match receipt::verify_receipt_with(args.token.trim(), &keys, &action, args.leeway) {
        Ok(claims) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&claims).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(ReceiptError::Digest(e)) => fail_local(e.to_string(), EXIT_INPUT),
        Err(e) => fail_local(format!("invalid receipt: {e}"), EXIT_INVALID),
    }
}

/// The JWK Set at a URL, or in a file.
async fn keys(source: &str) -> Result<JwkSet, String> {
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
