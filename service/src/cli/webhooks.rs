//! `askgate webhooks`: a tenant's webhook endpoints and deliveries (the `Webhooks`
//! service, admin role). Each command prints its result as one line of JSON.

use std::process::ExitCode;

use askgate_proto::v1::{
    CreateEndpointRequest, DeliveryStatus, ListDeliveriesRequest, ListDeliveriesResponse,
    ListEndpointsResponse,
};
use clap::{Args, Subcommand, ValueEnum};

use super::{
    common::{ConnectArgs, fail, parse_pair},
    json,
};

#[derive(Debug, Clone, Subcommand)]
pub enum WebhooksCommand {
    /// Register an endpoint; prints it with its signing secret (shown this once).
    Add(AddArgs),
    /// List the tenant's endpoints.
    List(ConnectOnly),
    /// Remove an endpoint.
    Rm(IdArgs),
    /// List deliveries, newest first.
    Deliveries(DeliveriesArgs),
    /// Send a delivery again (same webhook-id, a fresh retry period).
    Redeliver(IdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ConnectOnly {
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Clone, Args)]
pub struct AddArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Where to POST events (https://, or http://).
    #[arg(long)]
    pub url: String,
    /// An event type to send (repeat it): ask.requested, ask.resolved, ask.reminder,
    /// ask.escalated. Default: all.
    #[arg(long = "event")]
    pub events: Vec<String>,
    #[arg(long, default_value = "")]
    pub description: String,
    /// Only asks with this label (KEY=VALUE; repeat it: all must match).
    #[arg(long = "label", value_parser = parse_pair)]
    pub labels: Vec<(String, String)>,
    /// Whether the endpoint counts as someone following the sessions, so that asks
    /// with if_unattended FAIL are held for it (default: when it gets ask.requested).
    #[arg(long, action = clap::ArgAction::Set,
          value_parser = clap::builder::BoolishValueParser::new())]
    pub provides: Option<bool>,
}

#[derive(Debug, Clone, Args)]
pub struct IdArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The endpoint's or delivery's id.
    pub id: String,
}

/// `--status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFilter {
    Pending,
    Delivered,
    Failed,
}

#[derive(Debug, Clone, Args)]
pub struct DeliveriesArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Only this endpoint's.
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(long, value_enum)]
    pub status: Option<StatusFilter>,
    /// At most this many (at most 1000).
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
}

pub async fn run(command: WebhooksCommand) -> ExitCode {
    let connect = match &command {
        WebhooksCommand::Add(a) => &a.connect,
        WebhooksCommand::List(a) => &a.connect,
        WebhooksCommand::Rm(a) | WebhooksCommand::Redeliver(a) => &a.connect,
        WebhooksCommand::Deliveries(a) => &a.connect,
    };
    let mut client = match connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    match command {
        WebhooksCommand::Add(args) => {
            let request = CreateEndpointRequest {
                url: args.url,
                events: args.events,
                description: args.description,
                labels: args.labels.into_iter().collect(),
                provides: args.provides,
            };
            match client.create_endpoint(request).await {
                Ok(endpoint) => json::print("askgate.v1.Endpoint", &endpoint),
                Err(e) => fail(&e),
            }
        }
        WebhooksCommand::List(_) => match client.list_endpoints().await {
            Ok(endpoints) => json::print(
                "askgate.v1.ListEndpointsResponse",
                &ListEndpointsResponse { endpoints },
            ),
            Err(e) => fail(&e),
        },
        WebhooksCommand::Rm(args) => match client.delete_endpoint(&args.id).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&e),
        },
        WebhooksCommand::Deliveries(args) => {
            let status = match args.status {
                None => DeliveryStatus::Unspecified,
                Some(StatusFilter::Pending) => DeliveryStatus::Pending,
                Some(StatusFilter::Delivered) => DeliveryStatus::Delivered,
                Some(StatusFilter::Failed) => DeliveryStatus::Failed,
            };
            let filter = ListDeliveriesRequest {
                endpoint_id: args.endpoint.unwrap_or_default(),
                status: status.into(),
                limit: args.limit,
            };
            match client.list_deliveries(filter).await {
                Ok(deliveries) => json::print(
                    "askgate.v1.ListDeliveriesResponse",
                    &ListDeliveriesResponse { deliveries },
                ),
                Err(e) => fail(&e),
            }
        }
        WebhooksCommand::Redeliver(args) => match client.redeliver(&args.id).await {
            Ok(delivery) => json::print("askgate.v1.Delivery", &delivery),
            Err(e) => fail(&e),
        },
    }
}
