//! Per tenant: the channel to its `all_sessions` subscribers and what counts against
//! its caps (sessions, pending asks and their bytes, agents).

use std::{collections::HashMap, sync::Arc, time::Duration};

use askgate_core::{backend::events::Message, domain::Error};
use parking_lot::Mutex;
use tokio::{sync::broadcast, time::Instant};

use super::session::within;

/// Every tenant's state; a tenant's is made on first use.
pub(super) struct Tenants {
    tenants: Mutex<HashMap<Arc<str>, TenantState>>,
    /// The size of each tenant's channel.
    buffer: usize,
}

struct TenantState {
    events_tx: broadcast::Sender<Message>,
    /// When the last `all_sessions` subscriber that counts (not passive) left.
    left_at: Option<Instant>,
    /// Receivers of `events_tx` held by passive subscriptions: they do not make the
    /// tenant's sessions attended.
    passive: usize,
    /// Pending asks over all the tenant's sessions.
    pending: usize,
    /// Bytes those asks hold.
    pending_bytes: u64,
    /// Sessions of the tenant in the shards (those retiring included).
    sessions: usize,
    /// Agents of the tenant attached now.
    agents: usize,
}

impl TenantState {
    fn new(buffer: usize) -> Self {
        Self {
            events_tx: broadcast::channel(buffer.max(1)).0,
            left_at: None,
            passive: 0,
            pending: 0,
            pending_bytes: 0,
            sessions: 0,
            agents: 0,
        }
    }

    /// Open `all_sessions` subscriptions that make the tenant's sessions attended.
    fn attending(&self) -> usize {
        self.events_tx.receiver_count().saturating_sub(self.passive)
    }
}

impl Tenants {
    pub(super) fn new(buffer: usize) -> Self {
        Self {
            tenants: Mutex::default(),
            buffer,
        }
    }

    /// Runs `f` on the tenant's state, made if it has none.
    fn with<T>(&self, tenant: &Arc<str>, f: impl FnOnce(&mut TenantState) -> T) -> T {
        let mut tenants = self.tenants.lock();
        let state = tenants
            .entry(tenant.clone())
            .or_insert_with(|| TenantState::new(self.buffer));
        f(state)
    }

    /// Runs `f` on the tenant's state, if it has one.
    fn existing<T>(&self, tenant: &str, f: impl FnOnce(&mut TenantState) -> T) -> Option<T> {
        self.tenants.lock().get_mut(tenant).map(f)
    }

    /// One more session of the tenant, within `max`; its sessions' events go to the
    /// returned channel too.
    pub(super) fn admit_session(
        &self,
        tenant: &Arc<str>,
        max: usize,
    ) -> Result<broadcast::Sender<Message>, Error> {
        self.with(tenant, |state| {
            if state.sessions >= max {
                return Err(Error::too_many_sessions(max));
            }
            state.sessions += 1;
            Ok(state.events_tx.clone())
        })
    }

    /// One session of the tenant fewer.
    pub(super) fn session_gone(&self, tenant: &str) {
        self.existing(tenant, |state| {
            state.sessions = state.sessions.saturating_sub(1)
        });
    }

    /// Counts a new pending ask of `bytes` against the tenant's caps.
    pub(super) fn count_pending(
        &self,
        tenant: &Arc<str>,
        bytes: u64,
        max_pending: usize,
        max_bytes: u64,
    ) -> Result<(), Error> {
        self.with(tenant, |state| {
            if state.pending >= max_pending {
                return Err(Error::TooManyPending(format!(
                    "at most {max_pending} pending asks per tenant"
                )));
            }
            if state.pending_bytes + bytes > max_bytes {
                return Err(Error::pending_bytes_full("tenant", max_bytes));
            }
            state.pending += 1;
            state.pending_bytes += bytes;
            Ok(())
        })
    }

    /// Restored pending asks of the tenant: `count` of them holding `bytes`.
    pub(super) fn restore_pending(&self, tenant: &Arc<str>, count: usize, bytes: u64) {
        self.with(tenant, |state| {
            state.pending += count;
            state.pending_bytes += bytes;
        });
    }

