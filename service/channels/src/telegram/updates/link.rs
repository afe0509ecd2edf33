//! Linking a Telegram account to a person (docs/approvals.md "People"): `/link CODE`,
//! the one-time code the person took from `People.StartLink`, sent to the bot in a
//! private chat.

use serde_json::{Value, json};

use super::{Updates, ok};
use crate::{
    backend::{audit_log::Audit, hooks::records::EndpointRecord, hooks::records::PersonRecord},
    domain::{Resolver, model::TELEGRAM_CHANNEL},
    ingress::Reply,
    telegram::render,
};

/// The code of a `/link CODE` (or `/link@bot CODE`) message.
pub(super) fn command(message: &Value) -> Option<&str> {
    let text = message["text"].as_str()?.trim();
    let (command, code) = text.split_once(char::is_whitespace)?;
    let command = command.split('@').next().unwrap_or_default();
    (command == "/link").then(|| code.trim())
}

impl Updates {
    /// `/link CODE` in a private chat with the bot: the sender's Telegram account joins
    /// the person who asked for the code (docs/approvals.md "People"). Only in a
    /// private chat: a code shown in a group could be taken by anyone there.
    pub(super) async fn link(&self, bot: &EndpointRecord, message: &Value, code: &str) -> Reply {
        let chat = &message["chat"];
        let text = match (chat["type"].as_str(), message["from"]["id"].as_i64()) {
            (Some("private"), Some(user)) => {
                let identity = format!("telegram:{user}");
                let audit = |person: &PersonRecord| {
                    let by = Resolver::new(&identity, TELEGRAM_CHANNEL);
                    let details = serde_json::json!({ "id": person.id, "linked": identity });
                    Audit::admin_entry(&bot.tenant, &by, "person.linked", details)
                };
                let store = self.hooks.store();
                match crate::backend::people::link(&**store, &bot.tenant, code, &identity, audit)
                    .await
                {
                    Ok(person) => {
                        format!(
                            "Linked: your answers here count as {}.",
                            person.shown_name()
                        )
                    }
                    Err(e) => crate::channel::chat::refusal(&e),
                }
            }
            _ => "Send /link CODE to the bot in a private chat.".to_owned(),
        };
        let reply = json!({
            "chat_id": chat["id"],
            "text": render::escape(&render::cut(&text, render::MAX_NOTICE)),
            "parse_mode": "HTML",
        });
        self.call(bot, "sendMessage", reply).await;
        ok()
    }
}
