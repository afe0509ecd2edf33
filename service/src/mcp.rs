//! askgate as an MCP server: the `ask_user_question` tool for any MCP client (Claude
//! Code, Codex, Cursor, agent frameworks), built on the official Rust SDK (`rmcp`).
//! The server is a client of askgate: each tool call is an `Ask` in one askgate
//! session, made with a fresh request_id and a reattach grace.
//!
//! - `ask_user_question` takes exactly the seed's tool schema and returns the tool
//!   result text of [`askgate_client::tool`] (the answers as compact JSON, or
//!   `Error: …` with the seed's strings).
//! - With a maximum wait, a call still unanswered then returns a "still waiting"
//!   result naming its `ask_id`; the ask stays pending (its call goes on here) and
//!   `await_user_answer {ask_id}` waits for it again. For clients whose tool calls time
//!   out (Codex: 60 s by default).
//! - While a call waits, progress notifications go out at a steady interval when the
//!   client sent a progress token, so clients that extend timeouts on progress keep
//!   the call alive.
//! - A cancelled call (`notifications/cancelled`) resolves its ask ABORTED at once
//!   (`UserQuestions.Abort`); when the server goes away, its asks' calls drop and
//!   askgate aborts them after their reattach grace.

use std::{collections::HashMap, sync::Arc, time::Duration};

use askgate_client::{
    Ask, Client, Reason,
    tool::{self, ToolOutput},
};
use parking_lot::Mutex;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResult, ContentBlock, Implementation, JsonObject,
        ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
        ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tonic::Code;

/// The tool that waits again for an ask that a call left pending.
pub const AWAIT_TOOL: &str = "await_user_answer";

/// How the MCP server asks.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// The askgate session every call asks in.
    pub session_id: String,
    /// Longest one tool call waits before it returns "still waiting"; `None`: until
    /// the ask is resolved.
    pub max_wait: Option<Duration>,
    /// Interval of progress notifications while a call waits.
    pub progress_interval: Duration,
    /// How long an ask stays answerable after this server's call to askgate went
    /// away (the server exited or lost its connection), for a reattach.
    pub reattach_grace: Duration,
}

impl McpSettings {
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            max_wait: None,
            progress_interval: Duration::from_secs(10),
            reattach_grace: askgate_client::DEFAULT_REATTACH_GRACE,
        }
    }
}

/// The outcome of one ask, once known.
type Outcome = Option<ToolOutput>;

/// An ask whose askgate call runs on its own task, so that a tool call may return
/// before it is resolved (`--mcp-max-wait`) and another pick it up.
struct Waiting {
    outcome: watch::Receiver<Outcome>,
}

/// The MCP server: one per MCP connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct AskgateMcp {
    client: Client,
    settings: Arc<McpSettings>,
    /// Asks still running, by ask_id (their request_id).
    waiting: Arc<Mutex<HashMap<String, Waiting>>>,
}

impl AskgateMcp {
    pub fn new(client: Client, settings: McpSettings) -> Self {
        Self {
            client,
            settings: Arc::new(settings),
            waiting: Arc::default(),
        }
    }

