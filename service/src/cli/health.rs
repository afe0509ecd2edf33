//! `askgate health`: one grpc.health.v1 Check against a node, for container
//! HEALTHCHECKs and exec probes (Kubernetes can also probe gRPC health natively).
//! Exit 0 when SERVING; 1 when the node answers anything else (it is draining, or its
//! backend is unreachable); 9 when it cannot be reached in time.

use std::{process::ExitCode, time::Duration};

use clap::Args;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use super::common::{ConnectArgs, EXIT_USAGE, fail_local, parse_duration};

#[derive(Debug, Clone, Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The service to check: empty for the node as a whole, or
    /// `askgate.v1.UserQuestions`.
    #[arg(long, default_value = "")]
    pub service: String,
    /// How long the check (connecting included) may take.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Exit code when the node cannot be reached (as for the other client subcommands).
const EXIT_UNREACHABLE: u8 = 9;

pub async fn run(args: HealthArgs) -> ExitCode {
    let url = args.connect.url();
    let endpoint = match args
        .connect
        .options()
        .and_then(|options| options.endpoint(url.clone()))
    {
        Ok(endpoint) => endpoint,
        Err(e) => return fail_local(format!("{url}: {e}"), EXIT_USAGE),
    };
    let check = async {
        let channel = endpoint.connect().await.map_err(|e| e.to_string())?;
        HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: args.service.clone(),
            })
            .await
            .map(|response| response.into_inner().status())
            .map_err(|status| format!("{}: {}", status.code(), status.message()))
    };
    // One bound for connecting and checking together.
    let status = match tokio::time::timeout(args.timeout, check).await {
        Ok(Ok(status)) => status,
        Ok(Err(why)) => return fail_local(format!("{url} unreachable: {why}"), EXIT_UNREACHABLE),
        Err(_) => {
            return fail_local(
                format!("{url} did not answer within {:?}", args.timeout),
                EXIT_UNREACHABLE,
            );
        }
    };
    println!("{}", status.as_str_name());
    match status {
        ServingStatus::Serving => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
