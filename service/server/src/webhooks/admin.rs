//! The admin use cases of webhook endpoints, Slack apps, Telegram bots and email
//! routes (the `Webhooks`, `Slack`, `Telegram` and `Email` services): checked requests
//! in, stored records, proto records out.

use askgate_proto::v1::{
    ConnectEmailRequest, ConnectNtfyRequest, ConnectSlackRequest, ConnectTelegramRequest,
    CreateEndpointRequest, Delivery, DeliveryStatus, EmailRoute, Endpoint, ListDeliveriesRequest,
    NtfyTopic, SlackApp, TelegramBot,
};
use base64::Engine as _;
use serde_json::json;
use tracing::{debug, warn};
use uuid::Uuid;

use super::{
    Hooks,
    clock::{millis, now_ms, timestamp},
    email, ntfy, slack, telegram,
};
use crate::{
    approvals::Audit,
    backend::{
        audit::AuditEntry,
        hooks::records::{ChannelTarget, DeliveryRecord, EndpointRecord, EventType, Status},
    },
    domain::{Error, Resolver, Violation, connect, echo},
    egress::send::Target,
};

/// Event types an endpoint may name (there are four; repeats are allowed, up to this).
const MAX_EVENT_TYPES: usize = 16;
/// Deliveries listed at most (and by default) per call.
const MAX_LISTED: usize = 1000;
const DEFAULT_LISTED: usize = 100;

/// What an endpoint is: the admin calls of one kind see no endpoint of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Webhook,
    Slack,
    Telegram,
    Email,
    Ntfy,
}

impl Kind {
    fn of(record: &EndpointRecord) -> Self {
        match (&record.slack, &record.channel) {
            (Some(_), _) => Self::Slack,
            (_, Some(ChannelTarget::Telegram(_))) => Self::Telegram,
            (_, Some(ChannelTarget::Email(_))) => Self::Email,
            (_, Some(ChannelTarget::Ntfy(_))) => Self::Ntfy,
            (None, None) => Self::Webhook,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Webhook => "webhook endpoint",
            Self::Slack => "Slack app",
            Self::Telegram => "Telegram bot",
            Self::Email => "email route",
            Self::Ntfy => "ntfy topic",
        }
    }
}

