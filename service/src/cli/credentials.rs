//! `askgate token` (mint an HS256 JWT) and `askgate keys add` (append a hashed API key
//! to a keys file).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Args, Subcommand};

use super::common::{EXIT_USAGE, fail_local, parse_duration};
use askgate_server::auth::{
    jwt::{TokenSpec, mint_hs256},
    keys, parse_roles,
};

/// Who a credential makes its bearer.
#[derive(Debug, Clone, Args)]
pub struct Identity {
    /// The tenant the credential belongs to.
    #[arg(long)]
    pub tenant: String,
    /// The subject: recorded as `resolved_by` of what it resolves.
    #[arg(long)]
    pub sub: String,
    /// Roles, comma-separated: agent, ui, admin.
    #[arg(long, value_delimiter = ',', required = true)]
    pub roles: Vec<String>,
    /// Session patterns the credential is limited to (`*` wildcard); repeat or
    /// comma-separate. Default: every session of the tenant.
    #[arg(long, value_delimiter = ',')]
    pub sessions: Vec<String>,
    /// Groups the bearer is in (what an ask's approvers may name); repeat or
    /// comma-separate.
    #[arg(long = "group", value_delimiter = ',')]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// HS256 secret file (the server's --jwt-secret-file).
    #[arg(long, env = "ASKGATE_JWT_SECRET_FILE")]
    pub secret_file: PathBuf,
    #[command(flatten)]
    pub identity: Identity,
    /// Lifetime of the token.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub ttl: Duration,
    /// `iss` claim.
    #[arg(long)]
    pub issuer: Option<String>,
    /// `aud` claim.
    #[arg(long)]
    pub audience: Option<String>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeysCommand {
    /// Create a key, append its hash to the file, print the key (shown only once).
    Add(KeysAddArgs),
}

#[derive(Debug, Clone, Args)]
pub struct KeysAddArgs {
    /// The keys file (created if missing).
    #[arg(long, env = "ASKGATE_KEYS_FILE")]
    pub file: PathBuf,
    #[command(flatten)]
    pub identity: Identity,
}

/// The subject and roles of a credential about to be made, checked as the server
/// checks them when it loads one.
fn checked(identity: &Identity) -> Result<Vec<askgate_server::auth::Role>, ExitCode> {
    askgate_server::domain::approval::credential_subject(&identity.sub)
        .map_err(|e| fail_local(format!("--sub: {e}"), EXIT_USAGE))?;
    parse_roles(identity.roles.iter().map(String::as_str)).map_err(|e| fail_local(e, EXIT_USAGE))
}

fn sessions(identity: &Identity) -> Option<Vec<String>> {
    (!identity.sessions.is_empty()).then(|| identity.sessions.clone())
}

pub fn token(args: TokenArgs) -> ExitCode {
    let roles = match checked(&args.identity) {
        Ok(roles) => roles,
        Err(code) => return code,
    };
    let spec = TokenSpec {
        sub: args.identity.sub.clone(),
        tenant: args.identity.tenant.clone(),
        roles,
        sessions: sessions(&args.identity),
        groups: args.identity.groups.clone(),
        ttl: args.ttl,
        issuer: args.issuer,
        audience: args.audience,
    };
    match mint_hs256(&args.secret_file, &spec) {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => fail_local(format!("{e:#}"), 1),
    }
}

pub fn keys(command: KeysCommand) -> ExitCode {
    let KeysCommand::Add(args) = command;
    let roles = match checked(&args.identity) {
        Ok(roles) => roles,
        Err(code) => return code,
    };
    let identity = &args.identity;
    match keys::add(
        &args.file,
        &identity.tenant,
        &identity.sub,
        &roles,
        sessions(identity),
        identity.groups.clone(),
    ) {
        Ok(key) => {
            println!("{key}");
            eprintln!(
                "askgate: key added to {}; it is shown only this once (send SIGHUP to a running server to load it)",
                args.file.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail_local(format!("{e:#}"), 1),
    }
}
