//! Each node's delivery loop: claims due deliveries with a lease, each tenant and
//! endpoint within its share of the node's slots, attempts them (a signed POST, or a
//! Slack post) and records the outcome, retrying with exponential backoff.

use std::{sync::Arc, time::Duration};

use backon::BackoffBuilder as _;
use tokio::sync::Semaphore;
use tracing::{Instrument, Span, debug, warn};

use super::{Inner, Streak};
use crate::backend::hooks::{
    Shares,
    records::{DeliveryRecord, Status},
};
use crate::channel::{
    Outbound,
    clock::{millis, now_ms},
};

/// Beyond an attempt's timeout, how long its lease lasts.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

impl Inner {
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

    /// One attempt of a claimed delivery, and its outcome recorded, under a span of
    /// its own: a child of its ask's.
    async fn attempt(&self, delivery: DeliveryRecord) {
        let span = self.observer.delivery_span(&delivery);
        let outcome = self.attempt_traced(delivery).instrument(span.clone()).await;
        if !span.is_disabled() {
            span.record("askgate.outcome", outcome);
        }
    }

    async fn attempt_traced(&self, mut delivery: DeliveryRecord) -> &'static str {
        let endpoint = match self
            .store
            .endpoint(&delivery.tenant, &delivery.endpoint_id)
            .await
        {
            Ok(endpoint) => endpoint,
            Err(e) => {
                // The lease runs out and the delivery is tried again.
                warn!("reading a webhook endpoint failed: {e}");
                return "unread";
            }
        };
        if let Some(channel) = endpoint.as_ref().and_then(|e| self.channels.of(e)) {
            Span::current().record("askgate.channel", channel.name());
        }
        let now = now_ms();
        delivery.last_attempt_ms = now;
        let result = match endpoint.as_ref().map(|e| (e, self.channels.of(e))) {
            None => Err("the endpoint was deleted".to_owned()),
            Some((_, None)) => Err("the endpoint is of no channel this node knows".to_owned()),
            Some((endpoint, Some(channel))) => {
                let out = Outbound {
                    store: &*self.store,
                    sender: &self.sender,
                };
                channel.deliver(&out, endpoint, &delivery).await
            }
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
        self.observer.deliveries(&delivery.tenant, outcome, 1);
        match self.store.finish_attempt(&delivery).await {
            Ok(true) => {}
            Ok(false) => debug!(delivery = %delivery.id, "the attempt's lease had moved on"),
            Err(e) => warn!(delivery = %delivery.id, "recording a webhook attempt failed: {e}"),
        }
        outcome
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
pub(super) async fn deliver_due(inner: Arc<Inner>) {
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
