//! `/telegram/webhook/{bot id}` on askgate's HTTP port: the updates of askgate's
//! Telegram bots (docs/telegram.md). An update is believed only once verified:
//! - its `X-Telegram-Bot-Api-Secret-Token` is the one askgate gave the bot at
//!   `setWebhook`, compared in constant time (the token names the tenant, whose record
//!   of the bot holds the sealed copy);
//! - its `update_id` was not seen before, on any node (one seen before is answered 200
//!   and changes nothing: Telegram sends an update again until it gets a 2xx, and holds
//!   back the ones after it meanwhile);
//! - it comes from the bot's chat.
//!
//! Then a click goes through `Answer` (a choice, the marked options) or opens a prompt
//! for a forced reply (own words, a batch's answers, a reason to cancel), and a reply
//! to such a prompt goes through `Answer` or `Cancel`, as `telegram:<user id>`. Each
//! click is acknowledged (`answerCallbackQuery`), saying who won when it was late; the
//! ask's message itself is edited by the `resolved` event's delivery.

use std::time::Duration;

use askgate_proto::v1::{AnswerRequest, CancelRequest, QuestionAnswer, Requested};
use bytes::Bytes;
use http::{Method, StatusCode, request::Parts};
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::{
    backend::hooks::records::{EndpointRecord, TelegramTarget},
    delivery::Hooks,
    domain::{
        Error, Resolver, approval, model::TELEGRAM_CHANNEL, validate::MAX_CANCEL_REASON_BYTES,
    },
    ingress::{Ingress, Reply},
    resolve::Questions,
};

use super::{
    WEBHOOK_PATH, ask_note, prompt_note,
    render::{self, Controls, Data, Prompted},
    secret_tenant, settled_note,
};

/// The header Telegram sends the webhook's secret token in.
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
/// Bytes of an update read at most (a message is at most 4,096 characters, a callback
/// query carries its message and keyboard).
const MAX_BODY_BYTES: usize = 256 * 1024;
/// How long a seen update id is remembered: Telegram gives up redelivering after a day.
const SEEN_TTL_MS: u64 = 25 * 3600 * 1000;
/// How long the notes of prompts last.
const PROMPT_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// Telegram's acknowledgement of a click should come quickly: calls made while
/// answering an update wait at most this.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers Telegram's updates.
#[derive(Clone)]
pub struct Updates {
    hooks: Hooks,
    questions: Questions,
}

fn refused(why: &str) -> Reply {
    debug!("Telegram update refused: {why}");
    Reply::error(StatusCode::UNAUTHORIZED, why)
}

fn ok() -> Reply {
    Reply::json(StatusCode::OK, None)
}

fn unavailable(what: &str, e: &Error) -> Reply {
    warn!("{what} failed: {e}");
    Reply::json(StatusCode::SERVICE_UNAVAILABLE, None)
}

