//! Reaching humans without a stream: signed webhooks with durable, at-least-once
//! delivery, and reminders and escalation of asks nobody answers (docs/webhooks.md).
//!
//! How an event becomes a delivery:
//! - the engine that commits a `requested` or `resolved` event reports it to its
//!   [`Tap`]; one intake task per node turns it into one delivery per endpoint of the
//!   tenant that wants it, queued in the [`HookStore`] (and schedules or cancels the
//!   ask's reminder timer);
//! - every node's delivery loop claims due deliveries from the store with a lease,
//!   POSTs each (signed per the Standard Webhooks spec, anew at every attempt, with the
//!   same `webhook-id`), and records the outcome: delivered on a 2xx, else retried with
//!   exponential backoff and jitter until the retry period is over, then failed (kept
//!   for `Redeliver`);
//! - every node's timer loop claims due reminder timers the same way, sends the notice
//!   to the session's subscribers ([`Backend::notify`]) and queues its deliveries.
//!
//! On Redis the store is shared, so any node delivers and a node's death loses nothing
//! that was queued: its leases run out and a survivor takes over.
//!
//! Slack apps ([`slack`]) are endpoints with a Slack target: their deliveries post
//! and update messages through the same loops.

pub mod send;
pub mod slack;
pub mod special;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{
    ConnectSlackRequest, CreateEndpointRequest, Delivery, DeliveryStatus, Endpoint, Escalated,
    ListDeliveriesRequest, NotifyPolicy, Reminder, Requested, Resolved, SlackApp,
    subscribe_response::Event,
};
use backon::BackoffBuilder as _;
use base64::Engine as _;
use bytes::Bytes;
use tokio::sync::{Notify, Semaphore, mpsc};
use tracing::{debug, warn};
use uuid::Uuid;

use self::{
    send::{Sender, Target},
    slack::Slack,
};
use crate::{
    backend::{
        Asked, Backend, Committed, Tap,
        hooks::{
            HookStore, Shares, StoreLimits,
            records::{
                DeliveryRecord, Due, EndpointRecord, EventType, Status, TimerRecord, timer_id,
            },
        },
    },
    domain::{AskError, Limits, SessionKey, Violation, echo, validate},
    metrics::Metrics,
};

/// How webhooks and reminders behave (`--webhook-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// Endpoints may be on loopback and private addresses (tests, private networks).
    pub allow_private: bool,
    /// The first retry's delay; each later one doubles, up to `retry_max`.
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// How long a delivery is retried before it is marked failed.
    pub retry_for: Duration,
    /// Longest one attempt may take (connect, TLS, request, response).
    pub timeout: Duration,
    pub limits: StoreLimits,
    /// Attempts one node makes at once.
    pub concurrency: usize,
    /// Of those, what one tenant may make at once, and one endpoint (a Slack app
    /// counts as one): a tenant's slow endpoints then delay only that tenant.
    pub per_tenant: usize,
    pub per_endpoint: usize,
    /// How often each node looks for due deliveries and timers.
    pub poll: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            retry_initial: Duration::from_secs(5),
            retry_max: Duration::from_secs(3600),
            retry_for: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(10),
            limits: StoreLimits {
                max_endpoints: 20,
                max_queued: 1000,
                keep_finished: 1000,
            },
            concurrency: 64,
            per_tenant: 16,
            per_endpoint: 8,
            poll: Duration::from_millis(250),
        }
    }
}

/// Events the intake may hold before an engine's reports are dropped.
const INTAKE_QUEUE: usize = 64 * 1024;
/// Events the intake takes at once.
const INTAKE_BATCH: usize = 256;
/// Event types an endpoint may name (there are four; repeats are allowed, up to this).
const MAX_EVENT_TYPES: usize = 16;
/// Beyond an attempt's timeout, how long its lease lasts.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// How long a node holds a claimed timer (sending a notice is quick).
const TIMER_LEASE: Duration = Duration::from_secs(10);
/// Timers one node takes per look.
const TIMER_BATCH: usize = 100;
/// Deliveries listed at most (and by default) per call.
const MAX_LISTED: usize = 1000;
const DEFAULT_LISTED: usize = 100;
/// Bytes of an endpoint's description.
const MAX_DESCRIPTION_BYTES: usize = 1024;