    /// A pending ask of `bytes` ended; its outcome, kept for retries, holds `kept`
    /// bytes in its place (0: none kept), until it expires ([`Self::release_outcome`]).
    pub(super) fn release_pending(&self, tenant: &str, bytes: u64, kept: u64) {
        self.existing(tenant, |state| {
            state.pending = state.pending.saturating_sub(1);
            state.pending_bytes = state.pending_bytes.saturating_sub(bytes) + kept;
        });
    }

    /// A recorded outcome of `bytes`, kept for retries: it counts against the tenant's
    /// byte budget (not its count of pending asks) until it expires. Never refused:
    /// the ask is already resolved; new asks are, while the tenant is past its budget.
    pub(super) fn hold_outcome(&self, tenant: &Arc<str>, bytes: u64) {
        if bytes > 0 {
            self.with(tenant, |state| state.pending_bytes += bytes);
        }
    }

    /// [`Self::hold_outcome`] for an outcome recorded before any ask (an Abort by a
    /// request_id not asked yet): refused when it does not fit the tenant's budget.
    pub(super) fn admit_outcome(
        &self,
        tenant: &Arc<str>,
        bytes: u64,
        max_bytes: u64,
    ) -> Result<(), Error> {
        self.with(tenant, |state| {
            if state.pending_bytes + bytes > max_bytes {
                return Err(Error::pending_bytes_full("tenant", max_bytes));
            }
            state.pending_bytes += bytes;
            Ok(())
        })
    }

    /// A recorded outcome of `bytes` expired.
    pub(super) fn release_outcome(&self, tenant: &str, bytes: u64) {
        self.existing(tenant, |state| {
            state.pending_bytes = state.pending_bytes.saturating_sub(bytes);
        });
    }

    /// An `all_sessions` subscriber that counts follows the tenant now, or left less
    /// than `grace` ago.
    pub(super) fn attended_within(&self, tenant: &str, grace: Duration) -> bool {
        self.existing(tenant, |t| t.attending() > 0 || within(t.left_at, grace))
            .unwrap_or(false)
    }

    /// A new `all_sessions` subscriber (within `max` of them unless `lagged`: a resync
    /// keeps its place and its count).
    pub(super) fn subscribe(
        &self,
        tenant: &Arc<str>,
        max: usize,
        lagged: bool,
        passive: bool,
    ) -> Result<broadcast::Receiver<Message>, Error> {
        self.with(tenant, |state| {
            if !lagged && state.events_tx.receiver_count() >= max {
                return Err(Error::too_many_all_sessions(max));
            }
            match passive {
                true if !lagged => state.passive += 1,
                true => {}
                false => state.left_at = None,
            }
            Ok(state.events_tx.subscribe())
        })
    }

    /// An `all_sessions` subscriber left (its receiver dropped already).
    pub(super) fn unsubscribed(&self, tenant: &str, passive: bool) {
        self.existing(tenant, |state| {
            if passive {
                state.passive = state.passive.saturating_sub(1);
            } else if state.attending() == 0 {
                state.left_at = Some(Instant::now());
            }
        });
    }

    /// One more agent of the tenant attached, within `max`.
    pub(super) fn admit_agent(&self, tenant: &Arc<str>, max: usize) -> Result<(), Error> {
        self.with(tenant, |state| {
            if state.agents >= max {
                return Err(Error::too_many_agents(max));
            }
            state.agents += 1;
            Ok(())
        })
    }

    /// One agent of the tenant fewer.
    pub(super) fn agent_gone(&self, tenant: &str) {
        self.existing(tenant, |state| {
            state.agents = state.agents.saturating_sub(1)
        });
    }

    /// Open `all_sessions` subscriptions over every tenant.
    pub(super) fn subscribers(&self) -> usize {
        self.tenants
            .lock()
            .values()
            .map(|t| t.events_tx.receiver_count())
            .sum()
    }

    pub(super) fn clear(&self) {
        self.tenants.lock().clear();
    }
}
