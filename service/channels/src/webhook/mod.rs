//! Plain webhooks: each event of a tenant that an endpoint wants, POSTed to its URL
//! and signed per the Standard Webhooks spec with the endpoint's secret, anew at each
//! attempt, with the same `webhook-id` (docs/webhooks.md).

pub mod admin;

use askgate_proto::v1::{CreateEndpointRequest, Endpoint};
use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::channel::{
    About, Channel, Checks, Connector, Outbound,
    clock::{now_ms, timestamp},
};
use crate::{
    backend::hooks::records::{DeliveryRecord, EndpointRecord, EventType},
    domain::{Error, Violation, connect, echo},
    egress::send::Target,
};

/// Event types an endpoint may name (there are four; repeats are allowed, up to this).
const MAX_EVENT_TYPES: usize = 16;

/// The plain webhook channel.
#[derive(Debug, Default)]
pub struct Webhook;

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

/// The event types a request names, checked (none: every type).
fn events(request: &CreateEndpointRequest) -> Result<(Vec<EventType>, Vec<Violation>), Error> {
    if request.events.len() > MAX_EVENT_TYPES {
        return Err(Error::bad_request(
            "events",
            format!("at most {MAX_EVENT_TYPES} event types"),
        ));
    }
    let (mut events, mut violations) = (Vec::new(), Vec::new());
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
    Ok((events, violations))
}

/// The webhook channel, as the registry lists it.
impl crate::Registered for Webhook {
    fn build(_setup: &crate::Setup<'_>) -> anyhow::Result<Self> {
        Ok(Webhook)
    }
}

pub const ABOUT: About = About {
    name: "webhook",
    noun: "webhook endpoint",
    answered_through: false,
    // Nobody answers through a webhook.
    knows_who: false,
};

#[async_trait]
impl Channel for Webhook {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn holds(&self, record: &EndpointRecord) -> bool {
        record.is_webhook()
    }

    /// POSTs the delivery, signed now; an error text unless the endpoint answered 2xx.
    async fn deliver(
        &self,
        out: &Outbound<'_>,
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
        let (status, _) = out
            .sender
            .post(&target, &headers, Bytes::from(delivery.body.clone()))
            .await?;
        match status.is_success() {
            true => Ok(()),
            false => Err(format!("HTTP {}", status.as_u16())),
        }
    }
}

#[async_trait]
impl Connector for Webhook {
    type Request = CreateEndpointRequest;
    type Connection = Endpoint;

    const CONNECTED: &'static str = "endpoint.created";
    const DISCONNECTED: &'static str = "endpoint.deleted";

    /// Checks the URL (and that it is not internal, unless allowed) and the event types;
    /// the record holds a new signing secret.
    async fn connect(
        &self,
        tenant: &str,
        request: CreateEndpointRequest,
        checks: &Checks<'_>,
    ) -> Result<EndpointRecord, Error> {
        let mut violations = Vec::new();
        let target = Target::parse(request.url.trim());
        if let Err(e) = &target {
            violations.push(Violation::new("url", e.clone()));
        }
        let (events, wrong) = events(&request)?;
        violations.extend(wrong);
        violations.extend(connect::described_filter(
            &request.description,
            &request.labels,
            checks.limits,
        ));
        if !violations.is_empty() {
            return Err(Error::BadRequest(violations));
        }
        let target = target.map_err(|e| Error::bad_request("url", e))?;
        checks.reachable("url", &target).await?;
        Ok(EndpointRecord {
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
        })
    }

    /// The endpoint, with its secret only when just created.
    fn shown(&self, record: &EndpointRecord, fresh: bool) -> Option<Endpoint> {
        self.holds(record).then(|| Endpoint {
            id: record.id.clone(),
            url: record.url.clone(),
            events: record
                .events
                .iter()
                .map(|e| e.as_str().to_owned())
                .collect(),
            description: record.description.clone(),
            labels: record.labels.clone(),
            secret: match fresh {
                true => record.secret.clone(),
                false => String::new(),
            },
            provides: record.provides,
            created_at: Some(timestamp(record.created_ms)),
        })
    }

    fn details(&self, endpoint: &Endpoint) -> Value {
        json!({ "id": endpoint.id, "url": endpoint.url, "events": endpoint.events })
    }
}
