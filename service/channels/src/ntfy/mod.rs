//! Answering from a phone's push (docs/ntfy.md). A tenant connects an ntfy topic (a
//! server, a topic, maybe an access token sealed with the server's key); from then on
//! each `requested` the topic's filter lets through is published to it (ntfy's JSON
//! publish API) through the leased deliveries: the question, tapping it opens the
//! ask's page ([`crate::links`]), and for a question choosing one of two or three
//! options, an HTTP action per option that POSTs the option's signed link (answering
//! as `ntfy:<connection id>`: the topic is the secret that lets anyone read and send to
//! it, and goes nowhere else). A push shows the questions and their options only: an
//! ask with a detail (a plan to review), an action (whose arguments it does not show)
//! or a text too long for a push gets no answer buttons, only its page, where all of
//! it is shown: what a human approves is what they were shown. The ask's `resolved` publishes its outcome under the same
//! sequence id, which ntfy 2.16 and later use to replace the notification (an older
//! server shows it as a second one).

pub mod admin;

use std::sync::Arc;

use askgate_core::domain::{approval, connect, model::NTFY_CHANNEL};
use askgate_proto::v1::{ConnectNtfyRequest, NtfyTopic, Requested, Resolved};
use bytes::Bytes;
use serde_json::{Value, json};
use tracing::debug;
use uuid::Uuid;

use super::{
    channel::{About, Channel, Checks, Connector, Outbound, chat},
    links::{Link, Signer},
};
use crate::{
    backend::hooks::{
        HookStore,
        records::{ChannelTarget, DeliveryRecord, EndpointRecord, EventType, NtfyTarget},
    },
    domain::{Error, Limits, Violation, shown},
    egress::send::{Sender, Target},
    sealed::SealingKey,
    secret::Secret,
};

/// Bytes of a notification's message (ntfy's default message size limit is 4,096).
const MAX_MESSAGE_BYTES: usize = 3900;
/// Characters of a title and of an action's label.
const MAX_TITLE: usize = 200;
const MAX_LABEL: usize = 40;
/// How long that a push went out is remembered: past any ask's life.
const NOTE_TTL_MS: u64 = 7 * 24 * 3600 * 1000;

/// ntfy for the whole server: what signs the actions' links, and the key that seals
/// tokens.
#[derive(Clone)]
pub struct Ntfy {
    links: Signer,
    key: Option<Arc<SealingKey>>,
}

/// Which secret of a topic, in the associated data of its sealing.
fn context(tenant: &str, route: &str) -> String {
    json!(["ntfy", tenant, route, "token"]).to_string()
}

/// The sequence id of an ask's notification: the same for its push and its outcome.
fn sequence_id(route: &str, rpc_id: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("{route}\u{1f}{rpc_id}"));
    format!("askgate-{}", hex::encode(&digest[..12]))
}

/// The line that ends a text cut to a push's size.
const CUT_MARK: &str = "… (the whole ask is on its page)";

/// `text` within `max` bytes, cut on a character boundary with an ellipsis line.
fn within(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(60);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n{CUT_MARK}", &text[..end])
}

/// The notification's text: each question, numbered when several, and its options
/// (cut to ntfy's message size, with a line saying so), then the session.
fn message(requested: &Requested) -> String {
    let several = requested.questions.len() > 1;
    let mut text = String::new();
    for (i, q) in requested.questions.iter().enumerate() {
        if several {
            text.push_str(&format!("{}. ", i + 1));
        }
        text.push_str(&q.question);
        text.push('\n');
        for (n, option) in q.options.iter().enumerate() {
            text.push_str(&format!("  {}. {}\n", n + 1, option.label));
        }
    }
    if let Some(action) = &requested.action {
        text.push_str(&format!("Approves {}\n", action.name));
    }
    if let Some(approvers) = approval::approvers_at(requested, crate::channel::clock::now_ms()) {
        let who = approval::approvers_text(&approvers);
        text.push_str(&format!(
            "Only {who} may answer, in the console or their chat\n"
        ));
    }
    // The session is always said: the questions are cut to leave it room.
    let session = format!("session {}", requested.session_id);
    let questions = within(text.trim_end(), MAX_MESSAGE_BYTES - session.len() - 1);
    format!("{questions}\n{session}")
}

impl Ntfy {
    pub fn new(links: Signer, key: Option<Arc<SealingKey>>) -> Self {
        Self { links, key }
    }

