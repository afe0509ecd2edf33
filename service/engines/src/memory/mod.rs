//! The embedded backend: state in this process, sharded by session so that sessions do
//! not contend on one lock.
//!
//! Each session keeps its pending asks, a bounded history of its events (for cursor
//! resume) and a broadcast channel to its subscribers; each tenant has one more channel
//! for `all_sessions` subscribers; the agent registry holds the live leases. Every
//! mutation of a session happens under its shard's mutex, which never spans an
//! `.await`: that is what makes a claim first-wins, keeps replay and live events free of
//! gaps and duplicates, and makes the caller and provider checks of `register` atomic
//! with the store.
//!
//! The state's parts own their data: `session` a session's, `shard` a shard's
//! sessions and request ids, `tenants` and `agents` what counts per tenant and
//! the leases; `state` holds them and does what spans them, in one lock order.

use std::{
    collections::HashMap,
    sync::{Arc, Weak},
    time::Duration,
};

use askgate_core::{
    backend::{
        Attached, Backend, Budget, BudgetHold, EventStream, Holder, Noticed, Registered,
        RequestAbort, Scope, StateConfig, Stats, SubscribeOptions, Tap,
    },
    domain::{
        Error, NewAsk, Outcome, SessionKey,
        quorum::{Vote, Voted},
    },
};
use askgate_proto::v1::{Requested, Resolved, subscribe_response::Event};
use async_trait::async_trait;
use parking_lot::Mutex;

mod agents;
pub mod audit;
mod durable;
mod hooks;
pub mod journal;
mod session;
mod shard;
mod state;
mod subscription;
mod tenants;

pub use audit::{KEEP_PER_TENANT as AUDIT_RECORDS_PER_TENANT, MemoryAuditStore};
pub use hooks::MemoryHookStore;
use state::Inner;
use subscription::Subscription;

/// The in-memory [`Backend`].
#[derive(Clone)]
pub struct MemoryBackend {
    inner: Arc<Inner>,
    /// Units of tenants' budgets held (see [`Backend::hold`]).
    budgets: Arc<Budgets>,
}

impl MemoryBackend {
    /// A new backend. Within a tokio runtime it also starts the sweeper that retires
    /// unused sessions and expired outcomes; the sweeper ends with the backend.
    pub fn new(config: StateConfig) -> Self {
        Self::start(Inner::new(config, None))
    }

    /// The backend over `inner`, with its sweeper (within a tokio runtime).
    fn start(inner: Arc<Inner>) -> Self {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep_until_dropped(Arc::downgrade(&inner)));
        }
        Self {
            inner,
            budgets: Arc::default(),
        }
    }

    /// A backend whose every change goes to `journal` before it is acknowledged (the
    /// sqlite engine), starting from the state a store kept; each resolution's record
    /// goes to `audit` in the resolution's own commit. Returns the restored pending
    /// asks whose agent's lease is gone, to abort.
    pub fn durable(
        config: StateConfig,
        journal: journal::Journal,
        stored: journal::Stored,
        audit: Arc<MemoryAuditStore>,
    ) -> (Self, Vec<(SessionKey, String)>) {
        let inner = Inner::new(config, Some((journal, audit)));
        let orphans = inner.restore(stored).into_iter().collect();
        (Self::start(inner), orphans)
    }
}

impl MemoryBackend {
    /// Once every change so far is on disk, on a durable engine (at once otherwise).
    pub async fn synced(&self) -> Result<(), Error> {
        self.inner.synced().await
    }
}

/// How often expired state (unused sessions, recorded outcomes) is swept.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Sweeps the state every [`SWEEP_INTERVAL`] until it is dropped.
async fn sweep_until_dropped(inner: Weak<Inner>) {
    let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        inner.sweep(tokio::time::Instant::now());
    }
}

/// Units held of each tenant's budgets.
type Budgets = Mutex<HashMap<(Arc<str>, Budget), usize>>;

/// A unit of a tenant's budget on this node; given back on drop.
struct MemoryHold {
    budgets: Arc<Budgets>,
    key: (Arc<str>, Budget),
}

