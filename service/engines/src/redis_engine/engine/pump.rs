//! A session's pump: it hands the outcomes of the session's asks, as their `resolved`
//! events arrive on this node, to the calls waiting here.

use std::{sync::Arc, time::Duration};

use askgate_core::domain::SessionKey;
use tokio::sync::broadcast;

use super::node::Node;
use crate::redis_engine::{
    fanout::LiveEvent,
    store::{SessionKeys, StoredEvent},
};

/// Starts the session's pump on `live` (the session's channel, followed) unless one
/// runs already; `live` is let go then.
pub(super) fn ensure(
    node: &Arc<Node>,
    key: &SessionKey,
    live: broadcast::Receiver<Arc<LiveEvent>>,
) {
    if node.waiting().start_pump(key) {
        tokio::spawn(pump(node.clone(), key.clone(), live));
    }
}

/// Delivers the outcomes of a session's asks to the calls waiting on this node, for
/// as long as any wait.
async fn pump(node: Arc<Node>, key: SessionKey, mut live: broadcast::Receiver<Arc<LiveEvent>>) {
    /// Ticks to keep re-reading the history after a pub/sub reconnect (its
    /// resubscription takes a moment).
    const RECOVERY_TICKS: u32 = 5;
    /// How long the pump (and its channel subscription) outlives the session's last
    /// waiter here: an agent asking again soon needs no new SUBSCRIBE.
    const LINGER: Duration = Duration::from_secs(2);
    let channel = SessionKeys::new(&key).channel();
    let mut disconnections = node.fanout().disconnections();
    let mut recovering = 0;
    let mut idle_since = None;
    while node.waiting().pump_goes_on(&key, &mut idle_since, LINGER) {
        match tokio::time::timeout(Duration::from_secs(1), live.recv()).await {
            Ok(Ok(event)) => {
                if let StoredEvent::Resolved(resolved) = &event.event {
                    node.waiting().deliver(&key, resolved);
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => node.recover_waiters(&key).await,
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                // The fanout is gone: a later registration starts a new pump.
                node.waiting().end_pump(&key);
                break;
            }
            Err(_) => {
                let seen = node.fanout().disconnections();
                if seen != disconnections {
                    disconnections = seen;
                    recovering = RECOVERY_TICKS;
                }
                if recovering > 0 {
                    recovering -= 1;
                    node.recover_waiters(&key).await;
                }
            }
        }
    }
    drop(live);
    node.fanout().release(&channel).await;
}