/// A new endpoint's signing secret: `whsec_` and two random UUIDs (244 bits from the
/// OS's generator) in base64.
fn new_secret() -> String {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(Uuid::new_v4().as_bytes());
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

impl Hooks {
    /// Registers an endpoint after checking its URL (and that it is not internal,
    /// unless allowed); the response holds its secret, shown this once.
    pub async fn create_endpoint(
        &self,
        tenant: &str,
        request: CreateEndpointRequest,
        by: &Resolver,
    ) -> Result<Endpoint, Error> {
        let mut violations = Vec::new();
        let target = Target::parse(request.url.trim());
        if let Err(e) = &target {
            violations.push(Violation::new("url", e.clone()));
        }
        let mut events = Vec::new();
        if request.events.len() > MAX_EVENT_TYPES {
            return Err(Error::bad_request(
                "events",
                format!("at most {MAX_EVENT_TYPES} event types"),
            ));
        }
        for (i, name) in request.events.iter().enumerate() {
            match EventType::parse(name) {
                Some(event) if !events.contains(&event) => events.push(event),
                Some(_) => {}
                None => violations.push(Violation::new(
                    format!("events[{i}]"),
                    format!(
                        "unknown event type {}: one of ask.requested, ask.resolved, \
                         ask.reminder, ask.escalated",
                        echo(name)
                    ),
                )),
            }
        }
        if request.events.is_empty() {
            events = EventType::ALL.to_vec();
        }
        violations.extend(connect::described_filter(
            &request.description,
            &request.labels,
            &self.inner.limits,
        ));
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        let target = target.map_err(|e| Error::bad_request("url", e))?;
        self.reachable("url", &target).await?;
        let record = EndpointRecord {
            id: format!("ep_{}", Uuid::now_v7().simple()),
            tenant: tenant.to_owned(),
            url: request.url.trim().to_owned(),
            provides: request
                .provides
                .unwrap_or_else(|| events.contains(&EventType::Requested)),
            events,
            description: request.description,
            labels: request.labels,
            secret: new_secret(),
            created_ms: now_ms(),
            session_prefix: String::new(),
            slack: None,
            channel: None,
        };
        let endpoint = endpoint_of(&record, true);
        let details = json!({ "id": endpoint.id, "url": endpoint.url, "events": endpoint.events });
        let audit = Audit::admin_entry(tenant, by, "endpoint.created", details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(endpoint = %record.id, "webhook endpoint created");
        self.audited().await;
        Ok(endpoint)
    }

    /// Appends the admin changes' records the store keeps (see [`Audit::drain`]). The
    /// change is made already: a record that cannot be appended now is appended by a
    /// later drain.
    async fn audited(&self) {
        if let Err(e) = self.inner.audit.drain(&*self.inner.store).await {
            warn!("an admin change's audit record waits to be appended: {e}");
        }
    }

    /// The tenant's endpoints, oldest first, without their secrets.
    pub async fn list_endpoints(&self, tenant: &str) -> Result<Vec<Endpoint>, Error> {
        Ok(self
            .inner
            .store
            .endpoints(tenant)
            .await?
            .iter()
            .filter(|e| e.is_webhook())
            .map(|e| endpoint_of(e, false))
            .collect())
    }

    pub async fn delete_endpoint(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let audit = Audit::admin_entry(tenant, by, "endpoint.deleted", json!({ "id": id }));
        self.delete(tenant, id, Kind::Webhook, &audit).await?;
        Ok(())
    }

    /// Deletes an endpoint of `kind`; NOT_FOUND for another kind, as for a missing one.
    /// The record deleted.
    async fn delete(
        &self,
        tenant: &str,
        id: &str,
        kind: Kind,
        audit: &AuditEntry,
    ) -> Result<EndpointRecord, Error> {
        let not_found = || Error::NotFound(format!("no {} with that id", kind.name()));
        let store = &self.inner.store;
        let record = match store.endpoint(tenant, id).await? {
            Some(record) if Kind::of(&record) == kind => record,
            _ => return Err(not_found()),
        };
        match store.delete_endpoint(tenant, id, audit).await? {
            true => {
                self.audited().await;
                Ok(record)
            }
            false => Err(not_found()),
        }
    }

    /// Connects a Slack app of the tenant (see [`slack::Slack::connect`]).
    pub async fn connect_slack(
        &self,
        tenant: &str,
        request: ConnectSlackRequest,
        by: &Resolver,
    ) -> Result<SlackApp, Error> {
        let record = self
            .inner
            .slack
            .connect(tenant, request, &self.inner.limits)
            .await?;
        let app =
            slack::app_of(&record).ok_or_else(|| Error::Internal("not a Slack app".into()))?;
        let details = json!({ "id": app.id, "team_id": app.team_id, "channel": app.channel });
        let audit = Audit::admin_entry(tenant, by, "slack.connected", details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(app = %record.id, "Slack app connected");
        self.audited().await;
        Ok(app)
    }

    /// The tenant's Slack apps, oldest first, without their secrets.
    pub async fn list_slack_apps(&self, tenant: &str) -> Result<Vec<SlackApp>, Error> {
        let endpoints = self.inner.store.endpoints(tenant).await?;
        Ok(endpoints.iter().filter_map(slack::app_of).collect())
    }

    pub async fn disconnect_slack(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let audit = Audit::admin_entry(tenant, by, "slack.disconnected", json!({ "id": id }));
        self.delete(tenant, id, Kind::Slack, &audit).await?;
        Ok(())
    }

    /// Connects a Telegram bot of the tenant (see [`telegram::Telegram::connect`]).
    pub async fn connect_telegram(
        &self,
        tenant: &str,
        request: ConnectTelegramRequest,
        by: &Resolver,
    ) -> Result<TelegramBot, Error> {
        let record = self
            .inner
            .telegram
            .connect(tenant, request, &self.inner.limits)
            .await?;
        let bot = telegram::bot_of(&record)
            .ok_or_else(|| Error::Internal("not a Telegram bot".into()))?;
        let details =
            json!({ "id": bot.id, "bot_user_id": bot.bot_user_id, "chat_id": bot.chat_id });
        let audit = Audit::admin_entry(tenant, by, "telegram.connected", details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(bot = %record.id, "Telegram bot connected");
        self.audited().await;
        Ok(bot)
    }

    /// The tenant's Telegram bots, oldest first, without their secrets.
    pub async fn list_telegram_bots(&self, tenant: &str) -> Result<Vec<TelegramBot>, Error> {
        let endpoints = self.inner.store.endpoints(tenant).await?;
        Ok(endpoints.iter().filter_map(telegram::bot_of).collect())
    }

    pub async fn disconnect_telegram(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let audit = Audit::admin_entry(tenant, by, "telegram.disconnected", json!({ "id": id }));
        let bot = self.delete(tenant, id, Kind::Telegram, &audit).await?;
        // Telegram stops sending its updates here (they would be refused).
        let telegram = &self.inner.telegram;
        if let Err(e) = telegram.call(&bot, "deleteWebhook", &json!({})).await {
            warn!(bot = %id, "removing the disconnected bot's webhook failed: {e}");
        }
        Ok(())
    }

    /// Connects an email route of the tenant (see [`email::Email::connect`]).
    pub async fn connect_email(
        &self,
        tenant: &str,
        request: ConnectEmailRequest,
        by: &Resolver,
    ) -> Result<EmailRoute, Error> {
        let record = self
            .inner
            .email
            .connect(tenant, request, &self.inner.limits)?;
        let route =
            email::route_of(&record).ok_or_else(|| Error::Internal("not an email route".into()))?;
        let details = json!({ "id": route.id, "to": route.to });
        let audit = Audit::admin_entry(tenant, by, "email.connected", details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(route = %record.id, "email route connected");
        self.audited().await;
        Ok(route)
    }

    /// The tenant's email routes, oldest first.
    pub async fn list_email_routes(&self, tenant: &str) -> Result<Vec<EmailRoute>, Error> {
        let endpoints = self.inner.store.endpoints(tenant).await?;
        Ok(endpoints.iter().filter_map(email::route_of).collect())
    }

    pub async fn disconnect_email(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let audit = Audit::admin_entry(tenant, by, "email.disconnected", json!({ "id": id }));
        self.delete(tenant, id, Kind::Email, &audit).await?;
        Ok(())
    }

    /// A server a tenant names (a webhook's, an ntfy server's): it must resolve, and
    /// only to public addresses unless the server allows private ones (as for every
    /// delivery): refused at connect, naming `field`, rather than at every delivery.
    async fn reachable(&self, field: &str, target: &Target) -> Result<(), Error> {
        let resolved =
            tokio::time::timeout(self.inner.config.timeout, self.inner.sender.resolve(target))
                .await
                .unwrap_or_else(|_| Err(format!("resolving {} timed out", target.host)));
        resolved
            .map(|_| ())
            .map_err(|e| Error::bad_request(field, e))
    }

    /// Connects an ntfy topic of the tenant (see [`ntfy::Ntfy::connect`]).
    pub async fn connect_ntfy(
        &self,
        tenant: &str,
        request: ConnectNtfyRequest,
        by: &Resolver,
    ) -> Result<NtfyTopic, Error> {
        let record = self
            .inner
            .ntfy
            .connect(tenant, request, &self.inner.limits)?;
        if let Some(ChannelTarget::Ntfy(target)) = &record.channel {
            let server = Target::parse(&format!("{}/", target.server_url))
                .map_err(|e| Error::bad_request("server_url", e))?;
            self.reachable("server_url", &server).await?;
        }
        let topic =
            ntfy::topic_of(&record).ok_or_else(|| Error::Internal("not an ntfy topic".into()))?;
        let details =
            json!({ "id": topic.id, "server_url": topic.server_url, "topic": topic.topic });
        let audit = Audit::admin_entry(tenant, by, "ntfy.connected", details);
        self.inner.store.create_endpoint(&record, &audit).await?;
        debug!(route = %record.id, "ntfy topic connected");
        self.audited().await;
        Ok(topic)
    }

    /// The tenant's ntfy topics, oldest first, without their tokens.
    pub async fn list_ntfy_topics(&self, tenant: &str) -> Result<Vec<NtfyTopic>, Error> {
        let endpoints = self.inner.store.endpoints(tenant).await?;
        Ok(endpoints.iter().filter_map(ntfy::topic_of).collect())
    }

    pub async fn disconnect_ntfy(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<(), Error> {
        let audit = Audit::admin_entry(tenant, by, "ntfy.disconnected", json!({ "id": id }));
        self.delete(tenant, id, Kind::Ntfy, &audit).await?;
        Ok(())
    }

    pub async fn list_deliveries(
        &self,
        tenant: &str,
        request: &ListDeliveriesRequest,
    ) -> Result<Vec<Delivery>, Error> {
        let status = match request.status() {
            DeliveryStatus::Unspecified => None,
            DeliveryStatus::Pending => Some(Status::Pending),
            DeliveryStatus::Delivered => Some(Status::Delivered),
            DeliveryStatus::Failed => Some(Status::Failed),
        };
        let limit = match request.limit as usize {
            0 => DEFAULT_LISTED,
            n => n.min(MAX_LISTED),
        };
        let endpoint = Some(request.endpoint_id.as_str()).filter(|e| !e.is_empty());
        Ok(self
            .inner
            .store
            .deliveries(tenant, endpoint, status, limit)
            .await?
            .iter()
            .map(delivery_of)
            .collect())
    }

    /// Sends a delivery again, with the same `webhook-id` and a fresh retry period.
    pub async fn redeliver(
        &self,
        tenant: &str,
        id: &str,
        by: &Resolver,
    ) -> Result<Delivery, Error> {
        let now = now_ms();
        let audit = Audit::admin_entry(tenant, by, "delivery.redelivered", json!({ "id": id }));
        let until = now + millis(self.inner.config.retry_for);
        let record = self
            .inner
            .store
            .redeliver(tenant, id, now, until, &audit)
            .await?;
        self.inner.wake.notify_one();
        self.audited().await;
        Ok(delivery_of(&record))
    }
}

fn endpoint_of(record: &EndpointRecord, with_secret: bool) -> Endpoint {
    Endpoint {
        id: record.id.clone(),
        url: record.url.clone(),
        events: record
            .events
            .iter()
            .map(|e| e.as_str().to_owned())
            .collect(),
        description: record.description.clone(),
        labels: record.labels.clone(),
        secret: if with_secret {
            record.secret.clone()
        } else {
            String::new()
        },
        provides: record.provides,
        created_at: Some(timestamp(record.created_ms)),
    }
}

fn delivery_of(record: &DeliveryRecord) -> Delivery {
    let status = match record.status {
        Status::Pending => DeliveryStatus::Pending,
        Status::Delivered => DeliveryStatus::Delivered,
        Status::Failed => DeliveryStatus::Failed,
    };
    Delivery {
        id: record.id.clone(),
        endpoint_id: record.endpoint_id.clone(),
        event_type: record.event_type.as_str().to_owned(),
        rpc_id: record.rpc_id.clone(),
        status: status.into(),
        attempts: record.attempts,
        last_error: record.last_error.clone(),
        next_attempt_at: (record.status == Status::Pending)
            .then(|| timestamp(record.next_attempt_ms)),
        session_id: record.session_id.clone(),
        created_at: Some(timestamp(record.created_ms)),
        last_attempt_at: (record.last_attempt_ms > 0).then(|| timestamp(record.last_attempt_ms)),
    }
}