/// A bot id as askgate makes them: `tg_` and 32 hex digits.
fn bot_id(path: &str) -> Option<&str> {
    let id = path.strip_prefix(WEBHOOK_PATH)?;
    let hex = id.strip_prefix("tg_")?;
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// Whether `chat` (an update's) is the bot's chat: its id, or its @username.
fn same_chat(chat: &Value, target: &TelegramTarget) -> bool {
    let id = chat["id"].as_i64().map(|id| id.to_string());
    let username = chat["username"].as_str().map(|u| format!("@{u}"));
    id.as_deref() == Some(target.chat_id.as_str())
        || username.is_some_and(|u| u.eq_ignore_ascii_case(&target.chat_id))
}

/// What a refused or late answer says to the human.
fn notice_of(error: &Error) -> String {
    let text = match error {
        Error::NotPending { settled: Some(s) } => format!(
            "Too late: {} by {} already.",
            s.resolution.as_str_name().to_lowercase(),
            s.resolved_by
        ),
        Error::NotPending { settled: None } => "This ask was resolved already.".to_owned(),
        e => crate::channel::chat::refusal(e),
    };
    render::cut(&text, render::MAX_NOTICE)
}

/// An ask a button or prompt names, of the bot's tenant.
struct Asked {
    session: String,
    rpc: String,
    key: String,
}

#[async_trait::async_trait]
impl Ingress for Updates {
    fn claims(&self, path: &str) -> bool {
        path.starts_with(WEBHOOK_PATH)
    }

    fn max_body(&self) -> usize {
        MAX_BODY_BYTES
    }

    fn precheck(&self, parts: &Parts) -> Result<(), Reply> {
        if parts.method != Method::POST {
            return Err(Reply::json(StatusCode::METHOD_NOT_ALLOWED, None));
        }
        if bot_id(parts.uri.path()).is_none() {
            return Err(Reply::error(StatusCode::NOT_FOUND, "no such bot"));
        }
        match parts.headers.get(SECRET_HEADER) {
            Some(_) => Ok(()),
            None => Err(refused("no X-Telegram-Bot-Api-Secret-Token")),
        }
    }

    async fn handle(&self, parts: Parts, body: Bytes) -> Reply {
        let Some(id) = bot_id(parts.uri.path()) else {
            return Reply::error(StatusCode::NOT_FOUND, "no such bot");
        };
        let token = parts
            .headers
            .get(SECRET_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let bot = match self.verified(id, token).await {
            Ok(bot) => bot,
            Err(reply) => return reply,
        };
        let Ok(update) = serde_json::from_slice::<Value>(&body) else {
            return Reply::error(StatusCode::BAD_REQUEST, "not an update");
        };
        let Some(update_id) = update["update_id"].as_i64() else {
            return Reply::error(StatusCode::BAD_REQUEST, "not an update");
        };
        let seen = format!("telegram-seen:{id}:{update_id}");
        match self
            .hooks
            .store()
            .put_note(&seen, "1", SEEN_TTL_MS, true)
            .await
        {
            Ok(true) => {}
            // Seen before: Telegram's own retry (or a replay). Acknowledged, so that it
            // stops retrying and sends the updates after it; nothing is done again.
            Ok(false) => {
                debug!(bot = %id, update_id, "an update seen before, acknowledged again");
                return ok();
            }
            Err(e) => return unavailable("recording a Telegram update", &e),
        }
        if update["callback_query"].is_object() {
            self.click(&bot, &update["callback_query"]).await
        } else if let Some(code) = link::command(&update["message"]) {
            self.link(&bot, &update["message"], code).await
        } else if update["message"]["reply_to_message"].is_object() {
            self.reply(&bot, &update["message"]).await
        } else {
            ok()
        }
    }
}

impl Updates {
    pub fn new(hooks: Hooks, questions: Questions) -> Self {
        Self { hooks, questions }
    }

    /// The bot `id` whose webhook secret `token` is, checked in constant time.
    async fn verified(&self, id: &str, token: &str) -> Result<EndpointRecord, Reply> {
        const UNVERIFIED: &str = "not the secret token of a connected Telegram bot";
        let Some(tenant) = secret_tenant(token) else {
            return Err(refused(UNVERIFIED));
        };
        let bot = match self.hooks.store().endpoint(&tenant, id).await {
            Ok(Some(bot)) if bot.telegram().is_some() => bot,
            // As for a wrong token: which bots exist is not for unverified callers.
            Ok(_) => return Err(refused(UNVERIFIED)),
            Err(e) => return Err(unavailable("reading a Telegram bot", &e)),
        };
        let secret = self
            .hooks
            .channels()
            .telegram
            .open(&bot, "webhook_secret")
            .map_err(|e| {
                warn!(bot = %id, "a Telegram bot's webhook secret does not open: {e}");
                refused("the bot's webhook secret is unusable")
            })?;
        let same: bool =
            subtle::ConstantTimeEq::ct_eq(secret.expose().as_bytes(), token.as_bytes()).into();
        match same {
            true => Ok(bot),
            false => Err(refused(UNVERIFIED)),
        }
    }

    /// The ask `key` names for `bot`, if the bot's notes know it: the bot sent it
    /// (for a session of its prefix, or by an escalation step that named it).
    async fn asked(&self, bot: &EndpointRecord, key: &str) -> Result<Option<Asked>, Error> {
        let Some(names) = self.hooks.store().note(&ask_note(&bot.id, key)).await? else {
            return Ok(None);
        };
        let names: (String, String) = serde_json::from_str(&names)
            .map_err(|e| Error::Internal(format!("a corrupt Telegram note: {e}")))?;
        Ok(Some(Asked {
            session: names.0,
            rpc: names.1,
            key: key.to_owned(),
        }))
    }

    /// The ask while it is pending.
    async fn pending(&self, bot: &EndpointRecord, at: &Asked) -> Result<Option<Requested>, Error> {
        let pending = self
            .questions
            .list_pending(&bot.tenant, at.session.clone())
            .await?;
        Ok(pending.into_iter().find(|r| r.rpc_id == at.rpc))
    }

    async fn answer(
        &self,
        bot: &EndpointRecord,
        at: &Asked,
        answers: Vec<QuestionAnswer>,
        who: &str,
    ) -> Result<(), Error> {
        let request = AnswerRequest {
            session_id: at.session.clone(),
            rpc_id: at.rpc.clone(),
            answers,
            grant: None,
        };
        let by = Resolver::new(who, TELEGRAM_CHANNEL);
        self.questions.answer(&bot.tenant, request, &by).await?;
        Ok(())
    }

    /// Calls the Bot API while answering an update, within [`CALL_TIMEOUT`]; a failure
    /// is logged (the human sees nothing happen, and can try again).
    async fn call(&self, bot: &EndpointRecord, method: &str, body: Value) -> Option<Value> {
        let call = self.hooks.channels().telegram.call(bot, method, &body);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(result)) => Some(result),
            Ok(Err(e)) => {
                warn!(bot = %bot.id, "Telegram {method} failed: {e}");
                None
            }
            Err(_) => {
                warn!(bot = %bot.id, "Telegram {method} timed out");
                None
            }
        }
    }

    /// What a late click or reply is told: who won, as the engine knows it (an answer
    /// to a resolved ask is refused, naming it), else as the ask's edited message said.
    async fn late(&self, bot: &EndpointRecord, at: &Asked, who: &str) -> Result<String, Error> {
        match self.answer(bot, at, Vec::new(), who).await {
            Err(Error::NotPending { settled: None }) => {}
            Err(e) => return Ok(notice_of(&e)),
            Ok(()) => return Ok(String::new()),
        }
        let settled = self
            .hooks
            .store()
            .note(&settled_note(&bot.id, &at.rpc))
            .await?;
        Ok(match settled {
            Some(settled) => {
                render::cut(&format!("Too late: {settled} already."), render::MAX_NOTICE)
            }
            None => notice_of(&Error::not_pending()),
        })
    }

    /// A click on a button: acted on, then acknowledged with a short notice.
    async fn click(&self, bot: &EndpointRecord, query: &Value) -> Reply {
        let Some(target) = bot.telegram() else {
            return ok();
        };
        let notice = match self.clicked(bot, target, query).await {
            Ok(notice) => notice,
            Err(e) => notice_of(&e),
        };
        let mut acknowledgement = json!({ "callback_query_id": query["id"] });
        if !notice.is_empty() {
            acknowledgement["text"] = notice.into();
        }
        self.call(bot, "answerCallbackQuery", acknowledgement).await;
        ok()
    }

    /// What a click does; the notice to show the human.
    async fn clicked(
        &self,
        bot: &EndpointRecord,
        target: &TelegramTarget,
        query: &Value,
    ) -> Result<String, Error> {
        if !same_chat(&query["message"]["chat"], target) {
            return Ok("This chat is not the bot's.".into());
        }
        let Some(data) = query["data"].as_str().and_then(Data::decode) else {
            return Ok("Not an askgate button.".into());
        };
        let Some(at) = self.asked(bot, data.key()).await? else {
            return Ok("This ask is gone.".into());
        };
        let who = format!(
            "telegram:{}",
            query["from"]["id"].as_i64().unwrap_or_default()
        );
        let Some(requested) = self.pending(bot, &at).await? else {
            return self.late(bot, &at, &who).await;
        };
        // Buttons and prompts answer for approvers only.
        let cancelling = matches!(data, Data::Cancel(_));
        let asked = (bot.tenant.as_str(), &requested);
        let store = self.hooks.store();
        crate::channel::chat::standing(&**store, asked, (TELEGRAM_CHANNEL, &who), cancelling)
            .await?;
        let markup = &query["message"]["reply_markup"];
        match data {
            Data::Choose(_, n) => {
                self.choose(bot, &at, &requested, Controls::Choose, vec![n], &who)
                    .await
            }
            Data::Done(_) => {
                let marked = render::marked(markup).into_iter().collect();
                self.choose(bot, &at, &requested, Controls::Toggle, marked, &who)
                    .await
            }
            Data::Toggle(_, n, _) => {
                self.toggle(bot, &at, &requested, n, &query["message"])
                    .await
            }
            Data::Answer(_) | Data::Other(_)
                if !approval::may_answer(&requested, TELEGRAM_CHANNEL, true) =>
            {
                Ok("This ask cannot be answered from Telegram.".into())
            }
            Data::Cancel(_) if !approval::may_resolve(&requested, TELEGRAM_CHANNEL) => {
                Ok("This ask cannot be cancelled from Telegram.".into())
            }
            Data::Answer(_) => {
                self.prompt(bot, &at, &requested, Prompted::Answer, query)
                    .await
            }
            Data::Other(_) => {
                self.prompt(bot, &at, &requested, Prompted::Other, query)
                    .await
            }
            Data::Cancel(_) => {
                self.prompt(bot, &at, &requested, Prompted::Cancel, query)
                    .await
            }
        }
    }

    /// Answers the only question with options `chosen` (a button's, or the marked
    /// ones of a multi-select), when the ask's buttons are `controls`.
    async fn choose(
        &self,
        bot: &EndpointRecord,
        at: &Asked,
        requested: &Requested,
        controls: Controls,
        chosen: Vec<usize>,
        who: &str,
    ) -> Result<String, Error> {
        let question = requested.questions.first().filter(|q| {
            approval::may_answer(requested, TELEGRAM_CHANNEL, true)
                && render::controls(requested) == controls
                && chosen.iter().all(|&n| n < q.options.len())
        });
        let Some(q) = question else {
            return Ok("This button does not answer this ask.".into());
        };
        if chosen.is_empty() {
            return Ok("Mark at least one option first (or press Other…).".into());
        }
        let selected: Vec<String> = chosen.iter().map(|&n| q.options[n].label.clone()).collect();
        let notice = format!("Sent: {}", selected.join(", "));
        let answer = QuestionAnswer {
            id: q.id.clone(),
            selected,
            custom: None,
        };
        self.answer(bot, at, vec![answer], who).await?;
        Ok(render::cut(&notice, render::MAX_NOTICE))
    }

    /// Marks or unmarks option `n` of a multi-select question in the keyboard of
    /// `message` (the marks live in the keyboard: nothing is sent until Send).
    async fn toggle(
        &self,
        bot: &EndpointRecord,
        at: &Asked,
        requested: &Requested,
        n: usize,
        message: &Value,
    ) -> Result<String, Error> {
        let options = requested.questions.first().map_or(0, |q| q.options.len());
        let answerable = approval::may_answer(requested, TELEGRAM_CHANNEL, true);
        if !answerable || render::controls(requested) != Controls::Toggle || n >= options {
            return Ok("This button does not answer this ask.".into());
        }
        let mut marked = render::marked(&message["reply_markup"]);
        if !marked.remove(&n) {
            marked.insert(n);
        }
        let edit = json!({
            "chat_id": message["chat"]["id"],
            "message_id": message["message_id"],
            "reply_markup": render::keyboard(&at.key, requested, &marked),
        });
        self.call(bot, "editMessageReplyMarkup", edit).await;
        Ok(String::new())
    }

    /// Sends a prompt for a forced reply from the clicking user, and notes what it is
    /// for.
    async fn prompt(
        &self,
        bot: &EndpointRecord,
        at: &Asked,
        requested: &Requested,
        prompted: Prompted,
        query: &Value,
    ) -> Result<String, Error> {
        let from = &query["from"];
        let user = (
            from["id"].as_i64().unwrap_or_default(),
            from["first_name"].as_str().unwrap_or("you"),
        );
        let message = &query["message"];
        let asked_in = message["message_id"].as_i64().unwrap_or_default();
        let mut prompt = render::prompt(requested, prompted, user, asked_in);
        prompt["chat_id"] = message["chat"]["id"].clone();
        let Some(sent) = self.call(bot, "sendMessage", prompt).await else {
            return Ok("Telegram did not take the prompt: try again.".into());
        };
        let Some(prompt_id) = sent["message_id"].as_i64() else {
            return Ok(String::new());
        };
        let note = json!({ "key": at.key, "prompted": prompted }).to_string();
        self.hooks
            .store()
            .put_note(
                &prompt_note(&bot.id, prompt_id),
                &note,
                PROMPT_TTL_MS,
                false,
            )
            .await?;
        Ok(String::new())
    }

    /// A reply to one of askgate's prompts: the answers it gives, or a cancellation.
    /// A refusal is said in a reply to it, and so is a failure: the update is marked
    /// seen already, so Telegram's retry of a 5xx would be refused as a replay; the
    /// human is told, and can reply again.
    async fn reply(&self, bot: &EndpointRecord, message: &Value) -> Reply {
        let Some(target) = bot.telegram() else {
            return ok();
        };
        if !same_chat(&message["chat"], target) {
            return ok();
        }
        let outcome = match self.replied(bot, message).await {
            Ok(notice) if notice.is_empty() => return ok(),
            Ok(notice) => notice,
            Err(e) => notice_of(&e),
        };
        let answer = json!({
            "chat_id": message["chat"]["id"],
            "text": render::escape(&outcome),
            "parse_mode": "HTML",
            "reply_parameters": {
                "message_id": message["message_id"],
                "allow_sending_without_reply": true,
            },
        });
        self.call(bot, "sendMessage", answer).await;
        ok()
    }

    /// What a reply does (nothing when it is not a reply to a prompt of askgate's); a
    /// notice to reply with, if any.
    async fn replied(&self, bot: &EndpointRecord, message: &Value) -> Result<String, Error> {
        let Some(prompt_id) = message["reply_to_message"]["message_id"].as_i64() else {
            return Ok(String::new());
        };
        let Some(note) = self
            .hooks
            .store()
            .note(&prompt_note(&bot.id, prompt_id))
            .await?
        else {
            return Ok(String::new());
        };
        #[derive(serde::Deserialize)]
        struct PromptNote {
            key: String,
            prompted: Prompted,
        }
        let note: PromptNote = serde_json::from_str(&note)
            .map_err(|e| Error::Internal(format!("a corrupt Telegram note: {e}")))?;
        let Some(at) = self.asked(bot, &note.key).await? else {
            return Ok(String::new());
        };
        let who = format!(
            "telegram:{}",
            message["from"]["id"].as_i64().unwrap_or_default()
        );
        let text = message["text"].as_str().unwrap_or_default().trim();
        if note.prompted == Prompted::Cancel {
            // A character is at most four bytes: the reason fits the limit.
            let reason = match text {
                "" | "-" | "." => String::new(),
                text => render::cut(text, MAX_CANCEL_REASON_BYTES / 4),
            };
            let request = CancelRequest {
                session_id: at.session.clone(),
                rpc_id: at.rpc.clone(),
                reason,
                ..Default::default()
            };
            let by = Resolver::new(&who, TELEGRAM_CHANNEL);
            self.questions.cancel(&bot.tenant, request, &by).await?;
            return Ok(String::new());
        }
        let Some(requested) = self.pending(bot, &at).await? else {
            return Err(Error::bad_request(
                "answers",
                self.late(bot, &at, &who).await?,
            ));
        };
        let answers = match note.prompted {
            Prompted::Other => {
                let Some(q) = requested.questions.first() else {
                    return Ok(String::new());
                };
                vec![QuestionAnswer {
                    id: q.id.clone(),
                    selected: Vec::new(),
                    custom: Some(text.to_owned()),
                }]
            }
            _ => render::parse_reply(&requested, text)
                .map_err(|why| Error::bad_request("answers", why))?,
        };
        self.answer(bot, &at, answers, &who).await?;
        Ok(String::new())
    }
}

mod link;
#[cfg(test)]
mod tests;
