//! What the webhook stores keep: endpoints, deliveries and reminder timers, as records
//! both engines store the same way (JSON in Redis, values in memory).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// People are kept beside the channels' records (`service People`).
pub use crate::domain::people::{Delegate, PersonRecord};
/// So are policy sets (`service Policies`).
pub use crate::domain::policy_set::{GrantRecord, GrantScope, Mode, PolicySetRecord};

/// The event types an endpoint may receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "ask.requested")]
    Requested,
    #[serde(rename = "ask.resolved")]
    Resolved,
    #[serde(rename = "ask.reminder")]
    Reminder,
    #[serde(rename = "ask.escalated")]
    Escalated,
}

impl EventType {
    pub const ALL: [Self; 4] = [
        Self::Requested,
        Self::Resolved,
        Self::Reminder,
        Self::Escalated,
    ];

    /// The wire name, e.g. `ask.requested`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "ask.requested",
            Self::Resolved => "ask.resolved",
            Self::Reminder => "ask.reminder",
            Self::Escalated => "ask.escalated",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// A registered endpoint of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointRecord {
    pub id: String,
    pub tenant: String,
    pub url: String,
    pub events: Vec<EventType>,
    pub description: String,
    /// Only asks whose labels include every one of these.
    pub labels: HashMap<String, String>,
    /// `whsec_…`: the signing secret.
    pub secret: String,
    /// Counts as someone following the tenant's sessions (Semantics 8).
    pub provides: bool,
    pub created_ms: u64,
    /// Only sessions whose id starts with this (empty: every session).
    #[serde(default)]
    pub session_prefix: String,
    /// A Slack app rather than a URL: where it posts, and its sealed secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackTarget>,
    /// Another chat channel (Telegram, email, ntfy) rather than a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelTarget>,
}

/// A chat channel an endpoint posts to instead of a URL, with its secrets sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ChannelTarget {
    Telegram(TelegramTarget),
    Email(EmailTarget),
    Ntfy(NtfyTarget),
}

/// Where an ntfy route publishes, and its access token as the server's key sealed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtfyTarget {
    pub server_url: String,
    pub topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Who an email route mails: each address gets its own mail, with links of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailTarget {
    pub to: Vec<String>,
}

/// Where a Telegram bot posts, and its secrets as the server's key sealed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelegramTarget {
    /// The bot's own user id and username (getMe).
    pub bot_user_id: i64,
    pub bot_username: String,
    /// The chat it posts to: a numeric id or `@channelusername`.
    pub chat_id: String,
    /// The bot token, sealed.
    pub bot_token: String,
    /// The secret token Telegram sends with every update (setWebhook), sealed.
    pub webhook_secret: String,
}

/// Where a Slack app posts, and its secrets as the server's key sealed them (the
/// store keeps them sealed; only the delivery runtime opens them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackTarget {
    pub team_id: String,
    pub channel: String,
    pub bot_token: String,
    pub signing_secret: String,
}

impl EndpointRecord {
    /// Whether this is a plain webhook endpoint (a URL), not a chat channel.
    pub fn is_webhook(&self) -> bool {
        self.slack.is_none() && self.channel.is_none()
    }

    /// The Telegram bot this endpoint is, if it is one.
    pub fn telegram(&self) -> Option<&TelegramTarget> {
        match &self.channel {
            Some(ChannelTarget::Telegram(target)) => Some(target),
            _ => None,
        }
    }

    /// The ntfy topic this endpoint is, if it is one.
    pub fn ntfy(&self) -> Option<&NtfyTarget> {
        match &self.channel {
            Some(ChannelTarget::Ntfy(target)) => Some(target),
            _ => None,
        }
    }

    /// The email route this endpoint is, if it is one.
    pub fn email(&self) -> Option<&EmailTarget> {
        match &self.channel {
            Some(ChannelTarget::Email(target)) => Some(target),
            _ => None,
        }
    }

    /// Whether this endpoint receives `event` of an ask in `session` with `labels`.
    pub fn wants(&self, event: EventType, session: &str, labels: &HashMap<String, String>) -> bool {
        self.events.contains(&event)
            && session.starts_with(&self.session_prefix)
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Pending,
    Delivered,
    Failed,
}

/// One event for one endpoint, with the state of its attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The `webhook-id`, the same on every attempt.
    pub id: String,
    pub tenant: String,
    pub endpoint_id: String,
    pub event_type: EventType,
    pub session_id: String,
    pub rpc_id: String,
    /// The JSON payload, signed anew at each attempt.
    pub body: String,
    pub status: Status,
    /// Attempts made (or started) so far. A store bumps it as it hands the delivery
    /// out; an outcome recorded with another count is a stale one and is dropped.
    pub attempts: u32,
    pub last_error: String,
    pub created_ms: u64,
    /// No retry is scheduled past this; the delivery then ends FAILED.
    pub retry_until_ms: u64,
    /// While pending: when the next attempt is due.
    pub next_attempt_ms: u64,
    pub last_attempt_ms: u64,
    /// The `traceparent` of its ask's span (empty when traces are not exported): the
    /// attempts' spans are its children.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traceparent: String,
}

