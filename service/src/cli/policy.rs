//! `askgate policy`: the tenant's policy before asking (the `Policies` service, admin
//! role, docs/policy.md): put a Cedar policy set, read it back, test what it decides
//! about an ask. Each command prints its result as one line of JSON (`get --text`
//! prints the policies alone).

use std::process::ExitCode;

use askgate_proto::v1::{Action, AskRequest, PutPoliciesRequest, TestPoliciesRequest};
use clap::{Args, Subcommand, ValueEnum};

use super::{
    common::{ConnectArgs, EXIT_USAGE, fail, fail_local, parse_pair},
    json,
};

#[derive(Debug, Clone, Subcommand)]
pub enum PolicyCommand {
    /// Replace the tenant's policy set (refused, with Cedar's message, when it does
    /// not parse or fit its schema: the stored set then stays).
    Put(PutArgs),
    /// Print the tenant's policy set.
    Get(GetArgs),
    /// What the policies decide about an ask, without asking anyone.
    Test(TestArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Decisions apply.
    Enforce,
    /// Decisions are recorded only: every ask is asked.
    Shadow,
}

#[derive(Debug, Clone, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The Cedar policies (`-` for stdin); an empty file removes every policy.
    pub file: String,
    /// The tenant's Cedar schema (the actions and their arguments): the policies are
    /// validated against it, and asks that do not fit it are asked.
    #[arg(long)]
    pub schema: Option<String>,
    #[arg(long, value_enum, default_value = "enforce")]
    pub mode: Mode,
}

#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Print the policies' text alone (to edit and put back).
    #[arg(long)]
    pub text: bool,
}

#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The action's name, e.g. `Bash` or `deploy`.
    #[arg(long)]
    pub action: String,
    /// Its arguments: a JSON object, or `@FILE` (`@-` for stdin); default `{}`.
    #[arg(long)]
    pub arguments: Option<String>,
    /// The session it is asked in.
    #[arg(long, default_value = "default")]
    pub session: String,
    /// `KEY=VALUE`; repeat for several.
    #[arg(long = "label", value_parser = parse_pair)]
    pub labels: Vec<(String, String)>,
    /// The asking subject (default: yours).
    #[arg(long)]
    pub subject: Option<String>,
    /// A group of the asking credential; repeat for several (default: yours).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// Test this policy file instead of the stored set (with --schema, its schema).
    #[arg(long)]
    pub file: Option<String>,
    #[arg(long, requires = "file")]
    pub schema: Option<String>,
}

/// The text of `path` (`-`: stdin), or the usage error that says why not.
fn read(path: &str) -> Result<String, ExitCode> {
    json::read_input(path).map_err(|e| fail_local(format!("{e:#}"), EXIT_USAGE))
}

pub async fn run(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Put(args) => put(args).await,
        PolicyCommand::Get(args) => get(args).await,
        PolicyCommand::Test(args) => test(args).await,
    }
}

async fn put(args: PutArgs) -> ExitCode {
    let text = match read(&args.file) {
        Ok(text) => text,
        Err(code) => return code,
    };
    let schema = match args.schema.as_deref().map(read).transpose() {
        Ok(schema) => schema.unwrap_or_default(),
        Err(code) => return code,
    };
    let mode = match args.mode {
        Mode::Enforce => "enforce",
        Mode::Shadow => "shadow",
    };
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let set = PutPoliciesRequest {
        text,
        mode: mode.into(),
        schema,
    };
    match client.put_policies(set).await {
        Ok(stored) => json::print("askgate.v1.PolicySet", &stored),
        Err(e) => fail(&e),
    }
}

async fn get(args: GetArgs) -> ExitCode {
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    match client.get_policies().await {
        Ok(set) if args.text => {
            print!("{}", set.text);
            ExitCode::SUCCESS
        }
        Ok(set) => json::print("askgate.v1.PolicySet", &set),
        Err(e) => fail(&e),
    }
}

async fn test(args: TestArgs) -> ExitCode {
    let arguments_json = match json::arguments(args.arguments.as_deref()) {
        Ok(arguments) => arguments,
        Err(e) => return fail_local(e, EXIT_USAGE),
    };
    let (text, schema) = match (&args.file, &args.schema) {
        (None, _) => (String::new(), String::new()),
        (Some(file), schema) => match (read(file), schema.as_deref().map(read).transpose()) {
            (Ok(text), Ok(schema)) => (text, schema.unwrap_or_default()),
            (Err(code), _) | (_, Err(code)) => return code,
        },
    };
    let ask = AskRequest {
        session_id: args.session,
        labels: args.labels.into_iter().collect(),
        action: Some(Box::new(Action {
            name: args.action,
            arguments_json,
            approving_answers: Vec::new(),
        })),
        ..Default::default()
    };
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let test = TestPoliciesRequest {
        ask: Some(ask),
        subject: args.subject.unwrap_or_default(),
        groups: args.groups,
        text,
        schema,
    };
    match client.test_policies_with(test).await {
        Ok(tested) => json::print("askgate.v1.TestPoliciesResponse", &tested),
        Err(e) => fail(&e),
    }
}
