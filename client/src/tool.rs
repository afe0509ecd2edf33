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

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tonic::Code;

use crate::{
    Ask, Client, Error, Reason,
    proto::{Question, QuestionAnswer, QuestionOption},
};

/// The tool's definition, `{name, description, input_schema}`: one file that every
/// askgate SDK and `askgate mcp` serve as it is (the Python and TypeScript packages carry
/// copies that their generate steps make and CI checks).
const DEFINITION: &str = include_str!("../ask_user_question.json");

/// The tool's name, as the model sees it.
pub const NAME: &str = "ask_user_question";

/// The definition, parsed once.
fn parsed() -> &'static Value {
    static PARSED: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        let value: Value =
            serde_json::from_str(DEFINITION).expect("ask_user_question.json is JSON");
        assert_eq!(value["name"], NAME, "ask_user_question.json names the tool");
        value
    });
    &PARSED
}

/// What the model reads about the tool.
pub fn description() -> &'static str {
    parsed()["description"]
        .as_str()
        .expect("ask_user_question.json has a description")
}

/// The tool definition: `{name, description, input_schema}`.
pub fn definition() -> Value {
    parsed().clone()
}

/// The JSON Schema of the tool's arguments. Unknown fields are refused at every level.
pub fn input_schema() -> Value {
    parsed()["input_schema"].clone()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    /// Absent is no question at all: EMPTY_QUESTIONS, as for an empty list.
    #[serde(default)]
    questions: Vec<ToolQuestion>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolQuestion {
    id: String,
    question: String,
    #[serde(default)]
    header: Option<String>,
    #[serde(default)]
    options: Vec<ToolOption>,
    #[serde(default)]
    multi_select: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolOption {
    label: String,
    #[serde(default)]
    description: Option<String>,
}

impl From<ToolQuestion> for Question {
    fn from(q: ToolQuestion) -> Self {
        Question {
            id: q.id,
            question: q.question,
            header: q.header,
            options: q
                .options
                .into_iter()
                .map(|o| QuestionOption {
                    label: o.label,
                    description: o.description,
                })
                .collect(),
            multi_select: q.multi_select,
            ..Default::default()
        }
    }
}

#[derive(Serialize)]
struct ToolResult<'a> {
    answers: Vec<ToolAnswer<'a>>,
}

#[derive(Serialize)]
struct ToolAnswer<'a> {
    id: &'a str,
    selected: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    custom: Option<&'a str>,
}

/// The answers as the compact JSON the model receives, e.g.
/// `{"answers":[{"id":"db","selected":["Postgres"]}]}`.
pub fn answers_text(answers: &[QuestionAnswer]) -> String {
    let result = ToolResult {
        answers: answers
            .iter()
            .map(|a| ToolAnswer {
                id: &a.id,
                selected: &a.selected,
                custom: a.custom.as_deref(),
            })
            .collect(),
    };
    serde_json::to_string(&result).unwrap_or_else(|e| format!("Error: {e}"))
}

/// A parse error as a model can act on it: the field it is about (`questions[0].
/// options[1]`), then what is wrong, without serde's line and column (the arguments
/// are one line of JSON the model did not see as such).
fn where_and_what(error: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let inner = error.inner();
    let text = inner.to_string();
    let position = format!(" at line {} column {}", inner.line(), inner.column());
    let what = text.strip_suffix(&position).unwrap_or(&text);
    match error.path().to_string().as_str() {
        "." | "" => what.to_owned(),
        path => format!("{path}: {what}"),
    }
}

/// The questions of the model's arguments (JSON text), or the tool output refusing
/// them: not the schema's shape (a parse error, unknown fields included), or no
/// question at all (EMPTY_QUESTIONS). For executors of the tool other than
/// [`AskUserQuestion`], such as an MCP server.
pub fn parse_arguments(arguments: &str) -> Result<Vec<Question>, ToolOutput> {
    let mut json = serde_json::Deserializer::from_str(arguments);
    let arguments: Arguments = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        ToolOutput::failed(
            Reason::BadRequest,
            Code::InvalidArgument,
            &format!("invalid arguments: {}", where_and_what(&e)),
        )
    })?;
    if arguments.questions.is_empty() {
        return Err(ToolOutput::failed(
            Reason::EmptyQuestions,
            Code::InvalidArgument,
            EMPTY_QUESTIONS_TEXT,
        ));
    }
    Ok(arguments
        .questions
        .into_iter()
        .map(Question::from)
        .collect())
}

/// The model-facing text of EMPTY_QUESTIONS (docs/protocol.md "Errors"; fixed byte for byte).
const EMPTY_QUESTIONS_TEXT: &str = "ask_user_question requires at least one question";
/// The model-facing text of ASK_ABORTED (fixed byte for byte).
pub const ASK_ABORTED_TEXT: &str = "ask_user_question was aborted before the user answered";
/// How long an abort waits for the server to resolve the ask ABORTED.
const ABORT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one tool call gave: the text the model reads and, for a failure, the failure
/// as data, for the program around the model to route on without matching strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The tool result text: the answers as compact JSON, or `Error: <message>`.
    pub text: String,
    /// Why the call failed; `None` when the text holds the answers.
    pub error: Option<ToolError>,
}

/// A failed `ask_user_question` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolError {
    /// askgate's reason, e.g. [`Reason::AskAborted`] ([`Reason::Unspecified`] for a
    /// transport failure).
    pub reason: Reason,
    /// The gRPC code.
    pub code: Code,
}

