//! Reminders and escalation: each node's timer loop claims due timers, sends the
//! notice to the session's subscribers and queues its deliveries.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{Escalated, Reminder, Requested, subscribe_response::Event};
use serde_json::json;
use tracing::warn;

use super::{Inner, Streak, intake::payload};
use crate::channel::clock::{millis, now_ms};
use crate::{
    backend::{
        Noticed,
        audit::{self, AuditEntry},
        hooks::records::{Due, EndpointRecord, EventType, TimerRecord},
    },
    domain::{Error, SessionKey, approval},
};

/// How long a node holds a claimed timer (sending a notice is quick).
const TIMER_LEASE: Duration = Duration::from_secs(10);
/// Timers one node takes per look.
const TIMER_BATCH: usize = 100;

impl Inner {
    /// Starts the timer of an ask with a reminder schedule or escalation steps.
    pub(super) async fn schedule(&self, tenant: &str, requested: &Requested) -> Result<(), Error> {
        // Rounded up to the millisecond: a notice is never sent before its time after
        // the ask's `requested_at`.
        let asked_ms = requested
            .requested_at
            .map_or_else(now_ms, approval::asked_ms);
        let notify = requested.notify.unwrap_or_default();
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
            steps: requested.escalation.iter().map(|s| s.after_ms).collect(),
            steps_done: 0,
        };
        match timer.next() {
            Some((due, _)) => self.store.schedule(&timer, due).await,
            None => Ok(()),
        }
    }

    /// Sends a timer's due notice (unless its ask is resolved) and schedules the next.
    async fn fire(&self, mut timer: TimerRecord) -> Result<(), Error> {
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
            Due::Escalation | Due::Step(_) => (
                Event::Escalated(Escalated {
                    rpc_id: timer.rpc_id.clone(),
                    session_id: timer.session_id.clone(),
                    sent_at: Some(SystemTime::now().into()),
                    step: match due {
                        Due::Step(n) => n + 1,
                        _ => 0,
                    },
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
            Due::Step(n) => {
                timer.steps_done = n + 1;
                None
            }
        };
        self.observer.notice(&timer.tenant, event_type.as_str());
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
        let fanned = super::intake::Fanned {
            kind: event_type,
            id: None,
        };
        self.fan_out(&timer.tenant, &endpoints, fanned, requested, None, body)
            .await?;
        if let Due::Step(n) = due {
            self.step(&timer, n, &noticed, &endpoints).await?;
        }
        self.store
            .finish_timer(&timer, timer.next().map(|(at, _)| at))
            .await
    }
}

impl Inner {
    /// Escalation step `n` of the ask `noticed` came: the channel connections it names
    /// are sent the ask (as they were at its start; the same delivery id whichever node
    /// or attempt takes the step), and the audit log records the step.
    async fn step(
        &self,
        timer: &TimerRecord,
        n: u32,
        noticed: &Noticed,
        endpoints: &[EndpointRecord],
    ) -> Result<(), Error> {
        let requested = &noticed.requested;
        let Some(step) = requested.escalation.get(n as usize) else {
            return Ok(());
        };
        let named: Vec<&EndpointRecord> = endpoints
            .iter()
            .filter(|e| step.notify_channels.contains(&e.id))
            .collect();
        let missing: Vec<&String> = step
            .notify_channels
            .iter()
            .filter(|id| !named.iter().any(|e| &e.id == *id))
            .collect();
        let id = format!("{}/step-{}", timer.rpc_id, n + 1);
        let fanned = super::intake::Fanned {
            kind: EventType::Requested,
            id: Some(&id),
        };
        let body = || {
            payload(
                EventType::Requested,
                "askgate.v1.Requested",
                requested,
                &noticed.message.cursor,
                None,
            )
        };
        self.queue(&timer.tenant, &named, fanned, (requested, None), body)
            .await?;
        let entry = escalation_entry(timer, n, step, &missing);
        self.audit.record(vec![entry]).await
    }
}

/// The audit record of escalation step `n` of `timer`'s ask: who it added (or put in
/// place), whom it notified, and the connections it named that are gone.
fn escalation_entry(
    timer: &TimerRecord,
    n: u32,
    step: &askgate_proto::v1::EscalationStep,
    missing: &[&String],
) -> AuditEntry {
    let mut fields = serde_json::Map::new();
    fields.insert("kind".into(), "ask.escalated".into());
    fields.insert("at".into(), audit::at(SystemTime::now()));
    fields.insert("session_id".into(), timer.session_id.clone().into());
    fields.insert("rpc_id".into(), timer.rpc_id.clone().into());
    fields.insert("step".into(), (n + 1).into());
    if let Some(approvers) = &step.approvers {
        fields.insert(
            "approvers".into(),
            json!({ "subjects": approvers.subjects, "groups": approvers.groups }),
        );
    }
    fields.insert("replace".into(), step.replace.into());
    fields.insert("notified".into(), json!(step.notify_channels));
    if !missing.is_empty() {
        fields.insert("missing".into(), json!(missing));
    }
    AuditEntry {
        tenant: timer.tenant.clone(),
        id: format!(
            "ask.escalated\u{1f}{}\u{1f}{}\u{1f}{}",
            timer.session_id,
            timer.rpc_id,
            n + 1
        ),
        fields,
    }
}

/// The node's timer loop: sends due reminders and escalations.
pub(super) async fn remind_due(inner: Arc<Inner>) {
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
