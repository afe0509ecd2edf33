//! Reminders and escalation: each node's timer loop claims due timers, sends the
//! notice to the session's subscribers and queues its deliveries.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{Escalated, NotifyPolicy, Reminder, Requested, subscribe_response::Event};
use tracing::warn;

use super::{Inner, Streak, intake::payload};
use crate::channel::clock::{millis, now_ms};
use crate::{
    backend::hooks::records::{Due, EventType, TimerRecord},
    domain::{Error, SessionKey},
};

/// How long a node holds a claimed timer (sending a notice is quick).
const TIMER_LEASE: Duration = Duration::from_secs(10);
/// Timers one node takes per look.
const TIMER_BATCH: usize = 100;

impl Inner {
    pub(super) async fn schedule(
        &self,
        tenant: &str,
        requested: &Requested,
        notify: &NotifyPolicy,
    ) -> Result<(), Error> {
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
        self.store
            .finish_timer(&timer, timer.next().map(|(at, _)| at))
            .await
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
