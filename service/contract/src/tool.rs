//! The model-facing `ask_user_question` tool: its definition (a JSON Schema the model
//! fills in, one file for every SDK), the parser of a model's arguments, and the result
//! text the model reads back: the answers JSON, or `Error: <message>` with the failure
//! as data. The SDKs' executors and askgate's MCP server and A2A agent all use these.

use askgate_proto::v1::{Action, ErrorReason as Reason, Question, QuestionAnswer, QuestionOption};
use serde::Deserialize;
use serde_json::Value;
use tonic::Code;

pub use crate::answers::answers_text;

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
    /// The action the answers approve, when the questions ask permission for one.
    #[serde(default)]
    action: Option<ToolAction>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolAction {
    name: String,
    #[serde(default)]
    arguments: Option<serde_json::Map<String, Value>>,
}

/// The model's arguments as an ask: its questions, and the action they approve (the
/// request's `action`, which a receipt binds and the tenant's policy may decide).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAsk {
    pub questions: Vec<Question>,
    pub action: Option<Action>,
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

/// The ask of the model's arguments (JSON text), or the tool output refusing them:
/// not the schema's shape (a parse error, unknown fields included), or no question at
/// all (EMPTY_QUESTIONS). For executors of the tool other than the SDKs' executors,
/// such as an MCP server.
pub fn parse_ask(arguments: &str) -> Result<ToolAsk, ToolOutput> {
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
    let action = arguments.action.map(|action| Action {
        name: action.name,
        arguments_json: Value::Object(action.arguments.unwrap_or_default()).to_string(),
        approving_answers: Vec::new(),
    });
    Ok(ToolAsk {
        questions: arguments
            .questions
            .into_iter()
            .map(Question::from)
            .collect(),
        action,
    })
}

/// The model-facing text of EMPTY_QUESTIONS (docs/protocol.md "Errors"; fixed byte for byte).
const EMPTY_QUESTIONS_TEXT: &str = "ask_user_question requires at least one question";
/// The model-facing text of ASK_ABORTED (fixed byte for byte).
pub const ASK_ABORTED_TEXT: &str = "ask_user_question was aborted before the user answered";
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
    fn an_action_becomes_the_asks_action() {
        let ask = parse_ask(
            r#"{"questions":[{"id":"a","question":"Run it?","options":[{"label":"Run"}]}],
                "action":{"name":"Bash","arguments":{"command":"git push"}}}"#,
        )
        .expect("valid");
        let action = ask.action.expect("an action");
        assert_eq!(action.name, "Bash");
        assert_eq!(action.arguments_json, r#"{"command":"git push"}"#);
        let bare = parse_ask(r#"{"questions":[{"id":"a","question":"Q?"}],"action":{"name":"x"}}"#)
            .expect("valid");
        assert_eq!(bare.action.expect("an action").arguments_json, "{}");
        let refused =
            parse_ask(r#"{"questions":[{"id":"a","question":"Q?"}],"action":{"tool":"x"}}"#)
                .expect_err("no name, and an unknown field");
        assert!(
            refused.text.starts_with("Error: invalid arguments: action"),
            "{}",
            refused.text
        );
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
        assert_eq!(property_names(&schema), ["action", "questions"]);
        let action = &schema["properties"]["action"];
        assert_eq!(action["additionalProperties"], false);
        assert_eq!(property_names(action), ["arguments", "name"]);
        let option = &question["properties"]["options"]["items"];
        assert_eq!(option["additionalProperties"], false);
        assert_eq!(property_names(option), ["description", "label"]);
        assert_eq!(definition()["name"], NAME);
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
            match parse_ask(arguments) {
                Ok(ask) => prop_assert!(!ask.questions.is_empty()),
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
    /// service/contract/ask_user_question.json that drops one fails all three.
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
}
