//! Answering from Slack (docs/slack.md). A tenant connects a Slack app (its bot token
//! and signing secret, sealed with the server's key, and a channel); from then on:
//! - each `requested` of the tenant that the app's filter lets through becomes a
//!   delivery of the webhook machinery (leased, retried, any node on Redis) that posts
//!   a Block Kit message to the channel, and notes where it went;
//! - the ask's `resolved`, from whatever channel, becomes a delivery that updates that
//!   message in place (who answered what, or how it ended) and removes its controls;
//! - clicks and forms come back to `/slack/interactivity` (the Slack ingress, beside
//!   the gRPC API), are verified against the app's signing secret, and go through
//!   `Answer` or `Cancel` like any other human's (first valid resolution wins), as
//!   `slack:<team>/<user>`.

pub mod admin;
pub mod api;
pub mod blocks;
pub mod interactivity;

use std::{sync::Arc, time::Duration};

use askgate_proto::v1::{ConnectSlackRequest, SlackApp};
use serde_json::{Value, json};
use tracing::{debug, warn};
use uuid::Uuid;

use self::{api::WebApi, blocks::Ref};
use crate::channel::{About, Channel, Checks, Connector, Outbound};
use crate::{
    backend::hooks::{
        HookStore,
        records::{DeliveryRecord, EndpointRecord, EventType, SlackTarget},
    },
    domain::{Error, Limits, connect, model::SLACK_CHANNEL},
    sealed::SealingKey,
    secret::Secret,
};

/// How long where a message was posted is remembered: past any ask's life.
const POSTED_TTL_MS: u64 = 7 * 24 * 3600 * 1000;

/// Slack for the whole server: its Web API and the key that seals apps' secrets.
#[derive(Clone)]
pub struct Slack {
    api: WebApi,
    /// The console's inbox at the server's public URL, linked from asks Slack may not
    /// answer.
    console: Option<String>,
    /// `None`: the server has no `--secret-key-file` and shares its store (Redis), so
    /// it cannot keep apps' secrets.
    key: Option<Arc<SealingKey>>,
}

/// Which secret of an app, in the associated data of its sealing.
fn context(tenant: &str, app: &str, what: &str) -> String {
    serde_json::json!(["slack", tenant, app, what]).to_string()
}

/// The note that an attempt to post an ask's message began.
fn attempt_key(app: &str, rpc_id: &str) -> String {
    format!("slack-post:{app}:{rpc_id}")
}

/// The `event_type` of the metadata on askgate's messages, whose payload names the ask:
/// what finds a message posted by an attempt that never heard Slack's reply.
const METADATA_EVENT: &str = "askgate_ask";

/// Messages of the channel a look-up reads at most (pages of 200, newest first).
const LOOKUP_PAGES: usize = 5;

/// The note of where an ask's message went: `{"channel", "ts"}`.
fn posted_key(app: &str, rpc_id: &str) -> String {
    format!("slack:{app}:{rpc_id}")
}

impl Slack {
    pub fn new(
        api_url: &str,
        timeout: Duration,
        key: Option<Arc<SealingKey>>,
    ) -> Result<Self, String> {
        Ok(Self {
            api: WebApi::new(api_url, timeout)?,
            console: None,
            key,
        })
    }

    /// Links asks Slack may not answer to the console at `public_origin`.
    pub fn with_console(mut self, public_origin: &str) -> Self {
        self.console = Some(format!("{public_origin}/console/#/inbox"));
        self
    }

    fn key(&self) -> Result<&SealingKey, Error> {
        self.key.as_deref().ok_or_else(|| {
            Error::PermissionDenied(
                "this server keeps no Slack secrets: start every node with --secret-key-file"
                    .into(),
            )
        })
    }

    /// An app's secret (`bot_token` or `signing_secret`), opened.
    fn open(&self, app: &EndpointRecord, what: &str, sealed: &str) -> Result<Secret, String> {
        let key = self
            .key
            .as_deref()
            .ok_or("this server has no --secret-key-file")?;
        key.open(&context(&app.tenant, &app.id, what), sealed)
            .map_err(|e| e.to_string())
    }

    /// An app's signing secret, opened.
    pub(crate) fn open_secret(&self, app: &EndpointRecord, sealed: &str) -> Result<Secret, String> {
        self.open(app, "signing_secret", sealed)
    }

    /// Calls a Web API method as the app (its bot token).
    pub(crate) async fn call(
        &self,
        app: &EndpointRecord,
        method: &str,
        body: &Value,
    ) -> Result<Value, String> {
        let target = app.slack.as_ref().ok_or("not a Slack app")?;
        let token = self.open(app, "bot_token", &target.bot_token)?;
        self.api.call(&token, method, body).await
    }

