//! The node's side of the outbox (`store/outbox.rs`): it gives back the events whose
//! deliveries the webhook intake queued, and sweeps the events no node queued within a
//! lease (their node died between the commit and the queueing, or failed to queue
//! them), reporting them to its own intake.

use std::{collections::HashMap, time::Duration};

use askgate_core::{
    backend::{
        Asked, Committed, OutboxEntry,
        events::{cursor, message},
    },
    domain::{Error, SessionKey},
};
use askgate_proto::v1::subscribe_response::Event;
use tracing::{debug, warn};

use super::node::Node;
use crate::redis_engine::store::{StoredEvent, Taken, parse_event};

/// How many leases a full pass over a cluster's 16,384 slot indexes takes: each sweep
/// looks at a share of them (with the default 10 s lease, a pass takes 50 s, some 330
/// small scripts a second per node).
const CLUSTER_PASS_LEASES: u32 = 5;

/// The deliveries of `done` are queued: they leave their outboxes (one round trip on
/// one Redis). A failure leaves them for a sweep (their deliveries may then be queued
/// twice: webhooks are at least once).
pub(super) async fn queued(node: &Node, done: Vec<OutboxEntry>) {
    let mut by_session: HashMap<SessionKey, Vec<String>> = HashMap::new();
    for entry in done {
        by_session.entry(entry.key).or_default().push(entry.id);
    }
    if let Err(e) = node
        .store()
        .outbox_done(by_session.into_iter().collect())
        .await
    {
        debug!("taking queued events out of the outbox failed: {e}");
    }
}

/// Sweep `round` (one per upkeep period of `period`): reports the events that no
/// node queued within a lease.
pub(super) async fn sweep(node: &Node, round: usize, period: Duration) -> Result<(), Error> {
    let pass = node.lease() * CLUSTER_PASS_LEASES;
    let shares = (pass.as_millis() / period.as_millis().max(1)).max(1) as usize;
    let stale_ms = node.lease_ms();
    // The indexes at once (on a cluster, a thousand small scripts over the shards).
    let mut sweeps = tokio::task::JoinSet::new();
    for index in node.store().outbox_indexes(round, shares) {
        let store = node.store().clone();
        sweeps.spawn(async move { store.take_stale(&index, stale_ms).await });
    }
    while let Some(swept) = sweeps.join_next().await {
        let Ok(swept) = swept else {
            continue;
        };
        for taken in swept? {
            match committed(taken) {
                Ok(committed) => {
                    debug!(tenant = %committed.tenant, "queueing an event its node left in the outbox");
                    node.report(|| committed);
                }
                Err(e) => warn!("an outbox entry cannot be read: {e}"),
            }
        }
    }
    Ok(())
}

/// The committed event an outbox entry holds, as its node reported it.
fn committed(taken: Taken) -> Result<Committed, Error> {
    let bad = || Error::Internal(format!("malformed outbox id {:?}", taken.id));
    let (epoch, seq) = taken.id.split_once(' ').ok_or_else(bad)?;
    let seq: u64 = seq.parse().map_err(|_| bad())?;
    let event = match parse_event(&taken.event)? {
        StoredEvent::Requested(requested) => Event::Requested(requested),
        StoredEvent::Resolved(resolved) => Event::Resolved(resolved),
        other => return Err(Error::Internal(format!("not an outbox event: {other:?}"))),
    };
    Ok(Committed {
        tenant: taken.key.tenant.clone(),
        message: message(cursor(epoch, seq), event),
        asked: (!taken.asked.is_empty()).then(|| Asked::Encoded(taken.asked.clone())),
        outbox: Some(OutboxEntry {
            id: taken.id.clone(),
            key: taken.key,
        }),
    })
}
