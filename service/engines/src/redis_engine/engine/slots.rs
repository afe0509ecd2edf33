//! Slots counted over every node: `max_subscribers_per_session`,
//! `max_all_sessions_per_tenant` and tenants' budgets.

use std::sync::Arc;

use askgate_core::domain::Error;
use uuid::Uuid;

use super::node::Node;

/// One of the `max` slots of a session's subscribers (`max_subscribers_per_session`),
/// of a tenant's `all_sessions` streams (`max_all_sessions_per_tenant`) or of a
/// tenant's budget, counted over every node: a member of a `subs` sorted set, scored by
/// when it expires. The node renews it while held; a dead node's slots expire with its
/// lease. Dropping it gives it back.
pub(super) struct SubscriberSlot {
    node: Arc<Node>,
    member: String,
}

impl SubscriberSlot {
    /// Takes a slot of `subs`; the error `full(max)` when all `max` are taken.
    pub(super) async fn take(
        node: &Arc<Node>,
        subs: String,
        max: usize,
        full: impl FnOnce(usize) -> Error,
    ) -> Result<Self, Error> {
        let member = format!("{}:{}", node.id(), Uuid::new_v4().simple());
        if !node
            .store()
            .take_slot(&subs, &member, max, node.lease())
            .await?
        {
            return Err(full(max));
        }
        node.leases().add_slot(&member, subs);
        Ok(Self {
            node: node.clone(),
            member,
        })
    }
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        let Some(subs) = self.node.leases().remove_slot(&self.member) else {
            return;
        };
        let (node, member) = (self.node.clone(), std::mem::take(&mut self.member));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                node.store().release_slot(&subs, &member).await;
            });
        }
    }
}
