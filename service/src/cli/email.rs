//! `askgate email`: a tenant's email routes (the `Email` service, admin role). Each
//! command prints its result as one line of JSON.

use std::process::ExitCode;

use askgate_proto::v1::{ConnectEmailRequest, ListEmailRoutesResponse};
use clap::{Args, Subcommand};

use super::{
    common::{ConnectArgs, FilterArgs, fail},
    json,
    webhooks::ConnectOnly,
};

#[derive(Debug, Clone, Subcommand)]
pub enum EmailCommand {
    /// Connect an email route: its questions are mailed, with links to answer them.
    /// The server needs --smtp-url, --email-from, --public-url and --secret-key-file.
    Connect(ConnectRouteArgs),
    /// List the tenant's email routes.
    List(ConnectOnly),
    /// Disconnect an email route.
    Disconnect(RouteIdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ConnectRouteArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// An address to mail (`ana@example.com` or `Ana <ana@example.com>`); repeat it,
    /// up to 10: each gets its own links.
    #[arg(long = "to", required = true)]
    pub to: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Clone, Args)]
pub struct RouteIdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The route's id (`em_…`).
    pub id: String,
}

pub async fn run(command: EmailCommand) -> ExitCode {
    let connect = match &command {
        EmailCommand::Connect(args) => &args.connect,
        EmailCommand::List(args) => &args.connect,
        EmailCommand::Disconnect(args) => &args.connect,
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let result = match command {
        EmailCommand::Connect(args) => {
            let request = ConnectEmailRequest {
                to: args.to,
                labels: args.filter.labels.into_iter().collect(),
                session_prefix: args.filter.session_prefix,
                description: args.filter.description,
                provides: args.filter.provides,
            };
            client
                .connect_email(request)
                .await
                .map(|route| Some(json::print("askgate.v1.EmailRoute", &route)))
        }
        EmailCommand::List(_) => client.list_email_routes().await.map(|routes| {
            Some(json::print(
                "askgate.v1.ListEmailRoutesResponse",
                &ListEmailRoutesResponse { routes },
            ))
        }),
        EmailCommand::Disconnect(args) => client.disconnect_email(&args.id).await.map(|()| None),
    };
    match result {
        Ok(printed) => printed.unwrap_or(ExitCode::SUCCESS),
        Err(e) => fail(&e),
    }
}