/// Webhooks and reminders of one node. Cheap to clone.
#[derive(Clone)]
pub struct Hooks {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn HookStore>,
    backend: Arc<dyn Backend>,
    config: WebhookConfig,
    /// The server's request limits (an endpoint's label filter keeps to an ask's).
    limits: Limits,
    sender: Sender,
    /// Posts and updates the messages of Slack apps.
    slack: Slack,
    metrics: Metrics,
    /// Wakes this node's delivery loop when it queued something due now.
    wake: Notify,
    /// Events reported but not yet queued as deliveries (in the intake's channel or
    /// being taken).
    /// Shared with the tap (which the backend holds: no `Inner` there, no cycle).
    in_intake: Arc<AtomicUsize>,
}

/// The node's webhook tasks; they end when this drops.
pub struct HookTasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for HookTasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

pub(crate) fn timestamp(ms: u64) -> prost_types::Timestamp {
    (SystemTime::UNIX_EPOCH + Duration::from_millis(ms)).into()
}

impl Hooks {
    /// Starts webhooks on `backend`: its committed events are reported here, and this
    /// node's intake, delivery and timer loops run until the tasks drop.
    pub fn start(
        store: Arc<dyn HookStore>,
        backend: Arc<dyn Backend>,
        config: WebhookConfig,
        limits: Limits,
        metrics: Metrics,
        slack: Slack,
    ) -> (Self, HookTasks) {
        let inner = Arc::new(Inner {
            sender: Sender::new(config.allow_private, config.timeout),
            slack,
            store,
            backend,
            config,
            limits,
            metrics,
            wake: Notify::new(),
            in_intake: Arc::new(AtomicUsize::new(0)),
        });
        let (events_tx, events_rx) = mpsc::channel(INTAKE_QUEUE);
        let (queued, dropped) = (inner.in_intake.clone(), inner.in_intake.clone());
        let metrics = inner.metrics.clone();
        inner.backend.set_tap(Tap::new(
            events_tx,
            move || {
                queued.fetch_add(1, Ordering::AcqRel);
            },
            move || {
                dropped.fetch_sub(1, Ordering::AcqRel);
                metrics.webhook_deliveries("", "dropped", 1);
                warn!("the webhook intake is full: an event was dropped");
            },
        ));
        let tasks = HookTasks(vec![
            tokio::spawn(intake(inner.clone(), events_rx)),
            tokio::spawn(deliver_due(inner.clone())),
            tokio::spawn(remind_due(inner.clone())),
        ]);
        (Self { inner }, tasks)
    }

