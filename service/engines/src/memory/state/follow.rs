//! Following a session or a tenant: the replay and the receiver of what comes after
//! it, taken under the same locks, and what a subscription's end leaves behind.

use std::sync::Arc;

use askgate_core::{
    backend::Scope,
    domain::{Error, SessionKey},
};

use super::{Followed, Inner};
use crate::memory::shard::{Shard, tenant_replay};

impl Inner {
    /// Starts (or, after a lag, restarts) following one session: the replay and a
    /// receiver taken under the same lock, so nothing falls between them.
    pub(in crate::memory) fn follow_session(
        &self,
        key: &SessionKey,
        after: Option<&str>,
        lagged: bool,
        take_exclusive: bool,
    ) -> Result<Followed, Error> {
        let mut shard = self.shard(key);
        self.check_open()?;
        let config = &self.config;
        let followed = self.session(&mut shard, key).and_then(|session| {
            let receiver = session.subscribe(
                config.max_subscribers_per_session,
                lagged,
                take_exclusive,
                config.subscriber_buffer,
            )?;
            Ok((session.replay(after, lagged), receiver))
        });
        if followed.is_err() {
            // A session made only for this subscription does not stay.
            self.retire_if_unused(&mut shard, key);
        }
        followed
    }

    /// Starts (or restarts) following every session of a tenant. All shards are locked
    /// in index order so the snapshot and the receiver describe one instant.
    pub(in crate::memory) fn follow_tenant(
        &self,
        tenant: &Arc<str>,
        reset_first: bool,
        lagged: bool,
        passive: bool,
    ) -> Result<Followed, Error> {
        let shards: Vec<_> = self.shards.iter().map(|s| s.lock()).collect();
        self.check_open()?;
        let limit = self.config.max_all_sessions_per_tenant;
        let receiver = self.tenants.subscribe(tenant, limit, lagged, passive)?;
        let shards: Vec<&Shard> = shards.iter().map(|shard| &**shard).collect();
        Ok((tenant_replay(&shards, tenant, reset_first), receiver))
    }

    /// A subscription ended: note when the scope lost its last subscriber (the
    /// reconnect grace counts from there) and retire the session if it is unused.
    pub(in crate::memory) fn unsubscribed(&self, scope: &Scope, exclusive: bool, passive: bool) {
        match scope {
            Scope::Session(key) => {
                let mut shard = self.shard(key);
                if let Some(session) = shard.session_mut(key) {
                    session.unsubscribed(exclusive);
                }
                self.retire_if_unused(&mut shard, key);
            }
            Scope::Tenant(tenant) => self.tenants.unsubscribed(tenant, passive),
        }
    }
}
