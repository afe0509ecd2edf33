//! Protobuf's JSON, through the compiled descriptors: for the CLI the same JSON grpcurl
//! reads and prints (so files work with both), and for webhook payloads the canonical
//! proto3 mapping.

use std::sync::OnceLock;

use anyhow::{Context as _, anyhow};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};

fn pool() -> anyhow::Result<&'static DescriptorPool> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(askgate_proto::FILE_DESCRIPTOR_SET).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| anyhow!("failed to load the askgate descriptors: {e}"))
}

fn descriptor(name: &str) -> anyhow::Result<MessageDescriptor> {
    pool()?
        .get_message_by_name(name)
        .with_context(|| format!("unknown message {name}"))
}

/// Encodes `message` (of protobuf type `name`, e.g. `askgate.v1.AskResponse`) as one
/// line of JSON with proto field names.
pub fn to_json<T: prost::Message>(name: &str, message: &T) -> anyhow::Result<String> {
    let mut dynamic = DynamicMessage::new(descriptor(name)?);
    dynamic
        .transcode_from(message)
        .context("failed to transcode to JSON")?;
    let mut out = serde_json::Serializer::new(Vec::new());
    dynamic
        .serialize_with_options(
            &mut out,
            &SerializeOptions::new().use_proto_field_name(true),
        )
        .context("failed to write JSON")?;
    String::from_utf8(out.into_inner()).context("JSON is not UTF-8")
}

/// Decodes JSON (proto or camelCase field names) into a message of type `name`.
pub fn from_json<T: prost::Message + Default>(name: &str, json: &str) -> anyhow::Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let dynamic = DynamicMessage::deserialize(descriptor(name)?, &mut deserializer)
        .with_context(|| format!("invalid {name} JSON"))?;
    deserializer
        .end()
        .with_context(|| format!("trailing characters after the {name} JSON"))?;
    dynamic.transcode_to().context("failed to transcode JSON")
}

/// `message` (of protobuf type `name`) as a JSON value in the canonical proto3 mapping
/// (lowerCamelCase names, defaults left out): what webhook payloads carry.
pub fn to_value<T: prost::Message>(name: &str, message: &T) -> anyhow::Result<serde_json::Value> {
    let mut dynamic = DynamicMessage::new(descriptor(name)?);
    dynamic
        .transcode_from(message)
        .context("failed to transcode to JSON")?;
    dynamic
        .serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new())
        .context("failed to write JSON")
}

/// Decodes a JSON value in the proto3 mapping into a message of type `name`.
pub fn from_value<T: prost::Message + Default>(
    name: &str,
    value: &serde_json::Value,
) -> anyhow::Result<T> {
    let dynamic = DynamicMessage::deserialize(descriptor(name)?, value)
        .with_context(|| format!("invalid {name} JSON"))?;
    dynamic.transcode_to().context("failed to transcode JSON")
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::{AskRequest, Unattended};

    use super::*;

    #[test]
    fn ask_requests_round_trip_through_json() {
        let json = r#"{"session_id":"s","questions":[{"id":"q","question":"Why?",
            "options":[{"label":"a","description":"first"}],"multiSelect":true}],
            "if_unattended":"HOLD"}"#;
        let request: AskRequest = from_json("askgate.v1.AskRequest", json).expect("parses");
        assert_eq!(request.session_id, "s");
        assert!(request.questions[0].multi_select);
        assert_eq!(request.if_unattended(), Unattended::Hold);
        let back = to_json("askgate.v1.AskRequest", &request).expect("encodes");
        let again: AskRequest = from_json("askgate.v1.AskRequest", &back).expect("parses back");
        assert_eq!(again, request);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = from_json::<AskRequest>("askgate.v1.AskRequest", r#"{"sesion_id":"s"}"#);
        assert!(err.is_err());
    }
}