impl Drop for MemoryHold {
    fn drop(&mut self) {
        let mut budgets = self.budgets.lock();
        if let Some(held) = budgets.get_mut(&self.key) {
            *held -= 1;
            if *held == 0 {
                budgets.remove(&self.key);
            }
        }
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn hold(&self, tenant: &str, budget: Budget, max: usize) -> Result<BudgetHold, Error> {
        let key = (Arc::<str>::from(tenant), budget);
        let mut budgets = self.budgets.lock();
        let held = budgets.entry(key.clone()).or_default();
        if *held >= max {
            return Err(budget.exhausted(max));
        }
        *held += 1;
        Ok(Box::new(MemoryHold {
            budgets: self.budgets.clone(),
            key,
        }))
    }

    async fn register(&self, ask: NewAsk) -> Result<Registered, Error> {
        self.inner.room().await;
        self.inner.register(ask)
    }

    async fn pending(&self, key: &SessionKey, rpc_id: &str) -> Result<Requested, Error> {
        self.inner.pending(key, rpc_id)
    }

    async fn claim(&self, key: &SessionKey, rpc_id: &str, outcome: Outcome) -> Result<(), Error> {
        self.inner.room().await;
        self.inner.claim(key, rpc_id, outcome)?;
        self.inner.synced().await
    }

    async fn vote(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        vote: Vote,
        needed: u32,
        record: Option<askgate_core::backend::audit::AuditEntry>,
    ) -> Result<Voted, Error> {
        self.inner.room().await;
        let voted = self.inner.vote(key, rpc_id, vote, needed, record)?;
        self.inner.synced().await?;
        Ok(voted)
    }

    async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), Error> {
        self.inner.abandon(key, rpc_id)
    }

    async fn subscribe(
        &self,
        scope: Scope,
        options: SubscribeOptions,
    ) -> Result<EventStream, Error> {
        let subscription = Subscription::start(self.inner.clone(), scope, &options)?;
        Ok(Box::pin(subscription))
    }

    async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, Error> {
        Ok(self.inner.list_pending(key))
    }

    async fn abort_request(
        &self,
        key: &SessionKey,
        request_id: &str,
        resolved: Resolved,
    ) -> Result<RequestAbort, Error> {
        let recorded = self.inner.abort_request(key, request_id, resolved)?;
        self.inner.synced().await?;
        Ok(recorded)
    }

    async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        let attached = self
            .inner
            .attach(tenant, agent_id, parent_agent_id, holder)?;
        self.inner.synced().await?;
        Ok(attached)
    }

    async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        self.inner.detach(tenant, agent_id, incarnation);
    }

    async fn healthy(&self) -> bool {
        self.inner.healthy()
    }

    async fn stats(&self) -> Stats {
        self.inner.stats()
    }

    async fn notify(
        &self,
        key: &SessionKey,
        rpc_id: &str,
        notice: Event,
    ) -> Result<Option<Noticed>, Error> {
        self.inner.room().await;
        Ok(self.inner.notify(key, rpc_id, notice))
    }

    fn set_tap(&self, tap: Tap) {
        self.inner.set_tap(tap);
    }

    async fn dispose_all(&self) {
        self.inner.dispose_all();
        // A durable engine's last changes are on disk before the node exits.
        let _ = self.inner.synced().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session::{cursor, parse_cursor};

    async fn make(config: StateConfig) -> (Arc<dyn Backend>, Box<dyn std::any::Any + Send>) {
        (Arc::new(MemoryBackend::new(config)), Box::new(()))
    }

    askgate_core::backend_conformance_suite!(make);

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A cursor from a client is any text: parsing never panics, and the cursors
        /// this backend writes read back as written.
        #[test]
        fn cursors_parse_without_panic_and_round_trip(text in "\\PC{0,40}", epoch: u64, seq: u64) {
            let _ = parse_cursor(&text);
            proptest::prop_assert_eq!(parse_cursor(&cursor(epoch, seq)), Some((epoch, seq)));
        }
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        assert_eq!(parse_cursor(&cursor(0xabc, 42)), Some((0xabc, 42)));
        for bad in ["", "-", "x-1", "1-x", "1", "1-1-1"] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }
}