    /// Checks a connect request and makes the topic's record, its token sealed.
    fn checked_record(
        &self,
        tenant: &str,
        request: ConnectNtfyRequest,
        limits: &Limits,
    ) -> Result<EndpointRecord, Error> {
        self.links.ready()?;
        let mut violations = connect::ntfy_topic(&request, limits);
        let server_url = request.server_url.trim().trim_end_matches('/').to_owned();
        if let Err(e) = Target::parse(&format!("{server_url}/")) {
            violations.push(Violation::new("server_url", format!("an http(s) URL: {e}")));
        }
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        let id = format!("nt_{}", Uuid::now_v7().simple());
        let token = match request.token {
            Some(token) => {
                let key = self.key.as_deref().ok_or_else(|| {
                    Error::PermissionDenied("start every node with --secret-key-file".into())
                })?;
                let sealed = key
                    .seal(&context(tenant, &id), &Secret::new(token))
                    .map_err(|e| Error::Internal(e.to_string()))?;
                Some(sealed)
            }
            None => None,
        };
        let target = NtfyTarget {
            server_url,
            topic: request.topic,
            token,
        };
        Ok(EndpointRecord {
            channel: Some(ChannelTarget::Ntfy(target)),
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

    /// One attempt of an ntfy delivery: publish the ask (once: a push noted as sent is
    /// not sent again), or its outcome.
    async fn attempt(
        &self,
        sender: &Sender,
        store: &dyn HookStore,
        route: &EndpointRecord,
        target: &NtfyTarget,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let (requested, resolved) = crate::channel::chat::read_chat_body(&delivery.body)?;
        let what = match delivery.event_type {
            EventType::Requested => "asked",
            EventType::Resolved => "resolved",
            other => return Err(format!("an ntfy topic does not take {}", other.as_str())),
        };
        let sent = format!("ntfy-{what}:{}:{}", route.id, delivery.rpc_id);
        if store
            .note(&sent)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(());
        }
        let asked = format!("ntfy-asked:{}:{}", route.id, delivery.rpc_id);
        let mut push = match delivery.event_type {
            EventType::Requested => self.ask_push(route, &requested)?,
            // The outcome waits for the ask's push: published first, it would be
            // replaced by the question.
            _ if store
                .note(&asked)
                .await
                .map_err(|e| e.to_string())?
                .is_none() =>
            {
                return Err("the ask's push is not sent yet".into());
            }
            _ => {
                let resolved = resolved.ok_or("corrupt delivery: no resolution")?;
                json!({
                    "title": shown_title(&requested, "Resolved: "),
                    "message": within(&outcome(&requested, &resolved), MAX_MESSAGE_BYTES),
                    "tags": ["white_check_mark"],
                    "priority": 2,
                })
            }
        };
        push["topic"] = target.topic.clone().into();
        push["sequence_id"] = sequence_id(&route.id, &delivery.rpc_id).into();
        self.publish(sender, route, target, &push).await?;
        store
            .put_note(&sent, "1", NOTE_TTL_MS, false)
            .await
            .map_err(|e| e.to_string())?;
        debug!(route = %route.id, rpc_id = %delivery.rpc_id, "pushed to ntfy");
        Ok(())
    }

    /// The push of a pending ask: its page on a tap, and the options' actions.
    fn ask_push(&self, route: &EndpointRecord, requested: &Requested) -> Result<Value, String> {
        let now = crate::channel::clock::now_ms();
        // The person behind the topic, never the topic itself: it is the topic's
        // secret, and `resolved_by` reaches the agent, the receipt and every UI.
        let who = format!("{NTFY_CHANNEL}:{}", route.id);
        let shows_all = shows_everything(requested);
        let url = |option| {
            self.links
                .url(&Link::new(route, requested, who.clone(), option, now))
        };
        let mut actions = Vec::new();
        // A topic cannot tell who presses: an ask with approvers is answered elsewhere.
        let answerable = approval::may_answer(requested, NTFY_CHANNEL, true)
            && !approval::names_approvers(requested);
        let click = match answerable {
            true => {
                let page = url(None)?;
                match requested.questions.as_slice() {
                    [q] if shows_all && (2..=3).contains(&q.options.len()) && !q.multi_select => {
                        if q.options.len() == 2 {
                            actions.push(view("Open", &page));
                        }
                        for (i, option) in q.options.iter().enumerate() {
                            actions.push(json!({
                                "action": "http",
                                "label": label(&option.label),
                                "url": url(Some(i))?,
                                "method": "POST",
                                "clear": true,
                            }));
                        }
                    }
                    _ => actions.push(view("Answer", &page)),
                }
                page
            }
            false => {
                let console = self.links.console();
                actions.push(view("Open the console", &console));
                console
            }
        };
        Ok(json!({
            "title": shown_title(requested, ""),
            "message": message(requested),
            "tags": ["question"],
            "priority": 4,
            "click": click,
            "actions": actions,
        }))
    }

    async fn publish(
        &self,
        sender: &Sender,
        route: &EndpointRecord,
        target: &NtfyTarget,
        push: &Value,
    ) -> Result<(), String> {
        let server = Target::parse(&format!("{}/", target.server_url))?;
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(sealed) = &target.token {
            let key = self
                .key
                .as_deref()
                .ok_or("this server has no --secret-key-file")?;
            let token = key
                .open(&context(&route.tenant, &route.id), sealed)
                .map_err(|e| e.to_string())?;
            headers.push(("authorization", format!("Bearer {}", token.expose())));
        }
        let (status, _) = sender
            .post(&server, &headers, Bytes::from(push.to_string()))
            .await
            .map_err(|e| format!("ntfy: {e}"))?;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("ntfy: HTTP {}", status.as_u16())),
        }
    }
}