    /// Waits (at most `limit`) until every event reported so far is queued as
    /// deliveries: at shutdown, so that the drain's events are not lost with the node.
    pub async fn flush(&self, limit: Duration) {
        let flushed = async {
            while self.inner.in_intake.load(Ordering::Acquire) > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        if tokio::time::timeout(limit, flushed).await.is_err() {
            warn!("shutting down with webhook events not yet queued");
        }
    }

    /// Registers an endpoint after checking its URL (and that it is not internal,
    /// unless allowed); the response holds its secret, shown this once.
    pub async fn create_endpoint(
        &self,
        tenant: &str,
        request: CreateEndpointRequest,
    ) -> Result<Endpoint, AskError> {
        let mut violations = Vec::new();
        let target = Target::parse(request.url.trim());
        if let Err(e) = &target {
            violations.push(Violation::new("url", e.clone()));
        }
        let mut events = Vec::new();
        if request.events.len() > MAX_EVENT_TYPES {
            return Err(AskError::bad_request(
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
        if let Err(e) = validate::text("description", &request.description, MAX_DESCRIPTION_BYTES) {
            violations.extend(e.violations().iter().cloned());
        }
        violations.extend(validate::labels(&request.labels, &self.inner.limits));
        if !violations.is_empty() {
            return Err(AskError::BadRequest(violations));
        }
        let target = target.map_err(|e| AskError::bad_request("url", e))?;
        let resolved = tokio::time::timeout(
            self.inner.config.timeout,
            self.inner.sender.resolve(&target),
        )
        .await
        .unwrap_or_else(|_| Err(format!("resolving {} timed out", target.host)));
        resolved.map_err(|e| AskError::bad_request("url", e))?;
        // Two random UUIDs: 244 bits from the OS's generator.
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(Uuid::new_v4().as_bytes());
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
            secret: format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(key)
            ),
            created_ms: now_ms(),
            session_prefix: String::new(),
            slack: None,
        };
        self.inner.store.create_endpoint(&record).await?;
        debug!(endpoint = %record.id, "webhook endpoint created");
        Ok(endpoint_of(&record, true))
    }

    /// The tenant's endpoints, oldest first, without their secrets.
    pub async fn list_endpoints(&self, tenant: &str) -> Result<Vec<Endpoint>, AskError> {
        Ok(self
            .inner
            .store
            .endpoints(tenant)
            .await?
            .iter()
            .filter(|e| e.slack.is_none())
            .map(|e| endpoint_of(e, false))
            .collect())
    }

    pub async fn delete_endpoint(&self, tenant: &str, id: &str) -> Result<(), AskError> {
        self.delete(tenant, id, false).await
    }

    /// Deletes a webhook endpoint (`slack` false) or a Slack app (true); NOT_FOUND for
    /// the other kind, as for a missing one.
    async fn delete(&self, tenant: &str, id: &str, slack: bool) -> Result<(), AskError> {
        let what = if slack {
            "Slack app"
        } else {
            "webhook endpoint"
        };
        let not_found = || AskError::NotFound(format!("no {what} with that id"));
        let store = &self.inner.store;
        match store.endpoint(tenant, id).await? {
            Some(record) if record.slack.is_some() == slack => {}
            _ => return Err(not_found()),
        }
        match store.delete_endpoint(tenant, id).await? {
            true => Ok(()),
            false => Err(not_found()),
        }
    }

    /// Connects a Slack app of the tenant (see [`Slack::connect`]).
    pub async fn connect_slack(
        &self,
        tenant: &str,
        request: ConnectSlackRequest,
    ) -> Result<SlackApp, AskError> {
        let record = self
            .inner
            .slack
            .connect(tenant, request, &self.inner.limits)
            .await?;
        self.inner.store.create_endpoint(&record).await?;
        debug!(app = %record.id, "Slack app connected");
        slack::app_of(&record).ok_or_else(|| AskError::Internal("not a Slack app".into()))
    }

    /// The tenant's Slack apps, oldest first, without their secrets.
    pub async fn list_slack_apps(&self, tenant: &str) -> Result<Vec<SlackApp>, AskError> {
        let endpoints = self.inner.store.endpoints(tenant).await?;
        Ok(endpoints.iter().filter_map(slack::app_of).collect())
    }

    pub async fn disconnect_slack(&self, tenant: &str, id: &str) -> Result<(), AskError> {
        self.delete(tenant, id, true).await
    }

    /// The store, for Slack's interactivity (apps, replay notes).
    pub(crate) fn store(&self) -> &Arc<dyn HookStore> {
        &self.inner.store
    }

    pub(crate) fn slack(&self) -> &Slack {
        &self.inner.slack
    }

    pub async fn list_deliveries(
        &self,
        tenant: &str,
        request: &ListDeliveriesRequest,
    ) -> Result<Vec<Delivery>, AskError> {
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
    pub async fn redeliver(&self, tenant: &str, id: &str) -> Result<Delivery, AskError> {
        let now = now_ms();
        let record = self
            .inner
            .store
            .redeliver(tenant, id, now, now + millis(self.inner.config.retry_for))
            .await?;
        self.inner.wake.notify_one();
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

/// The payload of an event: `{"type", "timestamp", "data"}` with `data` the event in
/// proto3 JSON, plus its session `cursor` (and, for a reminder, its count).
fn payload(
    event_type: EventType,
    message_name: &str,
    event: &impl prost::Message,
    cursor: &str,
    reminder: Option<u32>,
) -> Result<String, AskError> {
    let mut data = crate::protojson::to_value(message_name, event)
        .map_err(|e| AskError::Internal(format!("webhook payload: {e:#}")))?;
    if let Some(fields) = data.as_object_mut() {
        fields.insert("cursor".into(), cursor.into());
        if let Some(count) = reminder {
            fields.insert("reminder".into(), count.into());
        }
    }
    let body = serde_json::json!({
        "type": event_type.as_str(),
        "timestamp": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        "data": data,
    });
    Ok(body.to_string())
}

impl Inner {
    /// Queues one delivery of the event per endpoint of the tenant that wants it.
    async fn fan_out(
        &self,
        tenant: &str,
        endpoints: &[EndpointRecord],
        event_type: EventType,
        requested: &Requested,
        resolved: Option<&Resolved>,
        body: impl FnOnce() -> Result<String, AskError>,
    ) -> Result<(), AskError> {
        let wanting: Vec<_> = endpoints
            .iter()
            .filter(|e| e.wants(event_type, &requested.session_id, &requested.labels))
            .collect();
        if wanting.is_empty() {
            return Ok(());
        }
        // A webhook gets the event's payload; a Slack app the ask (and its resolution).
        let body = match wanting.iter().any(|e| e.slack.is_none()) {
            true => body()?,
            false => String::new(),
        };
        let slack_body = match wanting.iter().any(|e| e.slack.is_some()) {
            true => slack::delivery_body(requested, resolved)?,
            false => String::new(),
        };
        let now = now_ms();
        let deliveries: Vec<_> = wanting
            .iter()
            .map(|endpoint| DeliveryRecord {
                id: format!("msg_{}", Uuid::now_v7().simple()),
                tenant: tenant.to_owned(),
                endpoint_id: endpoint.id.clone(),
                event_type,
                session_id: requested.session_id.clone(),
                rpc_id: requested.rpc_id.clone(),
                body: match endpoint.slack {
                    Some(_) => slack_body.clone(),
                    None => body.clone(),
                },
                status: Status::Pending,
                attempts: 0,
                last_error: String::new(),
                created_ms: now,
                retry_until_ms: now + millis(self.config.retry_for),
                next_attempt_ms: now,
                last_attempt_ms: 0,
            })
            .collect();
        let queued = self.store.enqueue(tenant, &deliveries).await?;
        if queued < deliveries.len() {
            let dropped = (deliveries.len() - queued) as u64;
            self.metrics.webhook_deliveries(tenant, "dropped", dropped);
            warn!(
                %tenant,
                dropped,
                "the tenant's webhook queue is full ({} deliveries): events dropped",
                self.config.limits.max_queued
            );
        }
        if queued > 0 {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Turns one committed event into deliveries to the tenant's `endpoints`, and
    /// starts or stops its ask's timer.
    async fn take(
        &self,
        committed: Committed,
        endpoints: &[EndpointRecord],
    ) -> Result<(), AskError> {
        let tenant = &*committed.tenant;
        match &committed.message.event {
            Some(Event::Requested(requested)) => {
                if let Some(notify) = &requested.notify {
                    self.schedule(tenant, requested, notify).await?;
                }
                let body = || {
                    payload(
                        EventType::Requested,
                        "askgate.v1.Requested",
                        requested,
                        &committed.message.cursor,
                        None,
                    )
                };
                self.fan_out(
                    tenant,
                    endpoints,
                    EventType::Requested,
                    requested,
                    None,
                    body,
                )
                .await
            }
            Some(Event::Resolved(resolved)) => {
                let asked = committed.asked.as_ref().and_then(Asked::requested);
                let Some(asked) = asked.as_deref() else {
                    return Ok(());
                };
                if asked.notify.is_some() {
                    let id = timer_id(tenant, &asked.session_id, &asked.rpc_id);
                    self.store.cancel_timer(&id).await?;
                }
                let body = || {
                    payload(
                        EventType::Resolved,
                        "askgate.v1.Resolved",
                        resolved,
                        &committed.message.cursor,
                        None,
                    )
                };
                self.fan_out(
                    tenant,
                    endpoints,
                    EventType::Resolved,
                    asked,
                    Some(resolved),
                    body,
                )
                .await
            }
            _ => Ok(()),
        }
    }

    async fn schedule(
        &self,
        tenant: &str,
        requested: &Requested,
        notify: &NotifyPolicy,
    ) -> Result<(), AskError> {
        // Rounded up to the millisecond: a notice is never sent before its time after
        // the ask's `requested_at`.
        let asked_ms = requested
            .requested_at
            .and_then(|t| SystemTime::try_from(t).ok())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or_else(now_ms, |d| {
                u64::try_from(d.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)
            });
        let timer = TimerRecord {
            tenant: tenant.to_owned(),
            session_id: requested.session_id.clone(),
            rpc_id: requested.rpc_id.clone(),
            asked_ms,
            remind_after_ms: notify.remind_after_ms.into(),
            remind_every_ms: notify.remind_every_ms.into(),
            max_reminders: notify.max_reminders,
            escalate_after_ms: notify.escalate_after_ms.into(),
            reminders: 0,
            escalated: false,
        };
        match timer.next() {
            Some((due, _)) => self.store.schedule(&timer, due).await,
            None => Ok(()),
        }
    }

    /// Sends a timer's due notice (unless its ask is resolved) and schedules the next.
    async fn fire(&self, mut timer: TimerRecord) -> Result<(), AskError> {
        let Some((_, due)) = timer.next() else {
            return self.store.finish_timer(&timer, None).await;
        };
        let (notice, event_type) = match due {
            Due::Reminder => (
                Event::Reminder(Reminder {
                    rpc_id: timer.rpc_id.clone(),
                    session_id: timer.session_id.clone(),
                    count: timer.reminders + 1,
                    sent_at: Some(SystemTime::now().into()),
                }),
                EventType::Reminder,
            ),
            Due::Escalation => (
                Event::Escalated(Escalated {
                    rpc_id: timer.rpc_id.clone(),
                    session_id: timer.session_id.clone(),
                    sent_at: Some(SystemTime::now().into()),
                }),
                EventType::Escalated,
            ),
        };
        let key = SessionKey::new(timer.tenant.as_str(), timer.session_id.as_str());
        let Some(noticed) = self.backend.notify(&key, &timer.rpc_id, notice).await? else {
            // Resolved meanwhile: nothing more to send.
            return self.store.finish_timer(&timer, None).await;
        };
        let reminder = match due {
            Due::Reminder => {
                timer.reminders += 1;
                Some(timer.reminders)
            }
            Due::Escalation => {
                timer.escalated = true;
                None
            }
        };
        self.metrics.notice(&timer.tenant, event_type.as_str());
        let requested = &noticed.requested;
        let body = || {
            payload(
                event_type,
                "askgate.v1.Requested",
                requested,
                &noticed.message.cursor,
                reminder,
            )
        };
        let endpoints = self.store.endpoints(&timer.tenant).await?;
        self.fan_out(&timer.tenant, &endpoints, event_type, requested, None, body)
            .await?;
        self.store
            .finish_timer(&timer, timer.next().map(|(at, _)| at))
            .await
    }

    /// The delay before the attempt after `attempts` failed ones: exponential from
    /// `retry_initial`, capped at `retry_max`, plus up to as much again as jitter.
    fn backoff(&self, attempts: u32) -> Duration {
        backon::ExponentialBuilder::new()
            .with_min_delay(self.config.retry_initial)
            .with_max_delay(self.config.retry_max)
            .with_jitter()
            .without_max_times()
            .build()
            .nth(attempts.saturating_sub(1) as usize)
            .unwrap_or(self.config.retry_max)
    }

    /// One attempt of a claimed delivery, and its outcome recorded.
    async fn attempt(&self, mut delivery: DeliveryRecord) {
        let endpoint = match self
            .store
            .endpoint(&delivery.tenant, &delivery.endpoint_id)
            .await
        {
            Ok(endpoint) => endpoint,
            Err(e) => {
                // The lease runs out and the delivery is tried again.
                warn!("reading a webhook endpoint failed: {e}");
                return;
            }
        };
        let now = now_ms();
        delivery.last_attempt_ms = now;
        let result = match &endpoint {
            None => Err("the endpoint was deleted".to_owned()),
            Some(
                app @ EndpointRecord {
                    slack: Some(target),
                    ..
                },
            ) => {
                self.slack
                    .deliver(&*self.store, app, target, &delivery)
                    .await
            }
            Some(endpoint) => self.post(endpoint, &delivery).await,
        };
        let outcome = match result {
            Ok(()) => {
                delivery.status = Status::Delivered;
                delivery.last_error.clear();
                "delivered"
            }
            Err(error) => {
                delivery.last_error = error;
                let next = now_ms() + millis(self.backoff(delivery.attempts));
                if endpoint.is_some() && next <= delivery.retry_until_ms {
                    delivery.next_attempt_ms = next;
                    "retried"
                } else {
                    delivery.status = Status::Failed;
                    "failed"
                }
            }
        };
        debug!(
            delivery = %delivery.id,
            attempts = delivery.attempts,
            outcome,
            error = %delivery.last_error,
            "webhook attempt"
        );
        self.metrics
            .webhook_deliveries(&delivery.tenant, outcome, 1);
        match self.store.finish_attempt(&delivery).await {
            Ok(true) => {}
            Ok(false) => debug!(delivery = %delivery.id, "the attempt's lease had moved on"),
            Err(e) => warn!(delivery = %delivery.id, "recording a webhook attempt failed: {e}"),
        }
    }

    /// POSTs a delivery, signed now; an error text unless the endpoint answered 2xx.
    async fn post(
        &self,
        endpoint: &EndpointRecord,
        delivery: &DeliveryRecord,
    ) -> Result<(), String> {
        let target = Target::parse(&endpoint.url)?;
        let signer = standardwebhooks::Webhook::new(&endpoint.secret)
            .map_err(|e| format!("the endpoint's secret is unusable: {e}"))?;
        let timestamp = (now_ms() / 1000) as i64;
        let signature = signer
            .sign(&delivery.id, timestamp, delivery.body.as_bytes())
            .map_err(|e| format!("signing failed: {e}"))?;
        let headers = [
            ("webhook-id", delivery.id.clone()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ];
        let (status, _) = self
            .sender
            .post(&target, &headers, Bytes::from(delivery.body.clone()))
            .await?;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("HTTP {}", status.as_u16())),
        }
    }
}

/// The node's intake: committed events to deliveries, in order. What arrived meanwhile
/// is taken as one batch, reading each tenant's endpoints once per batch: under load the
/// store is read once per batch, not once per event.
async fn intake(inner: Arc<Inner>, mut events: mpsc::Receiver<Committed>) {
    let mut batch = Vec::with_capacity(INTAKE_BATCH);
    while events.recv_many(&mut batch, INTAKE_BATCH).await > 0 {
        let mut endpoints: HashMap<Arc<str>, Result<Vec<EndpointRecord>, AskError>> =
            HashMap::new();
        for committed in batch.drain(..) {
            let tenant = committed.tenant.clone();
            if !endpoints.contains_key(&tenant) {
                let read = inner.store.endpoints(&tenant).await;
                endpoints.insert(tenant.clone(), read);
            }
            let taken = match &endpoints[&tenant] {
                Ok(list) => inner.take(committed, list).await,
                Err(e) => Err(e.clone()),
            };
            if let Err(e) = taken {
                inner.metrics.webhook_deliveries(&tenant, "dropped", 1);
                warn!(%tenant, "queueing webhook deliveries failed: {e}");
            }
            inner.in_intake.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Whether a loop's store is failing: the first failure of a streak is a warning, the
/// rest are debug lines (the store's health is on the health service already), and
/// the recovery is said once.
#[derive(Default)]
struct Streak(bool);

impl Streak {
    fn failed(&mut self, what: &str, error: &AskError) {
        if std::mem::replace(&mut self.0, true) {
            debug!("{what} failed again: {error}");
        } else {
            warn!("{what} failed: {error}");
        }
    }

    fn succeeded(&mut self, what: &str) {
        if std::mem::take(&mut self.0) {
            tracing::info!("{what} works again");
        }
    }
}

/// What the node has in flight, by tenant and by endpoint: the counts its claims
/// share slots by.
type InFlight = Arc<parking_lot::Mutex<Shares>>;

/// One attempt in flight; its tenant's and endpoint's counts go down when it ends.
struct Flying {
    in_flight: InFlight,
    tenant: String,
    endpoint: String,
}

impl Drop for Flying {
    fn drop(&mut self) {
        let mut shares = self.in_flight.lock();
        let Shares {
            tenants, endpoints, ..
        } = &mut *shares;
        for (counts, key) in [(tenants, &self.tenant), (endpoints, &self.endpoint)] {
            if let Some(count) = counts.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(key);
                }
            }
        }
    }
}

/// The node's delivery loop: claims what is due, as many as it has room for, each
/// tenant and endpoint within its share of the slots.
async fn deliver_due(inner: Arc<Inner>) {
    let slots = Arc::new(Semaphore::new(inner.config.concurrency.max(1)));
    let in_flight: InFlight = Arc::new(parking_lot::Mutex::new(Shares {
        per_tenant: inner.config.per_tenant.max(1),
        per_endpoint: inner.config.per_endpoint.max(1),
        ..Shares::default()
    }));
    let mut streak = Streak::default();
    loop {
        tokio::select! {
            () = inner.wake.notified() => {}
            () = tokio::time::sleep(inner.config.poll) => {}
        }
        let free = slots.available_permits();
        if free == 0 {
            continue;
        }
        let now = now_ms();
        let lease_until = now + millis(inner.config.timeout + LEASE_MARGIN);
        let shares = in_flight.lock().clone();
        let claimed = match inner
            .store
            .claim_deliveries(now, lease_until, free, &shares)
            .await
        {
            Ok(claimed) => {
                streak.succeeded("claiming webhook deliveries");
                claimed
            }
            Err(e) => {
                streak.failed("claiming webhook deliveries", &e);
                continue;
            }
        };
        for delivery in claimed {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let flying = {
                let mut shares = in_flight.lock();
                // Counted whether or not the claim found room (an older record with
                // no owner): the count is what the node has in flight.
                *shares.tenants.entry(delivery.tenant.clone()).or_default() += 1;
                *shares
                    .endpoints
                    .entry(delivery.endpoint_id.clone())
                    .or_default() += 1;
                Flying {
                    in_flight: in_flight.clone(),
                    tenant: delivery.tenant.clone(),
                    endpoint: delivery.endpoint_id.clone(),
                }
            };
            let inner = inner.clone();
            tokio::spawn(async move {
                inner.attempt(delivery).await;
                drop(flying);
                drop(slot);
            });
        }
    }
}

/// The node's timer loop: sends due reminders and escalations.
async fn remind_due(inner: Arc<Inner>) {
    let mut streak = Streak::default();
    loop {
        tokio::time::sleep(inner.config.poll).await;
        let now = now_ms();
        let claimed = match inner
            .store
            .claim_timers(now, now + millis(TIMER_LEASE), TIMER_BATCH)
            .await
        {
            Ok(claimed) => {
                streak.succeeded("claiming reminder timers");
                claimed
            }
            Err(e) => {
                streak.failed("claiming reminder timers", &e);
                continue;
            }
        };
        for timer in claimed {
            let rpc_id = timer.rpc_id.clone();
            // On failure the lease runs out and the timer is taken again.
            if let Err(e) = inner.fire(timer).await {
                warn!(%rpc_id, "sending a reminder failed: {e}");
            }
        }
    }
}
