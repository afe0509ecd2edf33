//! The few Bot API methods askgate calls (`getMe`, `setWebhook`, `sendMessage`,
//! `editMessageText`, `editMessageReplyMarkup`, `answerCallbackQuery`): a POST of a
//! JSON body to `{base}/bot{token}/{method}`, and Telegram's `{"ok", "result"}` or
//! `{"ok": false, "description"}` reply. A small client over askgate's own HTTP sender
//! rather than a Telegram library: six methods do not justify a second HTTP stack in
//! the build (docs/telegram.md).
//!
//! The token is part of the URL path, so no error text here names the URL.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::{
    egress::send::{Sender, Target},
    secret::Secret,
};

/// Telegram's default API base.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

/// Bytes of a reply read at most (`sendMessage` echoes the message: 4,096 characters
/// and its keyboard).
const MAX_REPLY_BYTES: usize = 1024 * 1024;

/// A Bot API client.
#[derive(Clone)]
pub struct BotApi {
    base: String,
    sender: Sender,
}

impl BotApi {
    pub fn new(base: &str, timeout: Duration) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        Target::parse(&format!("{base}/botTOKEN/getMe"))?;
        Ok(Self {
            base,
            // The base is the operator's (a proxy, or a test's fake): it may be private.
            sender: Sender::new(true, timeout).with_max_response(MAX_REPLY_BYTES),
        })
    }

    /// Calls `method` with `body` as the bot `token`; the reply's `result` when
    /// Telegram says `ok`, else what went wrong (Telegram's description, an HTTP
    /// status, a connection error).
    pub async fn call(&self, token: &Secret, method: &str, body: &Value) -> Result<Value, String> {
        let target = Target::parse(&format!("{}/bot{}/{method}", self.base, token.expose()))
            .map_err(|_| format!("Telegram {method}: the bot token does not fit in a URL"))?;
        let headers = [("content-type", "application/json".to_owned())];
        let (status, reply) = self
            .sender
            .post(&target, &headers, Bytes::from(body.to_string()))
            .await
            .map_err(|e| format!("Telegram {method}: {e}"))?;
        let reply: Value = match serde_json::from_slice(&reply) {
            Ok(reply) => reply,
            Err(_) => return Err(format!("Telegram {method}: HTTP {}", status.as_u16())),
        };
        if reply.get("ok").and_then(Value::as_bool) == Some(true) && status.is_success() {
            return Ok(reply.get("result").cloned().unwrap_or(Value::Null));
        }
        let description = reply
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("no description");
        Err(format!(
            "Telegram {method}: HTTP {}: {}",
            status.as_u16(),
            crate::domain::echo(description)
        ))
    }
}
