//! `askgate mcp`: an MCP server on stdio (for Claude Code, Codex, Cursor and any MCP
//! client) whose `ask_user_question` tool asks through askgate. See [`askgate_server::mcp`].

use std::{process::ExitCode, sync::Arc, time::Duration};

use askgate_client::{Ask, Client, Reason, proto::AskRequest, tool::ToolOutput};
use askgate_server::{
    domain::validate,
    mcp::{Asker, AskgateMcp, McpConfig, RemoteAsker, WaitingAsks},
};
use clap::Args;
use futures_util::future::BoxFuture;
use rmcp::ServiceExt as _;

use super::common::{ConnectArgs, EXIT_USAGE, fail, fail_local, parse_duration};

#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// The askgate session the tool asks in (where the humans' UIs follow it).
    #[arg(long, env = "ASKGATE_SESSION")]
    pub session: String,
    /// Longest one tool call waits; a call still unanswered then returns "still
    /// waiting" with an ask_id for `await_user_answer`, and the question stays open.
    /// Set it below the client's tool timeout (Codex: 60s). Default: wait until
    /// answered.
    #[arg(long, env = "ASKGATE_MCP_MAX_WAIT", value_parser = parse_duration)]
    pub mcp_max_wait: Option<Duration>,
    /// Interval of progress notifications while a call waits (sent when the client
    /// asked for them with a progress token).
    #[arg(long, env = "ASKGATE_MCP_PROGRESS_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub progress_interval: Duration,
    /// How long a question stays answerable after this server went away (its client
    /// closed it), before askgate aborts it.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub reattach_grace: Duration,
}

pub async fn run(args: McpArgs) -> ExitCode {
    if let Err(e) = validate::session_id("--session", &args.session) {
        return fail_local(e.to_string(), EXIT_USAGE);
    }
    if args.progress_interval.is_zero() || args.mcp_max_wait.is_some_and(|w| w.is_zero()) {
        return fail_local(
            "--progress-interval and --mcp-max-wait must be longer than zero",
            EXIT_USAGE,
        );
    }
    // Lazily: the MCP client may start this server before askgate is up.
    let client = match args.connect.connect_lazy() {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let settings = McpConfig {
        max_wait: args.mcp_max_wait,
        progress_interval: args.progress_interval,
        reattach_grace: args.reattach_grace,
    };
    let asker = Asker::Remote(Arc::new(Sdk {
        client,
        session_id: args.session,
    }));
    let served = AskgateMcp::new(asker, Arc::new(settings), WaitingAsks::default())
        .serve(rmcp::transport::stdio())
        .await;
    let service = match served {
        Ok(service) => service,
        Err(e) => return fail_local(format!("the MCP session did not start: {e}"), 1),
    };
    match service.waiting().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail_local(format!("the MCP session failed: {e}"), 1),
    }
}

/// The tool's asks through the Rust SDK, in one session.
struct Sdk {
    client: Client,
    session_id: String,
}

impl RemoteAsker for Sdk {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn ask(
        &self,
        request: AskRequest,
        trace: Option<(String, String)>,
    ) -> BoxFuture<'static, ToolOutput> {
        let mut ask = Ask::from(request);
        if let Some((traceparent, tracestate)) = trace {
            ask = ask.trace_context(&traceparent, &tracestate);
        }
        let mut client = self.client.clone();
        Box::pin(async move {
            match client.ask(ask).await {
                Ok(response) => ToolOutput::answered(&response.answers),
                Err(error) => ToolOutput::from(&error),
            }
        })
    }

    fn abort(&self, request_id: &str) -> BoxFuture<'static, Option<String>> {
        let (mut client, session_id, request_id) = (
            self.client.clone(),
            self.session_id.clone(),
            request_id.to_owned(),
        );
        Box::pin(async move {
            match client.abort(&session_id, &request_id).await {
                Err(e) if e.reason() != Reason::NotPending => Some(e.message().to_owned()),
                _ => None,
            }
        })
    }
}
