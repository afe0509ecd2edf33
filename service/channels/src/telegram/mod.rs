//! Answering from Telegram (docs/telegram.md). A tenant connects a bot (its token,
//! sealed with the server's key, and a chat); askgate points the bot's webhook at
//! itself, with a secret token of its own. From then on:
//! - each `requested` of the tenant that the bot's filter lets through becomes a
//!   delivery of the webhook machinery (leased, retried, any node on Redis) that
//!   sends the ask to the chat (HTML, an inline keyboard) and notes the message;
//! - the ask's `resolved`, from whatever channel, becomes a delivery that edits that
//!   message: who answered what, or how it ended, and no keyboard;
//! - clicks and replies come back to `/telegram/webhook/{bot id}`
//!   ([`crate::telegram`]), and go through `Answer` or `Cancel` like any other human's,
//!   as `telegram:<user id>`.

pub mod admin;
pub mod api;
pub mod render;
pub mod updates;

use std::{sync::Arc, time::Duration};

use askgate_core::domain::{approval, connect, model::TELEGRAM_CHANNEL};
use askgate_proto::v1::{ConnectTelegramRequest, Requested, TelegramBot};
use serde_json::{Value, json};
use tracing::{debug, warn};
use uuid::Uuid;

use self::api::BotApi;
use crate::channel::{About, Channel, Checks, Connector, Outbound};
use crate::{
    backend::hooks::{
        HookStore,
        records::{ChannelTarget, DeliveryRecord, EndpointRecord, EventType, TelegramTarget},
    },
    domain::{Error, Limits},
    sealed::SealingKey,
    secret::Secret,
};

/// Where Telegram sends a bot's updates, under the public URL.
pub const WEBHOOK_PATH: &str = "/telegram/webhook/";
/// How long where a message went, and which ask a key names, are remembered: past
/// any ask's life.
const NOTE_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// Characters of the random part of a webhook's secret token.
const SECRET_RANDOM_CHARS: usize = 43;

/// Which secret of a bot, in the associated data of its sealing.
fn context(tenant: &str, bot: &str, what: &str) -> String {
    json!(["telegram", tenant, bot, what]).to_string()
}

/// The note of where an ask's message went: `{"message_id"}`.
fn posted_key(bot: &str, rpc_id: &str) -> String {
    format!("telegram:{bot}:{rpc_id}")
}

/// The note of how an ask ended (`answered by telegram:42`), which a late click is told
/// when the engine no longer knows.
pub(crate) fn settled_note(bot: &str, rpc_id: &str) -> String {
    format!("telegram-settled:{bot}:{rpc_id}")
}

/// The note that an attempt to post an ask's message began.
fn attempt_key(bot: &str, rpc_id: &str) -> String {
    format!("telegram-post:{bot}:{rpc_id}")
}

/// The note of which ask a key in a bot's buttons names: `[session, rpc_id]`.
pub(crate) fn ask_note(bot: &str, key: &str) -> String {
    format!("telegram-ask:{bot}:{key}")
}

/// The note of what a prompt for a forced reply asks for: `{"key", "prompted"}`.
pub(crate) fn prompt_note(bot: &str, message_id: i64) -> String {
    format!("telegram-prompt:{bot}:{message_id}")
}

/// A secret token for `setWebhook`: the tenant (base64url) and 43 random characters,
/// all of Telegram's alphabet (`A-Z a-z 0-9 _ -`, at most 256). Telegram sends it with
/// every update; the tenant in it finds the bot's record, whose sealed copy it must
/// equal.
fn webhook_secret(tenant: &str) -> Result<String, Error> {
    use base64::Engine as _;
    let mut random = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut random)
        .map_err(|_| Error::Internal("no randomness for a webhook secret".into()))?;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    Ok(format!(
        "{}{}",
        engine.encode(tenant),
        engine.encode(random)
    ))
}

/// The tenant a webhook's secret token names, if it is one of askgate's.
pub fn secret_tenant(token: &str) -> Option<String> {
    use base64::Engine as _;
    let tenant = token.get(..token.len().checked_sub(SECRET_RANDOM_CHARS)?)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tenant)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// A chat id as the Bot API takes it: a number, or `@channelusername`.
