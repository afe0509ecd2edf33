//! askgate as an MCP server: the `ask_user_question` tool for any MCP client (Claude
//! Code, Codex, Cursor, agent frameworks), built on the official Rust SDK (`rmcp`).
//! Each tool call is an `Ask` made with a fresh request_id and a reattach grace, either
//! through a remote askgate (`askgate mcp` on stdio: one session) or in this server's
//! own process (`/mcp` on `askgate serve`, see [`http`]: the tenant and session of each
//! request come from its credential and its `askgate-session` header).
//!
//! - `ask_user_question` takes exactly the fixed tool schema (docs/protocol.md) and returns the tool
//!   result text of [`askgate_contract::tool`] (the answers as compact JSON, or
//!   `Error: …` with the fixed texts of docs/protocol.md "Errors").
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

pub mod http;

use std::{collections::HashMap, sync::Arc, time::Duration};

use askgate_contract::tool::{self, ToolAsk, ToolOutput};
use askgate_proto::v1::{AbortRequest, AskRequest, ErrorReason as Reason};
use futures_util::future::BoxFuture;
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

use crate::{domain::Error, questions::Questions, telemetry};

/// How long an ask's outcome stays for `await_user_answer` after it is known.
const OUTCOME_RETENTION: Duration = Duration::from_secs(600);

/// The tool that waits again for an ask that a call left pending.
pub const AWAIT_TOOL: &str = "await_user_answer";

/// How the MCP server asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// Longest one tool call waits before it returns "still waiting"; `None`: until
    /// the ask is resolved.
    pub max_wait: Option<Duration>,
    /// Interval of progress notifications while a call waits.
    pub progress_interval: Duration,
    /// How long an ask stays answerable after this server's call to askgate went
    /// away (the server exited or lost its connection), for a reattach.
    pub reattach_grace: Duration,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            max_wait: None,
            progress_interval: Duration::from_secs(10),
            reattach_grace: askgate_contract::DEFAULT_REATTACH_GRACE,
        }
    }
}

/// A remote askgate the tool's asks go to, in one session: `askgate mcp` implements it
/// with the Rust SDK, which this crate does not depend on.
pub trait RemoteAsker: Send + Sync {
    /// The session every ask goes to.
    fn session_id(&self) -> &str;

    /// Makes the ask (`request`, in [`RemoteAsker::session_id`]) and waits for it, its
    /// outcome as the tool's output; `traceparent` and `tracestate` carry the MCP
    /// caller's trace context, when it sent one.
    fn ask(
        &self,
        request: AskRequest,
        trace: Option<(String, String)>,
    ) -> BoxFuture<'static, ToolOutput>;

    /// Resolves the ask `request_id` ABORTED at once; why not, when that failed (an ask
    /// resolved meanwhile is no failure).
    fn abort(&self, request_id: &str) -> BoxFuture<'static, Option<String>>;
}

/// Where the tool's asks go.
#[derive(Clone)]
pub enum Asker {
    /// A remote askgate (`askgate mcp`), in one session.
    Remote(Arc<dyn RemoteAsker>),
    /// This server's own use cases (`/mcp` on `askgate serve`): each request's caller
    /// and session are in its extensions (see [`http::McpCaller`]). `max_wait` is the
    /// server's longest Ask.
    Local {
        questions: Questions,
        max_wait: Duration,
    },
}

/// The tenant and session a call asks in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    tenant: Arc<str>,
    /// The asking credential's subject (empty when a remote server asks).
    subject: Arc<str>,
    /// Its groups, which the tenant's policy may read.
    groups: Arc<[String]>,
    session_id: String,
}

/// The outcome of one ask, once known.
type Outcome = Option<ToolOutput>;

/// An ask whose call runs on its own task, so that a tool call may return before it
/// is resolved (`--mcp-max-wait`) and another pick it up.
pub struct Waiting {
    outcome: watch::Receiver<Outcome>,
}

/// Asks still running, by scope and ask_id (their request_id). Shared by every
/// handler of one server, so that `await_user_answer` finds an ask whichever MCP
/// session (or stateless request) started it, within its tenant and session only.
pub type WaitingAsks = Arc<Mutex<HashMap<(Scope, String), Waiting>>>;