impl ToolError {
    /// The reason's wire name, e.g. `ASK_ABORTED`.
    pub fn name(&self) -> &'static str {
        self.reason.as_str_name()
    }
}

impl ToolOutput {
    /// The answers, as the model reads them.
    pub fn answered(answers: &[QuestionAnswer]) -> Self {
        Self {
            text: answers_text(answers),
            error: None,
        }
    }

    /// A failure with this reason, code and model-facing message.
    pub fn failed(reason: Reason, code: Code, message: &str) -> Self {
        Self {
            text: format!("Error: {message}"),
            error: Some(ToolError { reason, code }),
        }
    }

    /// A failed call, with the server's message (the fixed texts of docs/protocol.md "Errors").
    pub fn from_error(error: &Error) -> Self {
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
                Err(error) => ToolOutput::from_error(&error),
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
        for question in parse_arguments(arguments)? {
            ask = ask.question(question);
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

    fn parse(json: &str) -> Result<Arguments, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn the_documented_shape_parses() {
        let args = parse(
            r#"{"questions":[{"id":"a","question":"Q?","header":"H",
                "options":[{"label":"x","description":"d"},{"label":"y"}],"multi_select":true},
                {"id":"b","question":"Free?"}]}"#,
        )
        .expect("valid");
        assert_eq!(args.questions.len(), 2);
        let q = Question::from(args.questions.into_iter().next().expect("one"));
        assert!(q.multi_select);
        assert_eq!(q.options[1].label, "y");
    }

    #[test]
    fn fields_of_other_tools_are_refused() {
        for field in [
            r#"{"questions":[{"id":"a","question":"Q?","options":[{"label":"x","value":"1"}]}]}"#,
            r#"{"questions":[{"id":"a","question":"Q?","options":[{"label":"x","recommended":true}]}]}"#,
            r#"{"questions":[{"id":"a","question":"Q?","allow_custom":true}]}"#,
            r#"{"questions":[{"id":"a","question":"Q?","options":[{"label":"x","desc":"d"}]}]}"#,
            r#"{"questions":[],"extra":1}"#,
        ] {
            let err = parse(field).expect_err(field);
            assert!(err.contains("unknown field"), "{err}");
        }
    }

    fn property_names(object: &Value) -> Vec<&str> {
        let mut names: Vec<&str> = object["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names
    }

    #[test]
    fn the_schema_closes_every_object_and_names_only_the_documented_fields() {
        let schema = input_schema();
        assert_eq!(schema["additionalProperties"], false);
        let question = &schema["properties"]["questions"]["items"];
        assert_eq!(question["additionalProperties"], false);
        assert_eq!(
            property_names(question),
            ["header", "id", "multi_select", "options", "question"]
        );
        let option = &question["properties"]["options"]["items"];
        assert_eq!(option["additionalProperties"], false);
        assert_eq!(property_names(option), ["description", "label"]);
        assert_eq!(definition()["name"], NAME);
    }

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

    mod properties {
        use proptest::prelude::*;
        use serde_json::Value;

        use super::*;

        /// JSON of any shape, biased towards the tool's own field names.
        fn json() -> impl Strategy<Value = Value> {
            let key = prop_oneof![
                Just("questions".to_owned()),
                Just("id".to_owned()),
                Just("question".to_owned()),
                Just("options".to_owned()),
                Just("label".to_owned()),
                Just("multi_select".to_owned()),
                "\\PC{0,6}",
            ];
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                "\\PC{0,12}".prop_map(Value::String),
            ];
            leaf.prop_recursive(4, 48, 6, move |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::btree_map(key.clone(), inner, 0..6)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn check(arguments: &str) -> Result<(), TestCaseError> {
            match parse_arguments(arguments) {
                Ok(questions) => prop_assert!(!questions.is_empty()),
                Err(refused) => {
                    prop_assert!(refused.text.starts_with("Error: "));
                    let reason = refused.error.map(|e| e.reason);
                    prop_assert!(
                        matches!(reason, Some(Reason::BadRequest | Reason::EmptyQuestions)),
                        "{reason:?}"
                    );
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            /// Whatever the model sends: no panic, and either questions to ask or a
            /// refusal with a routable reason.
            #[test]
            fn any_arguments_give_questions_or_a_routable_refusal(
                value in json(),
                text in "\\PC{0,40}",
            ) {
                check(&value.to_string())?;
                check(&text)?;
            }
        }
    }

    /// What the description tells the model about asking well, pinned here and in
    /// the Python and TypeScript SDKs' tests with the same sentences: a change to
    /// client/ask_user_question.json that drops one fails all three.
    const GUIDANCE: [&str; 4] = [
        "Ask everything you need in one call.",
        "Keep each question short and specific.",
        "Prefer options (2 to 4, each with a short description of what it means) over open \
         questions; the user can always answer in their own words instead.",
        "To recommend an option, put it first and end its label with \" (Recommended)\"",
    ];

    #[test]
    fn the_description_tells_the_model_how_to_ask() {
        for sentence in GUIDANCE {
            assert!(description().contains(sentence), "{sentence}");
        }
    }

    #[test]
    fn answers_are_compact_json() {
        let answers = vec![
            QuestionAnswer {
                id: "db".into(),
                selected: vec!["Postgres".into()],
                custom: None,
            },
            QuestionAnswer {
                id: "name".into(),
                selected: vec![],
                custom: Some("askgate".into()),
            },
        ];
        assert_eq!(
            answers_text(&answers),
            r#"{"answers":[{"id":"db","selected":["Postgres"]},{"id":"name","selected":[],"custom":"askgate"}]}"#
        );
    }
}