fn chat(chat_id: &str) -> Value {
    match chat_id.parse::<i64>() {
        Ok(id) => id.into(),
        Err(_) => chat_id.into(),
    }
}

/// Telegram for the whole server: its Bot API, the public URL updates come to, and the
/// key that seals bots' secrets.
#[derive(Clone)]
pub struct Telegram {
    api: BotApi,
    /// `--public-url`'s origin: where Telegram sends updates.
    public: Option<String>,
    key: Option<Arc<SealingKey>>,
}

impl Telegram {
    pub fn new(
        api_url: &str,
        timeout: Duration,
        public: Option<&str>,
        key: Option<Arc<SealingKey>>,
    ) -> Result<Self, String> {
        Ok(Self {
            api: BotApi::new(api_url, timeout)?,
            public: public.map(str::to_owned),
            key,
        })
    }

    /// The console's inbox, linked from asks Telegram may not answer.
    fn console(&self) -> Option<String> {
        self.public.as_ref().map(|p| format!("{p}/console/#/inbox"))
    }

    fn key(&self) -> Result<&SealingKey, Error> {
        self.key.as_deref().ok_or_else(|| {
            Error::PermissionDenied(
                "this server keeps no Telegram secrets: start every node with --secret-key-file"
                    .into(),
            )
        })
    }

    /// A bot's secret (`bot_token` or `webhook_secret`), opened.
    pub(crate) fn open(&self, bot: &EndpointRecord, what: &str) -> Result<Secret, String> {
        let target = bot.telegram().ok_or("not a Telegram bot")?;
        let sealed = match what {
            "bot_token" => &target.bot_token,
            "webhook_secret" => &target.webhook_secret,
            other => return Err(format!("a Telegram bot has no secret {other}")),
        };
        let key = self
            .key
            .as_deref()
            .ok_or("this server has no --secret-key-file")?;
        key.open(&context(&bot.tenant, &bot.id, what), sealed)
            .map_err(|e| e.to_string())
    }

    /// Calls a Bot API method as the bot.
    pub(crate) async fn call(
        &self,
        bot: &EndpointRecord,
        method: &str,
        body: &Value,
    ) -> Result<Value, String> {
        let token = self.open(bot, "bot_token")?;
        self.api.call(&token, method, body).await
    }

    /// The webhook URL of bot `id`: Telegram takes only HTTPS, on ports 443, 80, 88
    /// and 8443.
    fn webhook_url(&self, id: &str) -> Result<String, Error> {
        let public = self.public.as_deref().ok_or_else(|| {
            Error::PermissionDenied(
                "Telegram sends updates to this server's public URL: start every node with --public-url https://…"
                    .into(),
            )
        })?;
        let port_ok = match public.strip_prefix("https://") {
            Some(host) => match host.rsplit_once(':') {
                Some((_, port)) if !host.ends_with(']') => {
                    matches!(port, "443" | "80" | "88" | "8443")
                }
                _ => true,
            },
            None => false,
        };
        if !port_ok {
            return Err(Error::PermissionDenied(format!(
                "Telegram sends updates only to HTTPS on port 443, 80, 88 or 8443: --public-url is {public}"
            )));
        }
        Ok(format!("{public}{WEBHOOK_PATH}{id}"))
    }

