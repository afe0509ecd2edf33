//! `askgate attach`: holds an agent's liveness lease, so asks made with its incarnation
//! are accepted; prints the incarnation as a JSON line. Interrupting it detaches the
//! agent (its pending asks are ABORTED).

use std::process::ExitCode;

use clap::Args;

use super::common::{ConnectArgs, fail, shutdown_signal};

#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The agent to make live.
    #[arg(long, env = "ASKGATE_AGENT_ID")]
    pub agent_id: String,
    /// The agent that owns this one: while it is attached, this one may not ask.
    #[arg(long, default_value = "")]
    pub parent_agent_id: String,
}

pub async fn run(args: AttachArgs) -> ExitCode {
    let mut client = match args.connect.connect().await {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let mut lease = match client.attach(&args.agent_id, &args.parent_agent_id).await {
        Ok(lease) => lease,
        Err(e) => return fail(&e),
    };
    let line = serde_json::json!({
        "agent_id": args.agent_id,
        "incarnation": lease.incarnation(),
    });
    println!("{line}");
    tokio::select! {
        () = shutdown_signal() => ExitCode::SUCCESS,
        ended = lease.ended() => match ended {
            Some(error) => fail(&error),
            None => {
                eprintln!("askgate: the lease ended (replaced by a newer attach, or the server is draining)");
                ExitCode::from(9)
            }
        },
    }
}
