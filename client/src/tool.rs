//! The model-facing `ask_user_question` tool: its definition (a JSON Schema the model
//! fills in) and an executor that asks through askgate and returns the tool result
//! text. Waiting costs the model no tokens: the executor just awaits the answer.
//!
//! ```no_run
//! # async fn demo(client: askgate_client::Client) {
//! use askgate_client::tool::{AskUserQuestion, definition};
//!
//! let tool = definition(); // hand this to the model
//! let executor = AskUserQuestion::new(client, "session-1");
//! // ...when the model calls the tool with `arguments` (a JSON string):
//! let arguments = r#"{"questions":[{"id":"db","question":"Which database?",
//!     "options":[{"label":"Postgres (Recommended)"},{"label":"SQLite"}]}]}"#;
//! // The run ends early, ABORTED, if the agent's turn is interrupted meanwhile.
//! let (stop, interrupted) = tokio::sync::oneshot::channel::<()>();
//! let output = executor
//!     .run(arguments, async { let _ = interrupted.await; })
//!     .await;
//! let result: &str = &output.text; // goes back to the model
//! if let Some(error) = output.error {
//!     eprintln!("the tool failed: {} ({:?})", error.name(), error.code);
//! }
//! # drop(stop);
//! # }
//! ```

use std::{future::Future, time::Duration};

use tonic::Code;

pub use askgate_contract::tool::{
    ASK_ABORTED_TEXT, NAME, ToolAsk, ToolError, ToolOutput, answers_text, definition, description,
    input_schema, parse_ask,
};

use crate::{Ask, Client, Error, Reason};

/// How long an abort waits for the server to resolve the ask ABORTED.
const ABORT_TIMEOUT: Duration = Duration::from_secs(5);

impl From<&Error> for ToolOutput {
    /// A failed call, with the server's message (the fixed texts of docs/protocol.md "Errors").
    fn from(error: &Error) -> Self {
        Self::failed(error.reason(), error.code(), error.message())
    }
}

/// Executes `ask_user_question` calls for one session (and, optionally, one attached
/// agent).
#[derive(Debug, Clone)]
pub struct AskUserQuestion {
    client: Client,
    session_id: String,
    agent: Option<(String, String)>,
    timeout: Option<Duration>,
}

impl AskUserQuestion {
    /// An executor asking in `session_id`.
    pub fn new(client: Client, session_id: &str) -> Self {
        Self {
            client,
            session_id: session_id.to_owned(),
            agent: None,
            timeout: None,
        }
    }

    /// Asks as this attached agent (its `Agents.Attach` incarnation).
    pub fn agent(mut self, agent_id: &str, incarnation: &str) -> Self {
        self.agent = Some((agent_id.to_owned(), incarnation.to_owned()));
        self
    }

    /// How long to wait for the human; without one the server's maximum wait applies.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs one tool call: `arguments` is the model's JSON. Returns the tool result
    /// text: the answers as compact JSON, or `Error: <message>`.
    pub async fn call(&self, arguments: &str) -> String {
        self.run(arguments, std::future::pending()).await.text
    }

    /// Runs one tool call until it is resolved or `abort` completes (the agent's turn
    /// was interrupted, its run cancelled). An abort resolves the ask ABORTED at once
    /// (its reattach grace notwithstanding: subscribers see `resolved`, a human can no
    /// longer answer) and gives `Error: ask_user_question was aborted before the user
    /// answered`.
    pub async fn run(&self, arguments: &str, abort: impl Future<Output = ()>) -> ToolOutput {
        let ask = match self.ask(arguments) {
            Ok(ask) => ask,
            Err(output) => return output,
        };
        let request_id = ask.request.request_id.clone();
        let mut client = self.client.clone();
        tokio::select! {
            // An answer that is already there wins over an abort at the same moment.
            biased;
            result = client.ask(ask) => match result {
                Ok(response) => ToolOutput::answered(&response.answers),
                Err(error) => ToolOutput::from(&error),
            },
            () = abort => {
                self.abort(&request_id).await;
                ToolOutput::failed(Reason::AskAborted, Code::Cancelled, ASK_ABORTED_TEXT)
            }
        }
    }

    /// The Ask for the model's arguments, or the tool output refusing them.
    fn ask(&self, arguments: &str) -> Result<Ask, ToolOutput> {
        let mut ask = Ask::new(&self.session_id);
        let asked = parse_ask(arguments)?;
        for question in asked.questions {
            ask = ask.question(question);
        }
        if let Some(action) = asked.action {
            ask = ask.action(&action.name, &action.arguments_json);
        }
        if let Some((agent_id, incarnation)) = &self.agent {
            ask = ask.agent(agent_id, incarnation);
        }
        if let Some(timeout) = self.timeout {
            ask = ask.timeout(timeout);
        }
        Ok(ask)
    }

    /// Resolves the ask that `request_id` registered ABORTED. An abort that overtakes
    /// its Ask (the call was dropped before the server registered it) is recorded by
    /// the server as that ask's outcome, so the Ask, if it still arrives, ends ABORTED
    /// at once and is never shown to anyone.
    async fn abort(&self, request_id: &str) {
        let mut client = self.client.clone();
        let _ =
            tokio::time::timeout(ABORT_TIMEOUT, client.abort(&self.session_id, request_id)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_questions_is_empty_questions_not_a_parse_error() {
        let executor = AskUserQuestion::new(
            Client::new(
                tonic::transport::Channel::from_static("http://127.0.0.1:1").connect_lazy(),
            ),
            "s",
        );
        for arguments in [r#"{}"#, r#"{"questions":[]}"#] {
            let refused = executor.ask(arguments).expect_err(arguments);
            assert_eq!(
                refused.text,
                "Error: ask_user_question requires at least one question"
            );
            assert_eq!(
                refused.error.map(|e| (e.name(), e.code)),
                Some(("EMPTY_QUESTIONS", Code::InvalidArgument))
            );
        }
        let refused = executor.ask("not json").expect_err("not json");
        assert_eq!(refused.error.map(|e| e.reason), Some(Reason::BadRequest));
    }
}