    /// Checks a connect request and the bot token with Telegram (`getMe`), points the
    /// bot's webhook here (`setWebhook`, with a new secret token), and makes the bot's
    /// record with its secrets sealed.
    async fn checked_record(
        &self,
        tenant: &str,
        request: ConnectTelegramRequest,
        limits: &Limits,
    ) -> Result<EndpointRecord, Error> {
        let key = self.key()?;
        let violations = connect::telegram_bot(&request, limits);
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        let id = format!("tg_{}", Uuid::now_v7().simple());
        let url = self.webhook_url(&id)?;
        let token = Secret::new(request.bot_token);
        let me = self
            .api
            .call(&token, "getMe", &json!({}))
            .await
            .map_err(|e| {
                Error::bad_request("bot_token", format!("Telegram refused the token: {e}"))
            })?;
        let secret = Secret::new(webhook_secret(tenant)?);
        let webhook = json!({
            "url": url,
            "secret_token": secret.expose(),
            "allowed_updates": ["message", "callback_query"],
            "drop_pending_updates": true,
        });
        self.api
            .call(&token, "setWebhook", &webhook)
            .await
            .map_err(|e| {
                Error::bad_request("bot_token", format!("Telegram refused the webhook: {e}"))
            })?;
        let seal = |what: &str, secret: &Secret| {
            key.seal(&context(tenant, &id, what), secret)
                .map_err(|e| Error::Internal(e.to_string()))
        };
        let target = TelegramTarget {
            bot_user_id: me["id"].as_i64().unwrap_or_default(),
            bot_username: render::cut(me["username"].as_str().unwrap_or_default(), 64),
            chat_id: request.chat_id.trim().to_owned(),
            bot_token: seal("bot_token", &token)?,
            webhook_secret: seal("webhook_secret", &secret)?,
        };
        Ok(EndpointRecord {
            channel: Some(ChannelTarget::Telegram(target)),
            ..crate::channel::chat::chat_endpoint(
                id,
                tenant,
                request.description,
                request.labels,
                request.session_prefix,
                request.provides,
            )
        })
    }

    /// One attempt of a Telegram delivery: send the ask's message (a message noted as
    /// sent is not sent again), or edit it once resolved.
    async fn attempt(
        &self,
        store: &dyn HookStore,
        bot: &EndpointRecord,
        target: &TelegramTarget,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let (requested, resolved) = crate::channel::chat::read_chat_body(&delivery.body)?;
        let posted_at = posted_key(&bot.id, &delivery.rpc_id);
        let posted = store.note(&posted_at).await.map_err(|e| e.to_string())?;
        match delivery.event_type {
            EventType::Requested if posted.is_some() => Ok(()),
            EventType::Requested => self.post(store, bot, target, &requested, &posted_at).await,
            EventType::Resolved => {
                let Some(posted) = posted else {
                    // The post is still to come (or failed for good): retried until then.
                    return Err("the question's message is not sent yet".into());
                };
                let place: Value =
                    serde_json::from_str(&posted).map_err(|e| format!("corrupt note: {e}"))?;
                let resolved = resolved.ok_or("corrupt delivery: no resolution")?;
                let settled = format!(
                    "{} by {}",
                    resolved.reason().as_str_name().to_lowercase(),
                    resolved.resolved_by
                );
                store
                    .put_note(
                        &settled_note(&bot.id, &delivery.rpc_id),
                        &settled,
                        NOTE_TTL_MS,
                        false,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                let mut message = render::resolved_message(&requested, &resolved);
                message["chat_id"] = chat(&target.chat_id);
                message["message_id"] = place["message_id"].clone();
                match self.call(bot, "editMessageText", &message).await {
                    Ok(_) => {}
                    // Edited already (an earlier attempt), or deleted by someone.
                    Err(e) if e.contains("message is not modified") => {}
                    Err(e) if e.contains("message to edit not found") => {
                        debug!(bot = %bot.id, rpc_id = %delivery.rpc_id, "the message was deleted: {e}");
                    }
                    Err(e) => return Err(e),
                }
                debug!(bot = %bot.id, rpc_id = %delivery.rpc_id, "edited in Telegram");
                Ok(())
            }
            other => Err(format!("a Telegram bot does not take {}", other.as_str())),
        }
    }

    /// Sends an ask's message and notes where it went. The note of its key comes
    /// first, so a click on a message whose sending was never heard of still finds
    /// its ask.
    async fn post(
        &self,
        store: &dyn HookStore,
        bot: &EndpointRecord,
        target: &TelegramTarget,
        requested: &Requested,
        posted_at: &str,
    ) -> Result<(), String> {
        let key = render::ask_key(&bot.tenant, &requested.session_id, &requested.rpc_id);
        let names = json!([requested.session_id, requested.rpc_id]).to_string();
        store
            .put_note(&ask_note(&bot.id, &key), &names, NOTE_TTL_MS, false)
            .await
            .map_err(|e| e.to_string())?;
        let attempt = attempt_key(&bot.id, &requested.rpc_id);
        let first = store
            .put_note(&attempt, "1", NOTE_TTL_MS, true)
            .await
            .map_err(|e| e.to_string())?;
        if !first {
            // Telegram keeps no idempotency key, and a bot cannot read a chat's
            // history: an attempt that died after Telegram took its message cannot be
            // told from one that died before (docs/telegram.md).
            warn!(bot = %bot.id, rpc_id = %requested.rpc_id, "an earlier attempt to send this ask was not heard back from: sending it (again)");
        }
        let mut message = render::question_message(
            &key,
            requested,
            approval::may_answer(requested, TELEGRAM_CHANNEL, true),
            approval::may_resolve(requested, TELEGRAM_CHANNEL),
            self.console().as_deref(),
        );
        message["chat_id"] = chat(&target.chat_id);
        let sent = self.call(bot, "sendMessage", &message).await?;
        let message_id = sent["message_id"]
            .as_i64()
            .ok_or("Telegram sendMessage: no message_id in the reply")?;
        let place = json!({ "message_id": message_id });
        store
            .put_note(posted_at, &place.to_string(), NOTE_TTL_MS, false)
            .await
            .map_err(|e| e.to_string())?;
        debug!(bot = %bot.id, rpc_id = %requested.rpc_id, "sent to Telegram");
        Ok(())
    }
}

/// A bot as the admin API shows it: no secrets.
pub fn bot_of(record: &EndpointRecord) -> Option<TelegramBot> {
    let target = record.telegram()?;
    Some(TelegramBot {
        id: record.id.clone(),
        bot_user_id: target.bot_user_id,
        bot_username: target.bot_username.clone(),
        chat_id: target.chat_id.clone(),
        labels: record.labels.clone(),
        session_prefix: record.session_prefix.clone(),
        description: record.description.clone(),
        provides: record.provides,
        created_at: Some(crate::channel::clock::timestamp(record.created_ms)),
    })
}

/// The telegram channel, as the registry lists it.
impl crate::Registered for Telegram {
    fn build(setup: &crate::Setup<'_>) -> anyhow::Result<Self> {
        Self::new(
            &setup.config.telegram_api_url,
            setup.timeout,
            setup.public,
            setup.key.clone(),
        )
        .map_err(|e| anyhow::anyhow!("--telegram-api-url: {e}"))
    }

