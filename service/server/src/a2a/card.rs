//! The agent card at [`AGENT_CARD_PATH`]: askgate as the A2A agent "a human", with
//! one skill, `ask_user_question`, whose DataPart input is the tool's schema.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use serde_json::json;

use crate::web::{Answers, body_of, plain, secured};

/// Where A2A clients find the card.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// The A2A protocol version the gRPC interface speaks.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The extension whose `params.input_schema` is the skill's input: the schema of the
/// DataPart a message carries.
pub const INPUT_SCHEMA_EXTENSION: &str = "urn:askgate:a2a:ask-user-question:v1";

/// Serves the card (GET only): 404 when the node serves no A2A. Every other request
/// goes on.
#[derive(Debug, Clone)]
pub struct AgentCardPage {
    /// `--a2a on`.
    enabled: bool,
    /// `--public-url`'s origin, if set: the interface's URL. Otherwise the request's
    /// own host is.
    public_url: Option<String>,
    /// `https` when the node serves TLS.
    scheme: &'static str,
    /// Whether calls need a credential (a bearer API key or JWT).
    authenticated: bool,
}

impl AgentCardPage {
    pub fn new(enabled: bool, public_url: Option<String>, tls: bool, authenticated: bool) -> Self {
        Self {
            enabled,
            public_url,
            scheme: if tls { "https" } else { "http" },
            authenticated,
        }
    }
}

impl Answers for AgentCardPage {
    fn answer<B>(&self, request: &Request<B>) -> Option<Response<tonic::body::Body>> {
        if request.uri().path() != AGENT_CARD_PATH || request.method() != Method::GET {
            return None;
        }
        if !self.enabled {
            return Some(plain(
                StatusCode::NOT_FOUND,
                "this server is no A2A agent (askgate serve --a2a on)\n",
            ));
        }
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()))
            .unwrap_or("localhost");
        let url = match &self.public_url {
            Some(origin) => origin.clone(),
            None => format!("{}://{host}", self.scheme),
        };
        Some(
            secured(Response::builder().status(StatusCode::OK))
                .header(header::CONTENT_TYPE, "application/json")
                // The URL may be the request's own host: not for shared caches.
                .header(header::CACHE_CONTROL, "no-store")
                .body(body_of(Bytes::from(card(&url, self.authenticated))))
                .expect("a valid response"),
        )
    }
}

/// The card, as ProtoJSON of the protocol's `AgentCard` (it passes through the
/// official types, so a field they do not have cannot slip in).
pub fn card(url: &str, authenticated: bool) -> String {
    let mut card = json!({
        "name": "askgate: a human",
        "description": "A human, reached through askgate: send a message whose DataPart \
            holds {\"questions\": [...]} (the ask_user_question tool's input); the task \
            works while the human decides and completes with a DataPart artifact of \
            their answers, or is canceled (with their reason) or fails.",
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": url,
            "protocolBinding": "GRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": {
            "streaming": true,
            "pushNotifications": false,
            "extendedAgentCard": false,
            "extensions": [{
                "uri": INPUT_SCHEMA_EXTENSION,
                "description": "params.input_schema: the JSON Schema of the DataPart \
                    the ask_user_question skill takes",
                "required": false,
                "params": { "input_schema": askgate_contract::tool::input_schema() },
            }],
        },
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{
            "id": askgate_contract::tool::NAME,
            "name": "Ask a human",
            "description": askgate_contract::tool::description(),
            "tags": ["human-in-the-loop", "approval", "questions"],
            "examples": [json!({
                "questions": [{
                    "id": "db",
                    "question": "Which database should the service use?",
                    "options": [{"label": "Postgres (Recommended)"}, {"label": "SQLite"}],
                }]
            }).to_string()],
            "inputModes": ["application/json"],
            "outputModes": ["application/json"],
        }],
    });
    if authenticated {
        card["securitySchemes"] = json!({
            "bearer": { "httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "an askgate API key or JWT with the agent role",
            }},
        });
        card["securityRequirements"] = json!([{ "schemes": { "bearer": { "list": [] } } }]);
    }
    let typed: a2a_pb::protojson::AgentCard =
        serde_json::from_value(card).expect("the card is an A2A AgentCard");
    // Checked as an AgentCard, served with the tool's schema as its one source has it:
    // a protobuf Struct holds numbers as doubles, which would turn `1` into `1.0`.
    let mut served = serde_json::to_value(&typed).expect("an AgentCard serializes");
    served["capabilities"]["extensions"][0]["params"]["input_schema"] =
        askgate_contract::tool::input_schema();
    served.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_is_an_agent_card_with_the_tools_schema() {
        for authenticated in [false, true] {
            let text = card("https://askgate.example.com", authenticated);
            let parsed: a2a_pb::protojson::AgentCard =
                serde_json::from_str(&text).expect("parses back");
            assert_eq!(parsed.supported_interfaces[0].protocol_binding, "GRPC");
            assert_eq!(parsed.skills[0].id, "ask_user_question");
            let value: serde_json::Value = serde_json::from_str(&text).expect("json");
            // The schema as its one source has it: `1`, never `1.0`.
            assert_eq!(
                value["capabilities"]["extensions"][0]["params"]["input_schema"],
                askgate_contract::tool::input_schema()
            );
            assert!(text.contains(r#""minItems":1,"#), "{text}");
            assert!(!text.contains(r#""minItems":1.0"#), "{text}");
            assert_eq!(value.get("securitySchemes").is_some(), authenticated);
        }
    }
}