    /// Checks a connect request, checks its bot token with Slack (`auth.test`, which
    /// names the workspace), and makes the app's record with its secrets sealed.
    async fn checked_record(
        &self,
        tenant: &str,
        request: ConnectSlackRequest,
        limits: &Limits,
    ) -> Result<EndpointRecord, Error> {
        let key = self.key()?;
        let violations = connect::slack_app(&request, limits);
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        let channel = request.channel.trim();
        let token = Secret::new(request.bot_token);
        let checked = self
            .api
            .call(&token, "auth.test", &json!({}))
            .await
            .map_err(|e| {
                Error::bad_request("bot_token", format!("Slack refused the token: {e}"))
            })?;
        let team_id = checked
            .get("team_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let id = format!("sl_{}", Uuid::now_v7().simple());
        let seal = |what: &str, secret: &Secret| {
            key.seal(&context(tenant, &id, what), secret)
                .map_err(|e| Error::Internal(e.to_string()))
        };
        let slack = SlackTarget {
            team_id,
            channel: channel.to_owned(),
            bot_token: seal("bot_token", &token)?,
            signing_secret: seal("signing_secret", &Secret::new(request.signing_secret))?,
        };
        Ok(EndpointRecord {
            slack: Some(slack),
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

    /// One attempt of a Slack delivery: post the ask's message (once: a message already
    /// posted by an earlier attempt is not posted again), or update it once resolved.
    async fn attempt(
        &self,
        store: &dyn HookStore,
        app: &EndpointRecord,
        target: &SlackTarget,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let (requested, resolved) = crate::channel::chat::read_chat_body(&delivery.body)?;
        let token = self.open(app, "bot_token", &target.bot_token)?;
        let posted_at = posted_key(&app.id, &delivery.rpc_id);
        let posted = store.note(&posted_at).await.map_err(|e| e.to_string())?;
        match delivery.event_type {
            EventType::Requested => {
                if posted.is_some() {
                    return Ok(());
                }
                if self
                    .posted_unseen(store, &token, app, target, delivery)
                    .await?
                {
                    return Ok(());
                }
                let at = Ref {
                    tenant: app.tenant.clone(),
                    app: app.id.clone(),
                    session: requested.session_id.clone(),
                    rpc: requested.rpc_id.clone(),
                    option: None,
                };
                let mut message =
                    blocks::question_message(&at, &requested, self.console.as_deref());
                message["channel"] = target.channel.clone().into();
                message["unfurl_links"] = false.into();
                message["metadata"] = json!({
                    "event_type": METADATA_EVENT,
                    "event_payload": { "rpc_id": delivery.rpc_id },
                });
                let reply = self.api.call(&token, "chat.postMessage", &message).await?;
                let place = json!({ "channel": reply["channel"], "ts": reply["ts"] });
                if place["ts"].as_str().is_none() {
                    return Err("Slack chat.postMessage: no ts in the reply".into());
                }
                store
                    .put_note(&posted_at, &place.to_string(), POSTED_TTL_MS, false)
                    .await
                    .map_err(|e| e.to_string())?;
                debug!(app = %app.id, rpc_id = %delivery.rpc_id, "posted to Slack");
                Ok(())
            }
            EventType::Resolved => {
                let Some(posted) = posted else {
                    // The post is still to come (or failed for good): retried until then.
                    return Err("the question's message is not posted yet".into());
                };
                let place: Value =
                    serde_json::from_str(&posted).map_err(|e| format!("corrupt note: {e}"))?;
                let resolved = resolved.ok_or("corrupt delivery: no resolution")?;
                let mut message = blocks::resolved_message(&requested, &resolved);
                message["channel"] = place["channel"].clone();
                message["ts"] = place["ts"].clone();
                self.api.call(&token, "chat.update", &message).await?;
                debug!(app = %app.id, rpc_id = %delivery.rpc_id, "updated in Slack");
                Ok(())
            }
            other => Err(format!("a Slack app does not take {}", other.as_str())),
        }
    }
}

impl Slack {
    /// Whether an earlier attempt of `delivery` posted its message unseen (its node
    /// died before it noted Slack's reply): then the message is found and noted, not
    /// posted again. The first attempt notes that posting began.
    async fn posted_unseen(
        &self,
        store: &dyn HookStore,
        token: &Secret,
        app: &EndpointRecord,
        target: &SlackTarget,
        delivery: &DeliveryRecord,
    ) -> Result<bool, String> {
        let attempt = attempt_key(&app.id, &delivery.rpc_id);
        let first = store
            .put_note(&attempt, "1", POSTED_TTL_MS, true)
            .await
            .map_err(|e| e.to_string())?;
        let place = match first {
            true => return Ok(false),
            false => self.find_posted(token, target, delivery).await,
        };
        let Some(place) = place else {
            return Ok(false);
        };
        let posted_at = posted_key(&app.id, &delivery.rpc_id);
        store
            .put_note(&posted_at, &place.to_string(), POSTED_TTL_MS, false)
            .await
            .map_err(|e| e.to_string())?;
        debug!(app = %app.id, rpc_id = %delivery.rpc_id, "found the message an earlier attempt posted");
        Ok(true)
    }

    /// The message an earlier attempt of `delivery` posted, found in the channel's
    /// history (since the delivery was made) by its metadata: `{"channel", "ts"}`.
    /// `None` when it is not there, or the history cannot be read (the app lacks
    /// `channels:history`): then the message is posted (again).
    async fn find_posted(
        &self,
        token: &Secret,
        target: &SlackTarget,
        delivery: &DeliveryRecord,
    ) -> Option<Value> {
        // Only this app's bot user's messages count: another app in the channel could
        // post the same metadata.
        let me = match self.api.call(token, "auth.test", &json!({})).await {
            Ok(me) => me["user_id"].as_str().unwrap_or_default().to_owned(),
            Err(e) => {
                warn!(rpc_id = %delivery.rpc_id, "looking up an earlier post failed, posting: {e}");
                return None;
            }
        };
        let oldest = format!("{}.000000", (delivery.created_ms / 1000).saturating_sub(60));
        let mut cursor = String::new();
        for _ in 0..LOOKUP_PAGES {
            let mut args = vec![
                ("channel", target.channel.as_str()),
                ("oldest", oldest.as_str()),
                ("include_all_metadata", "true"),
                ("limit", "200"),
            ];
            if !cursor.is_empty() {
                args.push(("cursor", cursor.as_str()));
            }
            let page = match self
                .api
                .call_form(token, "conversations.history", &args)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    warn!(rpc_id = %delivery.rpc_id, "looking up an earlier post failed, posting: {e}");
                    return None;
                }
            };
            let found = page["messages"].as_array().into_iter().flatten().find(|m| {
                m["user"] == me.as_str()
                    && m["metadata"]["event_type"] == METADATA_EVENT
                    && m["metadata"]["event_payload"]["rpc_id"] == delivery.rpc_id.as_str()
            });
            if let Some(message) = found {
                return Some(json!({ "channel": target.channel, "ts": message["ts"] }));
            }
            cursor = page["response_metadata"]["next_cursor"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if cursor.is_empty() {
                return None;
            }
        }
        None
    }
}

/// An app as the admin API shows it: no secrets.
pub fn app_of(record: &EndpointRecord) -> Option<SlackApp> {
    let slack = record.slack.as_ref()?;
    Some(SlackApp {
        id: record.id.clone(),
        team_id: slack.team_id.clone(),
        channel: slack.channel.clone(),
        labels: record.labels.clone(),
        session_prefix: record.session_prefix.clone(),
        description: record.description.clone(),
        provides: record.provides,
        created_at: Some(crate::channel::clock::timestamp(record.created_ms)),
    })
}

/// The slack channel, as the registry lists it.
impl crate::Registered for Slack {
    /// Its Web API (`--slack-api-url`), and a link to the console in the message of an
    /// ask Slack may not answer.
    fn build(setup: &crate::Setup<'_>) -> anyhow::Result<Self> {
        let slack = Self::new(
            &setup.config.slack_api_url,
            setup.timeout,
            setup.key.clone(),
        )
        .map_err(|e| anyhow::anyhow!("--slack-api-url: {e}"))?;
        Ok(match setup.public {
            Some(origin) => slack.with_console(origin),
            None => slack,
        })
    }

    /// Slack's clicks and forms, each verified against its app's signing secret.
    fn inbound(
        &self,
        hooks: &crate::delivery::Hooks,
        questions: &crate::resolve::Questions,
    ) -> Option<std::sync::Arc<dyn crate::ingress::Ingress>> {
        let interactivity = interactivity::Interactivity::new(hooks.clone(), questions.clone());
        Some(std::sync::Arc::new(interactivity))
    }
}

pub const ABOUT: About = About {
    name: SLACK_CHANNEL,
    noun: "Slack app",
    answered_through: true,
    knows_who: true,
};

#[async_trait::async_trait]
impl Channel for Slack {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn holds(&self, record: &EndpointRecord) -> bool {
        record.slack.is_some()
    }

    async fn deliver(
        &self,
        out: &Outbound<'_>,
        app: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let target = app.slack.as_ref().ok_or("not a Slack app")?;
        self.attempt(out.store, app, target, delivery).await
    }
}

#[async_trait::async_trait]
impl Connector for Slack {
    type Request = ConnectSlackRequest;
    type Connection = SlackApp;

    const CONNECTED: &'static str = "slack.connected";
    const DISCONNECTED: &'static str = "slack.disconnected";

    async fn connect(
        &self,
        tenant: &str,
        request: ConnectSlackRequest,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error> {
        self.checked_record(tenant, request, checks.limits).await
    }

    fn shown(&self, record: &EndpointRecord, _fresh: bool) -> Option<SlackApp> {
        app_of(record)
    }

    fn details(&self, app: &SlackApp) -> Value {
        json!({ "id": app.id, "team_id": app.team_id, "channel": app.channel })
    }
}