/// The MCP server's handler: one per MCP connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct AskgateMcp {
    asker: Asker,
    settings: Arc<McpConfig>,
    waiting: WaitingAsks,
}

impl AskgateMcp {
    pub fn new(asker: Asker, settings: Arc<McpConfig>, waiting: WaitingAsks) -> Self {
        Self {
            asker,
            settings,
            waiting,
        }
    }

    /// The scope of a call: the remote session, or the caller and session that the
    /// HTTP layer admitted for this request.
    fn scope(&self, context: &RequestContext<RoleServer>) -> Result<Scope, ToolOutput> {
        match &self.asker {
            Asker::Remote(remote) => Ok(Scope {
                tenant: "".into(),
                subject: "".into(),
                groups: Arc::new([]),
                session_id: remote.session_id().to_owned(),
            }),
            Asker::Local { .. } => context
                .extensions
                .get::<::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<http::McpCaller>())
                .map(|caller| Scope {
                    tenant: caller.principal.tenant.clone(),
                    subject: caller.principal.sub.as_str().into(),
                    groups: caller.principal.groups.clone().into(),
                    session_id: caller.session_id.clone(),
                })
                .ok_or_else(|| {
                    ToolOutput::failed(
                        Reason::Internal,
                        Code::Internal,
                        "the request carries no admitted caller",
                    )
                }),
        }
    }

    /// The tools this server offers: `ask_user_question` with exactly the fixed
    /// schema and description, and `await_user_answer`.
    pub fn tools() -> Vec<Tool> {
        let object = |value: Value| match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        };
        vec![
            Tool::new(
                tool::NAME,
                tool::description(),
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

    /// Starts the ask on its own task and returns its id, or the refusal when the
    /// request is refused at once.
    /// `caller`: the trace context of the call's `_meta`.
    fn start(
        &self,
        scope: &Scope,
        ask: ToolAsk,
        caller: Option<opentelemetry::Context>,
    ) -> Result<String, ToolOutput> {
        let ask_id = uuid::Uuid::now_v7().to_string();
        let (outcome_tx, outcome) = watch::channel(None);
        let call = self.call(scope, &ask_id, ask, caller)?;
        self.waiting
            .lock()
            .insert((scope.clone(), ask_id.clone()), Waiting { outcome });
        let (waiting, key) = (self.waiting.clone(), (scope.clone(), ask_id.clone()));
        tokio::spawn(async move {
            let _ = outcome_tx.send(Some(call.await));
            // Kept for an `await_user_answer` that comes later, then forgotten.
            tokio::time::sleep(OUTCOME_RETENTION).await;
            waiting.lock().remove(&key);
        });
        Ok(ask_id)
    }

    /// The ask's call, to run on its own task.
    fn call(
        &self,
        scope: &Scope,
        ask_id: &str,
        ask: ToolAsk,
        caller: Option<opentelemetry::Context>,
    ) -> Result<impl Future<Output = ToolOutput> + Send + 'static, ToolOutput> {
        let grace = self.settings.reattach_grace;
        let ToolAsk { questions, action } = ask;
        let action = action.map(Box::new);
        Ok(match &self.asker {
            Asker::Remote(remote) => {
                let request = AskRequest {
                    session_id: remote.session_id().to_owned(),
                    questions,
                    action,
                    request_id: ask_id.to_owned(),
                    reattach_grace_ms: grace.as_millis().try_into().unwrap_or(u32::MAX),
                    ..Default::default()
                };
                // The server the ask goes to makes its span: the caller's context
                // goes along.
                let trace = caller.as_ref().map(|caller| {
                    let mut headers = telemetry::headers_of(caller);
                    let mut field = |name| headers.remove(name).unwrap_or_default();
                    (field("traceparent"), field("tracestate"))
                });
                futures_util::future::Either::Left(remote.ask(request, trace))
            }
            Asker::Local {
                questions: local,
                max_wait,
            } => {
                let request = AskRequest {
                    session_id: scope.session_id.clone(),
                    questions,
                    action,
                    request_id: ask_id.to_owned(),
                    reattach_grace_ms: grace.as_millis().try_into().unwrap_or(u32::MAX),
                    ..Default::default()
                };
                let deadline = tokio::time::Instant::now() + *max_wait;
                // The span asks for its parent only when it is exported.
                let traced =
                    telemetry::ask_span(&scope.session_id, request.questions.len(), || caller);
                let checked = local
                    .check_ask(&scope.tenant, &scope.subject, request, deadline)
                    .map(|checked| checked.traced(traced.clone()).with_groups(&scope.groups))
                    .map_err(|e| {
                        telemetry::refused(&traced, &e);
                        refused(&e)
                    })?;
                let local = local.clone();
                futures_util::future::Either::Right(async move {
                    match local.ask(checked).await {
                        Ok(response) => ToolOutput::answered(&response.answers),
                        Err(failure) => refused(&failure.error),
                    }
                })
            }
        })
    }

    /// Waits for the ask's outcome: until it is known, the call is cancelled (the ask
    /// is then aborted), or the maximum wait has passed (it stays pending).
    async fn wait(
        &self,
        scope: &Scope,
        ask_id: &str,
        context: &RequestContext<RoleServer>,
    ) -> ToolOutput {
        let key = (scope.clone(), ask_id.to_owned());
        let Some(mut outcome) = self.waiting.lock().get(&key).map(|w| w.outcome.clone()) else {
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
        // A call dropped while it waits (its HTTP stream closed) gave up on the ask
        // as a cancelled one does.
        let mut abandoned = AskGuard(Some((self.clone(), scope.clone(), ask_id.to_owned())));
        let result = tokio::select! {
            known = known => known,
            () = context.ct.cancelled() => {
                abandoned.0 = None;
                self.abort(scope, ask_id).await;
                Some(ToolOutput::failed(Reason::AskAborted, Code::Cancelled, tool::ASK_ABORTED_TEXT))
            }
            () = max_wait => {
                abandoned.0 = None;
                drop(progress);
                return still_waiting(ask_id);
            }
        };
        abandoned.0 = None;
        drop(progress);
        self.waiting.lock().remove(&key);
        result.unwrap_or_else(|| {
            ToolOutput::failed(
                Reason::Internal,
                Code::Internal,
                "the ask's call ended without an outcome",
            )
        })
    }

    /// Resolves the ask ABORTED at once (the caller gave up on it).
    async fn abort(&self, scope: &Scope, ask_id: &str) {
        let failed = match &self.asker {
            Asker::Remote(remote) => {
                let aborted = tokio::time::timeout(Duration::from_secs(5), remote.abort(ask_id));
                aborted
                    .await
                    .unwrap_or_else(|_| Some("askgate did not answer in time".to_owned()))
            }
            Asker::Local { questions, .. } => {
                let request = AbortRequest {
                    session_id: scope.session_id.clone(),
                    request_id: ask_id.to_owned(),
                };
                match questions.abort(&scope.tenant, request).await {
                    Err(e) if e.error_reason() != Reason::NotPending => Some(e.to_string()),
                    _ => None,
                }
            }
        };
        if let Some(why) = failed {
            tracing::warn!(ask_id, "could not abort the ask: {why}");
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
        let started = self.scope(context).and_then(|scope| {
            let ask = tool::parse_ask(&text)?;
            let caller = telemetry::from_json(&context.meta.0.0);
            Ok((self.start(&scope, ask, caller)?, scope))
        });
        match started {
            Ok((ask_id, scope)) => self.wait(&scope, &ask_id, context).await,
            Err(refused) => refused,
        }
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
        let scope = match self.scope(context) {
            Ok(scope) => scope,
            Err(refused) => return refused,
        };
        match ask_id {
            Some(ask_id) => self.wait(&scope, ask_id, context).await,
            None => ToolOutput::failed(
                Reason::BadRequest,
                Code::InvalidArgument,
                "invalid arguments: give exactly {\"ask_id\": \"...\"}",
            ),
        }
    }
}

/// Aborts the ask when the waiting call is dropped before it is done with it.
struct AskGuard(Option<(AskgateMcp, Scope, String)>);

impl Drop for AskGuard {
    fn drop(&mut self) {
        if let Some((mcp, scope, ask_id)) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { mcp.abort(&scope, &ask_id).await });
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

/// A refusal of this server's own use cases, as the tool's output.
fn refused(error: &Error) -> ToolOutput {
    ToolOutput::failed(
        error.error_reason(),
        crate::domain::status::code(error),
        &error.to_string(),
    )
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