    /// Telegram's updates, each verified by its bot's webhook secret token.
    fn inbound(
        &self,
        hooks: &crate::delivery::Hooks,
        questions: &crate::resolve::Questions,
    ) -> Option<std::sync::Arc<dyn crate::ingress::Ingress>> {
        let updates = updates::Updates::new(hooks.clone(), questions.clone());
        Some(std::sync::Arc::new(updates))
    }
}

pub const ABOUT: About = About {
    name: TELEGRAM_CHANNEL,
    noun: "Telegram bot",
    answered_through: true,
    knows_who: true,
};

#[async_trait::async_trait]
impl Channel for Telegram {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn holds(&self, record: &EndpointRecord) -> bool {
        record.telegram().is_some()
    }

    async fn deliver(
        &self,
        out: &Outbound<'_>,
        connection: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let target = connection.telegram().ok_or("not a Telegram bot")?;
        self.attempt(out.store, connection, target, delivery).await
    }

    /// Telegram stops sending the bot's updates here (they would be refused).
    async fn disconnected(&self, bot: &EndpointRecord) {
        if let Err(e) = self.call(bot, "deleteWebhook", &json!({})).await {
            warn!(bot = %bot.id, "removing the disconnected bot's webhook failed: {e}");
        }
    }
}

#[async_trait::async_trait]
impl Connector for Telegram {
    type Request = ConnectTelegramRequest;
    type Connection = TelegramBot;

    const CONNECTED: &'static str = "telegram.connected";
    const DISCONNECTED: &'static str = "telegram.disconnected";

    async fn connect(
        &self,
        tenant: &str,
        request: ConnectTelegramRequest,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error> {
        self.checked_record(tenant, request, checks.limits).await
    }

    fn shown(&self, record: &EndpointRecord, _fresh: bool) -> Option<TelegramBot> {
        bot_of(record)
    }

    fn details(&self, connection: &TelegramBot) -> Value {
        json!({ "id": connection.id, "bot_user_id": connection.bot_user_id, "chat_id": connection.chat_id })
    }
}