/// Whether the push's text holds everything a human would approve with a button:
/// no question has a detail, the ask approves no action (its arguments are not in the
/// push) and the text is not cut.
fn shows_everything(requested: &Requested) -> bool {
    requested.action.is_none()
        && requested
            .questions
            .iter()
            .all(|q| q.detail.as_deref().is_none_or(str::is_empty))
        && !message(requested).contains(CUT_MARK)
}

fn view(label: &str, url: &str) -> Value {
    json!({ "action": "view", "label": label, "url": url, "clear": false })
}

/// An action's label: one line, cut, never blank.
fn label(text: &str) -> String {
    match chat::line(text, MAX_LABEL) {
        line if line.is_empty() => "–".to_owned(),
        line => line,
    }
}

/// The outcome's text: how the ask ended, then each answered question and its answer
/// (a secret never), as the other chat channels show it.
fn outcome(requested: &Requested, resolved: &Resolved) -> String {
    let mut lines = vec![chat::outcome(resolved)];
    lines.extend(chat::answered_lines(requested, &resolved.answers));
    lines.join("\n")
}

fn shown_title(requested: &Requested, prefix: &str) -> String {
    chat::line(&format!("{prefix}{}", shown::title(requested)), MAX_TITLE)
}

/// A topic as the admin API shows it: no token.
pub fn topic_of(record: &EndpointRecord) -> Option<NtfyTopic> {
    let target = record.ntfy()?;
    Some(NtfyTopic {
        id: record.id.clone(),
        server_url: target.server_url.clone(),
        topic: target.topic.clone(),
        has_token: target.token.is_some(),
        labels: record.labels.clone(),
        session_prefix: record.session_prefix.clone(),
        description: record.description.clone(),
        provides: record.provides,
        created_at: Some(crate::channel::clock::timestamp(record.created_ms)),
    })
}

/// The ntfy channel, as the registry lists it.
impl crate::Registered for Ntfy {
    fn build(setup: &crate::Setup<'_>) -> anyhow::Result<Self> {
        Ok(Self::new(setup.links(), setup.key.clone()))
    }
}

pub const ABOUT: About = About {
    name: NTFY_CHANNEL,
    noun: "ntfy topic",
    answered_through: true,
    // Whoever holds the topic presses its buttons: no person is known.
    knows_who: false,
};

#[async_trait::async_trait]
impl Channel for Ntfy {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn holds(&self, record: &EndpointRecord) -> bool {
        record.ntfy().is_some()
    }

    async fn deliver(
        &self,
        out: &Outbound<'_>,
        connection: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let target = connection.ntfy().ok_or("not an ntfy topic")?;
        self.attempt(out.sender, out.store, connection, target, delivery)
            .await
    }
}

#[async_trait::async_trait]
impl Connector for Ntfy {
    type Request = ConnectNtfyRequest;
    type Connection = NtfyTopic;

    const CONNECTED: &'static str = "ntfy.connected";
    const DISCONNECTED: &'static str = "ntfy.disconnected";

    async fn connect(
        &self,
        tenant: &str,
        request: ConnectNtfyRequest,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error> {
        let record = self.checked_record(tenant, request, checks.limits)?;
        if let Some(target) = record.ntfy() {
            let server = Target::parse(&format!("{}/", target.server_url))
                .map_err(|e| Error::bad_request("server_url", e))?;
            checks.reachable("server_url", &server).await?;
        }
        Ok(record)
    }

    fn shown(&self, record: &EndpointRecord, _fresh: bool) -> Option<NtfyTopic> {
        topic_of(record)
    }

    fn details(&self, connection: &NtfyTopic) -> Value {
        json!({ "id": connection.id, "server_url": connection.server_url, "topic": connection.topic })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_on_a_character_boundary() {
        let text = "é".repeat(3000);
        let cut = within(&text, 100);
        assert!(cut.len() <= 100 + 40 && cut.ends_with("on its page)"));
        assert_eq!(within("short", 100), "short");
        assert_eq!(label("\n"), "–");
        assert_eq!(label("a\nb"), "a b");
    }

    #[test]
    fn the_outcome_says_who_and_each_answer_but_a_secret() {
        use askgate_proto::v1::{Question, QuestionAnswer};
        let asked = |id: &str, question: &str, secret: bool| Question {
            id: id.into(),
            question: question.into(),
            secret,
            ..Default::default()
        };
        let requested = Requested {
            questions: vec![asked("env", "Where?", false), asked("otp", "Code?", true)],
            ..Default::default()
        };
        let answer = |id: &str, selected: &[&str], custom: Option<&str>| QuestionAnswer {
            id: id.into(),
            selected: selected.iter().map(|s| (*s).to_owned()).collect(),
            custom: custom.map(str::to_owned),
        };
        let resolved = Resolved {
            reason: askgate_proto::v1::Resolution::Answered.into(),
            resolved_by: "ntfy:nt_1".into(),
            answers: vec![
                answer("env", &["prod"], None),
                answer("otp", &[], Some("493021")),
            ],
            ..Default::default()
        };
        let text = outcome(&requested, &resolved);
        assert_eq!(
            text,
            "Answered by ntfy:nt_1.\nWhere? → prod\nCode? → (secret)"
        );
    }
}