/// The reminder schedule of one pending ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRecord {
    pub tenant: String,
    pub session_id: String,
    pub rpc_id: String,
    /// When the ask was registered (ms since the epoch): the schedule counts from it.
    pub asked_ms: u64,
    pub remind_after_ms: u64,
    pub remind_every_ms: u64,
    pub max_reminders: u32,
    pub escalate_after_ms: u64,
    /// Reminders sent so far.
    pub reminders: u32,
    pub escalated: bool,
    /// The `after_ms` of each of the ask's escalation steps, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<u64>,
    /// Escalation steps taken so far.
    #[serde(default)]
    pub steps_done: u32,
}

/// What a timer has due next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Reminder,
    Escalation,
    /// The escalation step at this index.
    Step(u32),
}

impl TimerRecord {
    /// The timer's identity in a store: one per ask.
    pub fn id(&self) -> String {
        timer_id(&self.tenant, &self.session_id, &self.rpc_id)
    }

    /// The next notice and when it is due, if any is left. A reminder and an
    /// escalation due at the same time go reminder first.
    pub fn next(&self) -> Option<(u64, Due)> {
        let reminder = (self.remind_after_ms > 0
            && (self.max_reminders == 0 || self.reminders < self.max_reminders)
            && (self.reminders == 0 || self.remind_every_ms > 0))
            .then(|| {
                let at = self.asked_ms
                    + self.remind_after_ms
                    + u64::from(self.reminders) * self.remind_every_ms;
                (at, Due::Reminder)
            });
        let escalation = (self.escalate_after_ms > 0 && !self.escalated)
            .then_some((self.asked_ms + self.escalate_after_ms, Due::Escalation));
        let step = self
            .steps
            .get(self.steps_done as usize)
            .map(|after| (self.asked_ms + after, Due::Step(self.steps_done)));
        // The earliest; at the same time, a reminder, then the escalation, then a step.
        [reminder, escalation, step]
            .into_iter()
            .flatten()
            .reduce(|first, next| if next.0 < first.0 { next } else { first })
    }
}

/// The store key of an ask's timer: unambiguous whatever the parts hold.
pub fn timer_id(tenant: &str, session_id: &str, rpc_id: &str) -> String {
    serde_json::json!([tenant, session_id, rpc_id]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer() -> TimerRecord {
        TimerRecord {
            tenant: "t".into(),
            session_id: "s".into(),
            rpc_id: "r".into(),
            asked_ms: 1000,
            remind_after_ms: 100,
            remind_every_ms: 50,
            max_reminders: 3,
            escalate_after_ms: 175,
            reminders: 0,
            escalated: false,
            steps: vec![150, 400],
            steps_done: 0,
        }
    }

    #[test]
    fn a_schedule_runs_reminders_and_one_escalation_in_time_order() {
        let mut timer = timer();
        let mut seen = Vec::new();
        while let Some((at, due)) = timer.next() {
            seen.push((at, due));
            match due {
                Due::Reminder => timer.reminders += 1,
                Due::Escalation => timer.escalated = true,
                Due::Step(n) => timer.steps_done = n + 1,
            }
        }
        assert_eq!(
            seen,
            [
                (1100, Due::Reminder),
                (1150, Due::Reminder),
                (1150, Due::Step(0)),
                (1175, Due::Escalation),
                (1200, Due::Reminder),
                (1400, Due::Step(1)),
            ]
        );
    }

    #[test]
    fn zero_means_none_or_no_limit() {
        let none = TimerRecord {
            remind_after_ms: 0,
            escalate_after_ms: 0,
            steps: Vec::new(),
            ..timer()
        };
        assert_eq!(none.next(), None);
        let once = TimerRecord {
            remind_every_ms: 0,
            escalate_after_ms: 0,
            reminders: 1,
            steps_done: 2,
            ..timer()
        };
        assert_eq!(once.next(), None);
        let unlimited = TimerRecord {
            max_reminders: 0,
            reminders: 1000,
            escalate_after_ms: 0,
            steps: Vec::new(),
            ..timer()
        };
        assert_eq!(unlimited.next(), Some((1000 + 100 + 50_000, Due::Reminder)));
    }

    #[test]
    fn label_filters_need_every_label() {
        let endpoint = EndpointRecord {
            id: "e".into(),
            tenant: "t".into(),
            url: "https://example.com".into(),
            events: vec![EventType::Requested],
            description: String::new(),
            labels: HashMap::from([("team".into(), "infra".into())]),
            secret: String::new(),
            provides: true,
            created_ms: 0,
            session_prefix: "ops/".into(),
            slack: None,
            channel: None,
        };
        let infra = HashMap::from([("team".into(), "infra".into()), ("x".into(), "y".into())]);
        assert!(endpoint.wants(EventType::Requested, "ops/1", &infra));
        assert!(!endpoint.wants(EventType::Requested, "dev/1", &infra));
        assert!(!endpoint.wants(EventType::Resolved, "ops/1", &infra));
        assert!(!endpoint.wants(EventType::Requested, "ops/1", &HashMap::new()));
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
    }
}
