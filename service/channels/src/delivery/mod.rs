//! What every channel shares: durable, at-least-once delivery of asks and their
//! outcomes to each tenant's connections, reminders and escalation of asks nobody
//! answers (docs/webhooks.md), and the admin calls that connect, list and disconnect.
//!
//! How an event becomes a delivery:
//! - the engine that commits a `requested` or `resolved` event reports it to its
//!   [`Tap`]; one intake task per node turns it into one delivery per endpoint of the
//!   tenant that wants it, queued in the [`HookStore`] (and schedules or cancels the
//!   ask's reminder timer);
//! - every node's delivery loop claims due deliveries from the store with a lease,
//!   hands each to the channel that holds its connection (a plain webhook is POSTed,
//!   signed per the Standard Webhooks spec anew at every attempt with the same
//!   `webhook-id`), and records the outcome: delivered, else retried with exponential
//!   backoff and jitter until the retry period is over, then failed (kept for
//!   `Redeliver`);
//! - every node's timer loop claims due reminder timers the same way, sends the notice
//!   to the session's subscribers ([`Backend::notify`]) and queues its deliveries.
//!
//! On Redis the store is shared, so any node delivers and a node's death loses nothing
//! that was queued: its leases run out and a survivor takes over.
//!
//! Slack apps, Telegram bots, email routes and ntfy topics are endpoints with a chat
//! target: their deliveries post and update messages (or mail, or push) through the
//! same loops, each through its [`crate::channel::Channel`].

mod admin;
mod attempts;
mod config;
mod intake;
mod timers;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::sync::{Notify, mpsc};
use tracing::{debug, warn};

pub use self::config::WebhookConfig;
use self::intake::INTAKE_QUEUE;
use crate::{
    Channels,
    backend::{Backend, Tap, audit_log::Audit, hooks::HookStore},
    domain::{Error, Limits},
    egress::send::Sender,
    observe::Observer,
};

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
    /// Every channel the deliveries go through (the registry), and what signs the
    /// links of mail and pushes.
    channels: Channels,
    /// Where every resolution is recorded, from the same committed events.
    audit: Audit,
    /// The node's metrics and traces.
    observer: Arc<dyn Observer>,
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

impl Hooks {
    /// Starts webhooks on `backend`: its committed events are reported here, and this
    /// node's intake, delivery and timer loops run until the tasks drop.
    pub fn start(
        store: Arc<dyn HookStore>,
        backend: Arc<dyn Backend>,
        config: WebhookConfig,
        limits: Limits,
        observer: Arc<dyn Observer>,
        channels: Channels,
        audit: Audit,
    ) -> (Self, HookTasks) {
        let inner = Arc::new(Inner {
            sender: Sender::new(config.allow_private, config.timeout),
            channels,
            audit,
            store,
            backend,
            config,
            limits,
            observer,
            wake: Notify::new(),
            in_intake: Arc::new(AtomicUsize::new(0)),
        });
        let (events_tx, events_rx) = mpsc::channel(INTAKE_QUEUE);
        let (queued, dropped) = (inner.in_intake.clone(), inner.in_intake.clone());
        let observer = inner.observer.clone();
        inner.backend.set_tap(Tap::new(
            events_tx,
            move || {
                queued.fetch_add(1, Ordering::AcqRel);
            },
            move || {
                dropped.fetch_sub(1, Ordering::AcqRel);
                observer.deliveries("", "dropped", 1);
                warn!("the webhook intake is full: an event was dropped");
            },
        ));
        let tasks = HookTasks(vec![
            tokio::spawn(intake::intake(inner.clone(), events_rx)),
            tokio::spawn(attempts::deliver_due(inner.clone())),
            tokio::spawn(timers::remind_due(inner.clone())),
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

    /// The store, for Slack's interactivity (apps, replay notes).
    pub fn store(&self) -> &Arc<dyn HookStore> {
        &self.inner.store
    }

    /// Every channel (the registry).
    pub fn channels(&self) -> &Channels {
        &self.inner.channels
    }
}

/// Whether a loop's store is failing: the first failure of a streak is a warning, the
/// rest are debug lines (the store's health is on the health service already), and
/// the recovery is said once.
#[derive(Default)]
struct Streak(bool);

impl Streak {
    fn failed(&mut self, what: &str, error: &Error) {
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
