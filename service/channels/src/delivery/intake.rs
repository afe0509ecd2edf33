//! The intake: each committed event becomes one delivery per endpoint that wants it,
//! and starts or stops its ask's reminder timer.

use std::{
    collections::HashMap,
    sync::{Arc, atomic::Ordering},
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{Requested, Resolved, subscribe_response::Event};
use tokio::{sync::mpsc, time::Instant};
use tracing::{error, warn};
use uuid::Uuid;

use super::Inner;
use crate::channel::clock::{millis, now_ms};
use crate::{
    backend::{
        Asked, Committed, OutboxEntry,
        audit_log::Audit,
        hooks::records::{DeliveryRecord, EndpointRecord, EventType, Status, timer_id},
    },
    domain::{Error, approval},
};

/// Events the intake may hold before an engine's reports are dropped.
pub(super) const INTAKE_QUEUE: usize = 64 * 1024;
/// Events the intake takes at once.
const INTAKE_BATCH: usize = 256;

/// The payload of an event: `{"type", "timestamp", "data"}` with `data` the event in
/// proto3 JSON, plus its session `cursor` (and, for a reminder, its count).
pub(super) fn payload(
    event_type: EventType,
    message_name: &str,
    event: &impl prost::Message,
    cursor: &str,
    reminder: Option<u32>,
) -> Result<String, Error> {
    let mut data = crate::protojson::to_value(message_name, event)
        .map_err(|e| Error::Internal(format!("webhook payload: {e:#}")))?;
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

/// An event to fan out: its kind, and for one that may be queued twice (taken from an
/// outbox after its node was slow, or died after queueing it) its name (a session and a
/// cursor): its deliveries then get ids of their own, which the store does not queue
/// twice.
pub(super) struct Fanned<'a> {
    pub kind: EventType,
    pub id: Option<&'a str>,
}

/// The id of the delivery of `event` (a session and a cursor) to `endpoint`: the same
/// whichever node queues it.
fn delivery_id(tenant: &str, event: &str, endpoint: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{tenant}\u{1f}{event}\u{1f}{endpoint}"));
    format!("msg_{}", hex::encode(&digest[..16]))
}

impl Inner {
    /// Queues one delivery of the event per endpoint of the tenant that wants it.
    pub(super) async fn fan_out(
        &self,
        tenant: &str,
        endpoints: &[EndpointRecord],
        event: Fanned<'_>,
        requested: &Requested,
        resolved: Option<&Resolved>,
        body: impl FnOnce() -> Result<String, Error>,
    ) -> Result<(), Error> {
        let event_type = event.kind;
        // A resolution also goes where an escalation step sent the ask, so that its
        // message shows the outcome there too.
        let escalated_to: Vec<&str> = match resolved {
            Some(resolved) => {
                let at = resolved.resolved_at.map_or(0, approval::asked_ms);
                approval::steps_due(requested, at)
                    .flat_map(|s| s.notify_channels.iter().map(String::as_str))
                    .collect()
            }
            None => Vec::new(),
        };
        let wanting: Vec<_> = endpoints
            .iter()
            .filter(|e| {
                e.wants(event_type, &requested.session_id, &requested.labels)
                    || escalated_to.contains(&e.id.as_str())
            })
            .collect();
        self.queue(tenant, &wanting, event, (requested, resolved), body)
            .await
    }

    /// Queues one delivery of `event` to each of `endpoints`.
    pub(super) async fn queue(
        &self,
        tenant: &str,
        wanting: &[&EndpointRecord],
        event: Fanned<'_>,
        (requested, resolved): (&Requested, Option<&Resolved>),
        body: impl FnOnce() -> Result<String, Error>,
    ) -> Result<(), Error> {
        let event_type = event.kind;
        if wanting.is_empty() {
            return Ok(());
        }
        // A webhook gets the event's payload; a chat channel the ask (and its resolution).
        let body = match wanting.iter().any(|e| e.is_webhook()) {
            true => body()?,
            false => String::new(),
        };
        let chat_body = match wanting.iter().any(|e| !e.is_webhook()) {
            true => crate::channel::chat::chat_body(requested, resolved)?,
            false => String::new(),
        };
        let now = now_ms();
        let deliveries: Vec<_> = wanting
            .iter()
            .map(|endpoint| DeliveryRecord {
                id: match event.id {
                    Some(event) => delivery_id(tenant, event, &endpoint.id),
                    None => format!("msg_{}", Uuid::now_v7().simple()),
                },
                tenant: tenant.to_owned(),
                endpoint_id: endpoint.id.clone(),
                event_type,
                session_id: requested.session_id.clone(),
                rpc_id: requested.rpc_id.clone(),
                body: match endpoint.is_webhook() {
                    true => body.clone(),
                    false => chat_body.clone(),
                },
                status: Status::Pending,
                attempts: 0,
                last_error: String::new(),
                created_ms: now,
                retry_until_ms: now + millis(self.config.retry_for),
                next_attempt_ms: now,
                last_attempt_ms: 0,
                traceparent: requested.traceparent.clone(),
            })
            .collect();
        let queued = self.store.enqueue(tenant, &deliveries).await?;
        if queued < deliveries.len() {
            let dropped = (deliveries.len() - queued) as u64;
            self.observer.deliveries(tenant, "dropped", dropped);
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
    /// starts or stops its ask's timer. `event` names it when it may come twice.
    async fn take(
        &self,
        committed: Committed,
        endpoints: &[EndpointRecord],
        event: Option<&str>,
    ) -> Result<(), Error> {
        let tenant = &*committed.tenant;
        match &committed.message.event {
            Some(Event::Requested(requested)) => {
                if requested.notify.is_some() || !requested.escalation.is_empty() {
                    self.schedule(tenant, requested).await?;
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
                let fanned = Fanned {
                    kind: EventType::Requested,
                    id: event,
                };
                self.fan_out(tenant, endpoints, fanned, requested, None, body)
                    .await
            }
            Some(Event::Resolved(resolved)) => {
                let asked = committed.asked.as_ref().and_then(Asked::requested);
                let Some(asked) = asked.as_deref() else {
                    return Ok(());
                };
                if asked.notify.is_some() || !asked.escalation.is_empty() {
                    let id = timer_id(tenant, &asked.session_id, &asked.rpc_id);
                    self.store.cancel_timer(&id).await?;
                }
                let body = || {
                    // The sealed secret answers are the waiting call's alone.
                    let resolved = Resolved {
                        sealed_answers: String::new(),
                        ..resolved.clone()
                    };
                    payload(
                        EventType::Resolved,
                        "askgate.v1.Resolved",
                        &resolved,
                        &committed.message.cursor,
                        None,
                    )
                };
                let fanned = Fanned {
                    kind: EventType::Resolved,
                    id: event,
                };
                self.fan_out(tenant, endpoints, fanned, asked, Some(resolved), body)
                    .await
            }
            _ => Ok(()),
        }
    }
}

/// The node's intake: committed events to deliveries, in order. What arrived meanwhile
/// is taken as one batch, reading each tenant's endpoints once per batch: under load the
/// store is read once per batch, not once per event. The events an engine keeps in an
/// outbox go back to it together, [`GIVE_BACK_DELAY`] after the first: one round trip
/// for many events, even when they arrive one at a time.
pub(super) async fn intake(inner: Arc<Inner>, mut events: mpsc::Receiver<Committed>) {
    let mut batch = Vec::with_capacity(INTAKE_BATCH);
    let mut back = GiveBack::default();
    loop {
        let due = back.due;
        tokio::select! {
            // Cancel safe: a branch that lost received nothing.
            received = events.recv_many(&mut batch, INTAKE_BATCH) => {
                if received == 0 {
                    break;
                }
                take_batch(&inner, &mut batch, &mut back).await;
                if back.queued.len() >= GIVE_BACK_BATCH {
                    back.give(&inner).await;
                }
            }
            () = sleep_until_due(due) => back.give(&inner).await,
        }
    }
    back.give(&inner).await;
}

/// How long events queued from an outbox wait to go back to it with the next ones
/// (well within the lease after which a sweep would queue them again).
const GIVE_BACK_DELAY: Duration = Duration::from_millis(20);
/// Events given back to the outbox in one call at most.
const GIVE_BACK_BATCH: usize = 1024;

/// Events whose deliveries are queued, not yet given back to their outbox.
#[derive(Default)]
struct GiveBack {
    queued: Vec<OutboxEntry>,
    /// Events taken by the intake whose count waits for the give-back.
    taken: usize,
    /// When they go back.
    due: Option<Instant>,
}

impl GiveBack {
    /// Gives them back; only then are they out of the intake (a flush at shutdown waits
    /// until the outbox knows).
    async fn give(&mut self, inner: &Inner) {
        self.due = None;
        if !self.queued.is_empty() {
            inner.backend.queued(std::mem::take(&mut self.queued)).await;
        }
        inner
            .in_intake
            .fetch_sub(std::mem::take(&mut self.taken), Ordering::AcqRel);
    }
}

/// Waits until `due`, or forever without one.
async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// Queues the deliveries of `batch`'s events (emptying it), after recording its
/// resolutions in the audit log; the events from an outbox join `back`.
async fn take_batch(inner: &Inner, batch: &mut Vec<Committed>, back: &mut GiveBack) {
    // The batch's resolutions go into the audit log first: an event is given back
    // to its outbox only once recorded, so a record that failed is tried again.
    let recorded = inner.audit.record(Audit::entries(batch)).await;
    if let Err(e) = &recorded {
        error!("recording resolutions in the audit log failed: {e}");
    }
    let mut endpoints: HashMap<Arc<str>, Result<Vec<EndpointRecord>, Error>> = HashMap::new();
    let mut queued = Vec::new();
    let taken_here = batch.len();
    for mut committed in batch.drain(..) {
        let tenant = committed.tenant.clone();
        let outbox = committed.outbox.take();
        let event = outbox
            .as_ref()
            .map(|o| format!("{}\u{1f}{}", o.key.session_id, committed.message.cursor));
        if !endpoints.contains_key(&tenant) {
            let read = inner.store.endpoints(&tenant).await;
            endpoints.insert(tenant.clone(), read);
        }
        let taken = match &endpoints[&tenant] {
            Ok(list) => inner.take(committed, list, event.as_deref()).await,
            Err(e) => Err(e.clone()),
        };
        match taken {
            Ok(()) => queued.extend(outbox),
            // An event in an outbox is queued later, by a sweep; another is lost.
            Err(e) if outbox.is_some() => {
                warn!(%tenant, "queueing webhook deliveries failed (retried from the outbox): {e}");
            }
            Err(e) => {
                inner.observer.deliveries(&tenant, "dropped", 1);
                warn!(%tenant, "queueing webhook deliveries failed: {e}");
            }
        }
    }
    back.taken += taken_here;
    if recorded.is_ok() && !queued.is_empty() {
        back.queued.append(&mut queued);
        back.due
            .get_or_insert_with(|| Instant::now() + GIVE_BACK_DELAY);
    } else if back.queued.is_empty() {
        // Nothing waits to go back: these are out of the intake now.
        inner
            .in_intake
            .fetch_sub(std::mem::take(&mut back.taken), Ordering::AcqRel);
    }
}