    /// The tools this server offers: `ask_user_question` with exactly the seed's
    /// schema and description, and `await_user_answer`.
    pub fn tools() -> Vec<Tool> {
        let object = |value: Value| match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        };
        vec![
            Tool::new(
                tool::NAME,
                tool::DESCRIPTION,
                Arc::new(object(tool::input_schema())),
            ),
            Tool::new(
                AWAIT_TOOL,
                "Keep waiting for the user's answers to a question asked earlier with \
                 ask_user_question, when that call returned that it is still waiting. \
                 Pass the ask_id it named. The result is the same as ask_user_question's.",
                Arc::new(object(json!({
                    "type": "object",
                    "properties": {
                        "ask_id": {
                            "type": "string",
                            "description": "The ask_id named by the still-waiting result."
                        }
                    },
                    "required": ["ask_id"],
                    "additionalProperties": false
                }))),
            ),
        ]
    }

    /// Starts the ask on its own task and returns its id.
    fn start(&self, questions: Vec<askgate_client::proto::Question>) -> String {
        let ask_id = uuid::Uuid::now_v7().to_string();
        let mut ask = Ask::new(&self.settings.session_id)
            .request_id(&ask_id)
            .reattach_grace(self.settings.reattach_grace);
        for question in questions {
            ask = ask.question(question);
        }
        let (outcome_tx, outcome) = watch::channel(None);
        self.waiting
            .lock()
            .insert(ask_id.clone(), Waiting { outcome });
        let mut client = self.client.clone();
        tokio::spawn(async move {
            let output = match client.ask(ask).await {
                Ok(response) => ToolOutput::answered(&response.answers),
                Err(error) => ToolOutput::from_error(&error),
            };
            let _ = outcome_tx.send(Some(output));
        });
        ask_id
    }

    /// Waits for the ask's outcome: until it is known, the call is cancelled (the ask
    /// is then aborted), or the maximum wait has passed (it stays pending).
    async fn wait(&self, ask_id: &str, context: &RequestContext<RoleServer>) -> ToolOutput {
        let Some(mut outcome) = self.waiting.lock().get(ask_id).map(|w| w.outcome.clone()) else {
            return ToolOutput::failed(
                Reason::NotPending,
                Code::NotFound,
                &format!(
                    "no question is waiting under ask_id {}",
                    crate::domain::echo(ask_id)
                ),
            );
        };
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| self.send_progress(token, context));
        let max_wait = async {
            match self.settings.max_wait {
                Some(wait) => tokio::time::sleep(wait).await,
                None => std::future::pending().await,
            }
        };
        let known = async {
            let known = outcome.wait_for(Option::is_some).await;
            known.ok().and_then(|output| output.clone())
        };
        let result = tokio::select! {
            known = known => known,
            () = context.ct.cancelled() => {
                self.abort(ask_id).await;
                Some(ToolOutput::failed(Reason::AskAborted, Code::Cancelled, tool::ASK_ABORTED_TEXT))
            }
            () = max_wait => {
                drop(progress);
                return still_waiting(ask_id);
            }
        };
        drop(progress);
        self.waiting.lock().remove(ask_id);
        result.unwrap_or_else(|| {
            ToolOutput::failed(
                Reason::Internal,
                Code::Internal,
                "the ask's call ended without an outcome",
            )
        })
    }

    /// Resolves the ask ABORTED at once (the caller gave up on it).
    async fn abort(&self, ask_id: &str) {
        let mut client = self.client.clone();
        let aborted = tokio::time::timeout(
            Duration::from_secs(5),
            client.abort(&self.settings.session_id, ask_id),
        )
        .await;
        if let Ok(Err(e)) = aborted
            && e.reason() != Reason::NotPending
        {
            tracing::warn!(ask_id, "could not abort the ask: {}", e.message());
        }
    }

    /// Sends progress notifications at the configured interval until the returned
    /// sender is dropped.
    fn send_progress(
        &self,
        token: ProgressToken,
        context: &RequestContext<RoleServer>,
    ) -> oneshot::Sender<()> {
        let peer = context.peer.clone();
        let every = self.settings.progress_interval;
        let (stop, mut stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            let mut waited = 0u64;
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = ticks.tick() => {}
                }
                waited += every.as_secs().max(1);
                let notification = ProgressNotificationParam::new(token.clone(), waited as f64)
                    .with_message(format!("waiting for the user's answer ({waited}s)"));
                if peer.notify_progress(notification).await.is_err() {
                    return;
                }
            }
        });
        stop
    }

    async fn ask_user_question(
        &self,
        arguments: Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> ToolOutput {
        let text = Value::Object(arguments.unwrap_or_default()).to_string();
        let questions = match tool::parse_arguments(&text) {
            Ok(questions) => questions,
            Err(refused) => return refused,
        };
        let ask_id = self.start(questions);
        self.wait(&ask_id, context).await
    }

    async fn await_user_answer(
        &self,
        arguments: Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> ToolOutput {
        let ask_id = arguments
            .as_ref()
            .filter(|args| args.len() == 1)
            .and_then(|args| args.get("ask_id"))
            .and_then(Value::as_str);
        match ask_id {
            Some(ask_id) => self.wait(ask_id, context).await,
            None => ToolOutput::failed(
                Reason::BadRequest,
                Code::InvalidArgument,
                "invalid arguments: give exactly {\"ask_id\": \"...\"}",
            ),
        }
    }
}

/// The result of a call that waited its maximum: not an error, an instruction.
fn still_waiting(ask_id: &str) -> ToolOutput {
    ToolOutput {
        text: format!(
            "The user has not answered yet; the question stays open (ask_id: {ask_id}). \
             Call {AWAIT_TOOL} with {{\"ask_id\": \"{ask_id}\"}} to keep waiting for the answer."
        ),
        error: None,
    }
}

fn result(output: ToolOutput) -> CallToolResult {
    let content = vec![ContentBlock::text(output.text)];
    match output.error {
        None => CallToolResult::success(content),
        Some(_) => CallToolResult::error(content),
    }
}

impl ServerHandler for AskgateMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("askgate", env!("CARGO_PKG_VERSION"))
                    .with_title("askgate: ask a human"),
            )
            .with_instructions(
                "ask_user_question asks a human through askgate and waits for the answer. \
                 If a call returns that the user has not answered yet, call \
                 await_user_answer with the ask_id it names.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let output = match request.name.as_ref() {
            tool::NAME => self.ask_user_question(request.arguments, &context).await,
            AWAIT_TOOL => self.await_user_answer(request.arguments, &context).await,
            other => {
                return Err(McpError::invalid_params(
                    format!("no tool named {}", crate::domain::echo(other)),
                    None,
                ));
            }
        };
        Ok(result(output).into())
    }
}
