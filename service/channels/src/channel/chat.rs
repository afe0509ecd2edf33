//! What the chat channels (Slack, Telegram, email, ntfy) build on alike: a delivery's
//! body (the ask, and its resolution for an update) and the record of a connection.

use crate::domain::Error;

/// What a chat channel's delivery carries: the ask, and (for an update) its
/// resolution, in proto3 JSON.
pub fn chat_body(
    requested: &askgate_proto::v1::Requested,
    resolved: Option<&askgate_proto::v1::Resolved>,
) -> Result<String, Error> {
    let failed = |e: anyhow::Error| Error::Internal(format!("a chat delivery's body: {e:#}"));
    let mut body = serde_json::json!({
        "requested": crate::protojson::to_value("askgate.v1.Requested", requested).map_err(failed)?,
    });
    if let Some(resolved) = resolved {
        body["resolved"] =
            crate::protojson::to_value("askgate.v1.Resolved", resolved).map_err(failed)?;
    }
    Ok(body.to_string())
}

/// What [`chat_body`] made, read back.
pub fn read_chat_body(
    body: &str,
) -> Result<
    (
        askgate_proto::v1::Requested,
        Option<askgate_proto::v1::Resolved>,
    ),
    String,
> {
    let corrupt = |e: anyhow::Error| format!("corrupt delivery: {e:#}");
    let body: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("corrupt delivery: {e}"))?;
    let requested = crate::protojson::from_value("askgate.v1.Requested", &body["requested"])
        .map_err(corrupt)?;
    let resolved = match body.get("resolved") {
        Some(resolved) => {
            Some(crate::protojson::from_value("askgate.v1.Resolved", resolved).map_err(corrupt)?)
        }
        None => None,
    };
    Ok((requested, resolved))
}

/// The record of a chat channel a tenant connects (a Slack app, a Telegram bot; its
/// target set by the caller): it takes each ask and its resolution, filtered by
/// session prefix and labels, and provides for its sessions unless told otherwise.
pub fn chat_endpoint(
    id: String,
    tenant: &str,
    description: String,
    labels: std::collections::HashMap<String, String>,
    session_prefix: String,
    provides: Option<bool>,
) -> crate::backend::hooks::records::EndpointRecord {
    use crate::backend::hooks::records::{EndpointRecord, EventType};
    EndpointRecord {
        id,
        tenant: tenant.to_owned(),
        url: String::new(),
        events: vec![EventType::Requested, EventType::Resolved],
        description,
        labels,
        secret: String::new(),
        provides: provides.unwrap_or(true),
        created_ms: crate::channel::clock::now_ms(),
        session_prefix,
        slack: None,
        channel: None,
    }
}
