//! The few Slack Web API methods askgate calls (`auth.test`, `chat.postMessage`,
//! `chat.update`, `views.open`, and `conversations.history`, which takes a form): a
//! POST with the app's bot token, and Slack's `{"ok": ..., "error": ...}` reply. The base URL is the operator's
//! (`--slack-api-url`, `https://slack.com/api` by default), so it may be on a private
//! address (a proxy, or a test's fake).

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::{
    egress::send::{Sender, Target},
    secret::Secret,
};

/// Slack's default API base.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

/// Bytes of a Slack reply read at most (`chat.postMessage` echoes the message).
const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// A Slack Web API client.
#[derive(Clone)]
pub struct WebApi {
    base: String,
    sender: Sender,
}

impl WebApi {
    pub fn new(base: &str, timeout: Duration) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        Target::parse(&format!("{base}/auth.test"))?;
        Ok(Self {
            base,
            sender: Sender::new(true, timeout).with_max_response(MAX_REPLY_BYTES),
        })
    }

    /// Calls `method` with `body`; Slack's reply when it says `ok`, else what went wrong
    /// (Slack's error code, an HTTP status, a connection error).
    pub async fn call(&self, token: &Secret, method: &str, body: &Value) -> Result<Value, String> {
        let headers = [("authorization", format!("Bearer {}", token.expose()))];
        self.send(method, &headers, Bytes::from(body.to_string()))
            .await
    }

    /// Calls `method` with form-encoded `args`: for the methods that take no JSON body
    /// (`conversations.history`).
    pub async fn call_form(
        &self,
        token: &Secret,
        method: &str,
        args: &[(&str, &str)],
    ) -> Result<Value, String> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(args)
            .finish();
        let headers = [
            ("authorization", format!("Bearer {}", token.expose())),
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
        ];
        self.send(method, &headers, Bytes::from(body)).await
    }

    async fn send(
        &self,
        method: &str,
        headers: &[(&'static str, String)],
        body: Bytes,
    ) -> Result<Value, String> {
        let target = Target::parse(&format!("{}/{method}", self.base))?;
        let (status, reply) = self
            .sender
            .post(&target, headers, body)
            .await
            .map_err(|e| format!("Slack {method}: {e}"))?;
        if status == http::StatusCode::TOO_MANY_REQUESTS {
            return Err(format!("Slack {method}: rate limited"));
        }
        if !status.is_success() {
            return Err(format!("Slack {method}: HTTP {}", status.as_u16()));
        }
        let reply: Value = serde_json::from_slice(&reply)
            .map_err(|e| format!("Slack {method}: an unreadable reply: {e}"))?;
        match reply.get("ok").and_then(Value::as_bool) {
            Some(true) => Ok(reply),
            _ => {
                let error = reply
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("no error code");
                Err(format!("Slack {method}: {}", crate::domain::echo(error)))
            }
        }
    }
}
