//! The webhook store of a single node: records in this process, behind one mutex that
//! is never held across an `.await`. On a durable engine each change is also recorded
//! in its [`Journal`], under that mutex, and a write is acknowledged once on disk.

use std::{
    collections::{BTreeSet, HashMap, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use parking_lot::Mutex;

use askgate_core::{
    backend::{
        audit::AuditEntry,
        hooks::{
            HookStore, Shares, StoreLimits,
            records::{
                DeliveryRecord, EndpointRecord, GrantRecord, PersonRecord, PolicySetRecord, Status,
                TimerRecord,
            },
        },
    },
    domain::Error,
};

use askgate_core::clock::now_ms;

use super::{
    MemoryAuditStore,
    journal::{Change, HookChange, Journal, StoredHooks},
};

/// The in-memory [`HookStore`].
pub struct MemoryHookStore {
    limits: StoreLimits,
    state: Mutex<State>,
    journal: Option<Journal>,
    /// Where an admin change's audit record goes, with the change itself (in one
    /// commit, on a durable engine). Without it (a store on its own, in tests) the
    /// records are kept for `unaudited`.
    audit: Option<Arc<MemoryAuditStore>>,
}

#[derive(Default)]
struct State {
    /// Per tenant, oldest first.
    endpoints: HashMap<String, Vec<EndpointRecord>>,
    deliveries: HashMap<String, DeliveryRecord>,
    /// Pending deliveries by (due, id), and each one's due time.
    due: BTreeSet<(u64, String)>,
    due_at: HashMap<String, u64>,
    /// Per tenant: its deliveries, oldest first; and how many are pending.
    tenants: HashMap<String, TenantLog>,
    timers: HashMap<String, (u64, TimerRecord)>,
    timers_due: BTreeSet<(u64, String)>,
    /// Notes with when they expire; expired ones are dropped as the map grows.
    notes: HashMap<String, (String, Instant)>,
    /// The size at which expired notes are next swept out.
    sweep_at: usize,
    /// The next endpoint's or delivery's place, for listing in order after a restore.
    next_position: u64,
    /// Admin changes' audit records not yet in an audit log, oldest first (a store
    /// without one).
    unaudited: Vec<AuditEntry>,
    people: people::People,
    /// Each tenant's policy set.
    policies: HashMap<String, PolicySetRecord>,
    grants: rules::Grants,
}

#[derive(Default)]
struct TenantLog {
    ids: VecDeque<String>,
    queued: usize,
    /// Finished deliveries, by (finished at, id), for trimming.
    finished: BTreeSet<(u64, String)>,
}

impl MemoryHookStore {
    pub fn new(limits: StoreLimits) -> Self {
        Self {
            limits,
            state: Mutex::default(),
            journal: None,
            audit: None,
        }
    }

    /// Appends each admin change's audit record to `audit` as the change is made.
    pub fn with_audit(mut self, audit: Arc<MemoryAuditStore>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// A store whose every change goes to `journal`, starting from what a store kept;
    /// an admin change's audit record goes to `audit` in the change's own commit.
    pub fn durable(
        limits: StoreLimits,
        journal: Journal,
        stored: StoredHooks,
        audit: Arc<MemoryAuditStore>,
    ) -> Self {
        let mut state = State::default();
        state.restore(stored);
        Self {
            limits,
            state: Mutex::new(state),
            journal: Some(journal),
            audit: Some(audit),
        }
    }

    /// Records a change, on a durable engine: under the state's lock, so the store sees
    /// the changes in the order they happened.
    fn record(&self, change: impl FnOnce() -> HookChange) {
        if let Some(journal) = &self.journal {
            journal.record(Change::Hook(change()));
        }
    }

    /// Records an admin change with its audit record: appended to the audit log with
    /// the change (on a durable engine, in one commit), or kept for `unaudited` by a
    /// store without a log.
    fn record_audited(&self, state: &mut State, change: HookChange, entry: &AuditEntry) {
        let Some(audit) = &self.audit else {
            state.unaudited.push(entry.clone());
            self.record(|| change);
            return;
        };
        audit.append_with(entry.clone(), vec![Change::Hook(change)]);
    }

    /// Changes the state under its lock, then (on a durable engine) waits until the
    /// change is on disk: the lock is never held across a wait, and a writer that is
    /// behind is waited for first.
    async fn change<T>(
        &self,
        change: impl FnOnce(&mut State) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if let Some(journal) = &self.journal {
            journal.room().await;
        }
        let done = change(&mut self.state.lock())?;
        if let Some(journal) = &self.journal {
            journal.synced().await?;
        }
        Ok(done)
    }
}

/// The delivery `id` as it stands, to record (made at `position` when new; a stored
/// one keeps its place).
fn delivery_change(state: &State, id: &str, position: u64) -> HookChange {
    match state.deliveries.get(id) {
        Some(record) => HookChange::DeliveryPut {
            position,
            due_ms: state.due_at.get(id).copied(),
            record: Box::new(record.clone()),
        },
        None => HookChange::DeliveryDeleted { id: id.to_owned() },
    }
}

/// The first `limit` entries of a (due, id) index due by `now_ms`.
fn due_by(index: &BTreeSet<(u64, String)>, now_ms: u64, limit: usize) -> Vec<(u64, String)> {
    index
        .iter()
        .take_while(|(at, _)| *at <= now_ms)
        .take(limit)
        .cloned()
        .collect()
}

fn not_found(what: &str) -> Error {
    Error::NotFound(format!("no {what} with that id"))
}

#[async_trait]
impl HookStore for MemoryHookStore {
    async fn create_endpoint(
        &self,
        endpoint: &EndpointRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        self.change(|state| {
            let list = state.endpoints.entry(endpoint.tenant.clone()).or_default();
            if list.len() >= self.limits.max_endpoints {
                return Err(Error::TooManyWebhooks(format!(
                    "at most {} webhook endpoints per tenant",
                    self.limits.max_endpoints
                )));
            }
            list.push(endpoint.clone());
            let position = state.next_position;
            state.next_position += 1;
            let change = HookChange::EndpointPut {
                position,
                record: Box::new(endpoint.clone()),
            };
            self.record_audited(state, change, audit);
            Ok(())
        })
        .await
    }

    async fn endpoints(&self, tenant: &str) -> Result<Vec<EndpointRecord>, Error> {
        Ok(self
            .state
            .lock()
            .endpoints
            .get(tenant)
            .cloned()
            .unwrap_or_default())
    }

    async fn endpoint(&self, tenant: &str, id: &str) -> Result<Option<EndpointRecord>, Error> {
        Ok(self
            .state
            .lock()
            .endpoints
            .get(tenant)
            .and_then(|list| list.iter().find(|e| e.id == id).cloned()))
    }

    async fn delete_endpoint(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.change(|state| {
            let Some(list) = state.endpoints.get_mut(tenant) else {
                return Ok(false);
            };
            let before = list.len();
            list.retain(|e| e.id != id);
            let removed = list.len() < before;
            if list.is_empty() {
                state.endpoints.remove(tenant);
            }
            if removed {
                let change = HookChange::EndpointDeleted {
                    tenant: tenant.to_owned(),
                    id: id.to_owned(),
                };
                self.record_audited(state, change, audit);
            }
            Ok(removed)
        })
        .await
    }

    async fn enqueue(&self, tenant: &str, deliveries: &[DeliveryRecord]) -> Result<usize, Error> {
        self.change(|state| {
            let log = state.tenants.entry(tenant.to_owned()).or_default();
            let room = self.limits.max_queued.saturating_sub(log.queued);
            let taken = deliveries.len().min(room);
            log.queued += taken;
            log.ids
                .extend(deliveries[..taken].iter().map(|d| d.id.clone()));
            for delivery in &deliveries[..taken] {
                state.set_due(&delivery.id, Some(delivery.next_attempt_ms));
                state
                    .deliveries
                    .insert(delivery.id.clone(), delivery.clone());
                let position = state.next_position;
                state.next_position += 1;
                self.record(|| delivery_change(state, &delivery.id, position));
            }
            Ok(taken)
        })
        .await
    }

    async fn claim_deliveries(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
        shares: &Shares,
    ) -> Result<Vec<DeliveryRecord>, Error> {
        let mut shares = shares.clone();
        let mut state = self.state.lock();
        let due = due_by(&state.due, now_ms, Shares::SCAN);
        let mut claimed = Vec::with_capacity(limit.min(due.len()));
        for (_, id) in due {
            if claimed.len() == limit {
                break;
            }
            let Some(delivery) = state.deliveries.get_mut(&id) else {
                state.set_due(&id, None);
                continue;
            };
            if !shares.take(&delivery.tenant, &delivery.endpoint_id) {
                continue;
            }
            delivery.attempts += 1;
            claimed.push(delivery.clone());
            state.set_due(&id, Some(lease_until_ms));
            // Not waited on: after a crash the delivery is made again (same id).
            self.record(|| delivery_change(&state, &id, 0));
        }
        Ok(claimed)
    }

    async fn finish_attempt(&self, record: &DeliveryRecord) -> Result<bool, Error> {
        self.change(|state| {
            let Some(stored) = state.deliveries.get(&record.id) else {
                return Ok(false);
            };
            if stored.attempts != record.attempts || stored.status != Status::Pending {
                return Ok(false);
            }
            state.deliveries.insert(record.id.clone(), record.clone());
            if record.status == Status::Pending {
                state.set_due(&record.id, Some(record.next_attempt_ms));
            } else {
                state.set_due(&record.id, None);
                let log = state.tenants.entry(record.tenant.clone()).or_default();
                log.queued = log.queued.saturating_sub(1);
                log.finished
                    .insert((record.last_attempt_ms, record.id.clone()));
            }
            self.record(|| delivery_change(state, &record.id, 0));
            if record.status != Status::Pending {
                state.trim(&record.tenant, self.limits.keep_finished, |id| {
                    self.record(|| HookChange::DeliveryDeleted { id });
                });
            }
            Ok(true)
        })
        .await
    }

    async fn deliveries(
        &self,
        tenant: &str,
        endpoint_id: Option<&str>,
        status: Option<Status>,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>, Error> {
        let state = self.state.lock();
        let Some(log) = state.tenants.get(tenant) else {
            return Ok(Vec::new());
        };
        Ok(log
            .ids
            .iter()
            .rev()
            .filter_map(|id| state.deliveries.get(id))
            .filter(|d| endpoint_id.is_none_or(|e| d.endpoint_id == e))
            .filter(|d| status.is_none_or(|s| d.status == s))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn redeliver(
        &self,
        tenant: &str,
        id: &str,
        now_ms: u64,
        retry_until_ms: u64,
        audit: &AuditEntry,
    ) -> Result<DeliveryRecord, Error> {
        self.change(|state| {
            let Some(delivery) = state.deliveries.get_mut(id).filter(|d| d.tenant == tenant) else {
                return Err(not_found("delivery"));
            };
            let log = state.tenants.entry(tenant.to_owned()).or_default();
            if delivery.status != Status::Pending {
                if log.queued >= self.limits.max_queued {
                    return Err(Error::TooManyWebhooks(format!(
                        "at most {} queued webhook deliveries per tenant",
                        self.limits.max_queued
                    )));
                }
                log.queued += 1;
                log.finished.retain(|(_, finished)| finished.as_str() != id);
            }
            delivery.status = Status::Pending;
            delivery.next_attempt_ms = now_ms;
            delivery.retry_until_ms = retry_until_ms;
            let redelivered = delivery.clone();
            state.set_due(id, Some(now_ms));
            let change = delivery_change(state, id, 0);
            self.record_audited(state, change, audit);
            Ok(redelivered)
        })
        .await
    }

    async fn unaudited(&self, limit: usize) -> Result<Vec<AuditEntry>, Error> {
        let state = self.state.lock();
        Ok(state.unaudited.iter().take(limit).cloned().collect())
    }

    async fn audited(&self, ids: &[String]) -> Result<(), Error> {
        let mut state = self.state.lock();
        state.unaudited.retain(|entry| !ids.contains(&entry.id));
        Ok(())
    }

    async fn schedule(&self, timer: &TimerRecord, due_ms: u64) -> Result<(), Error> {
        self.change(|state| {
            let id = timer.id();
            if !state.timers.contains_key(&id) {
                state.timers_due.insert((due_ms, id.clone()));
                state.timers.insert(id, (due_ms, timer.clone()));
                self.record(|| HookChange::TimerPut {
                    due_ms,
                    record: Box::new(timer.clone()),
                });
            }
            Ok(())
        })
        .await
    }

    async fn claim_timers(
        &self,
        now_ms: u64,
        lease_until_ms: u64,
        limit: usize,
    ) -> Result<Vec<TimerRecord>, Error> {
        let mut state = self.state.lock();
        let due = due_by(&state.timers_due, now_ms, limit);
        let mut claimed = Vec::with_capacity(due.len());
        for entry in due {
            state.timers_due.remove(&entry);
            if let Some((at, timer)) = state.timers.get_mut(&entry.1) {
                *at = lease_until_ms;
                claimed.push(timer.clone());
                self.record(|| HookChange::TimerPut {
                    due_ms: lease_until_ms,
                    record: Box::new(timer.clone()),
                });
                state.timers_due.insert((lease_until_ms, entry.1));
            }
        }
        Ok(claimed)
    }

    async fn finish_timer(&self, timer: &TimerRecord, next_ms: Option<u64>) -> Result<(), Error> {
        self.change(|state| {
            let id = timer.id();
            let Some((at, _)) = state.timers.remove(&id) else {
                return Ok(());
            };
            state.timers_due.remove(&(at, id.clone()));
            match next_ms {
                Some(next) => {
                    state.timers_due.insert((next, id.clone()));
                    state.timers.insert(id, (next, timer.clone()));
                    self.record(|| HookChange::TimerPut {
                        due_ms: next,
                        record: Box::new(timer.clone()),
                    });
                }
                None => self.record(|| HookChange::TimerDeleted { id }),
            }
            Ok(())
        })
        .await
    }

    async fn cancel_timer(&self, timer_id: &str) -> Result<(), Error> {
        self.change(|state| {
            if let Some((at, _)) = state.timers.remove(timer_id) {
                state.timers_due.remove(&(at, timer_id.to_owned()));
                self.record(|| HookChange::TimerDeleted {
                    id: timer_id.to_owned(),
                });
            }
            Ok(())
        })
        .await
    }

    async fn put_note(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
        only_new: bool,
    ) -> Result<bool, Error> {
        let now = Instant::now();
        self.change(|state| {
            if only_new && state.notes.get(key).is_some_and(|(_, until)| *until > now) {
                return Ok(false);
            }
            if state.notes.len() >= state.sweep_at {
                state.notes.retain(|_, (_, until)| *until > now);
                state.sweep_at = (state.notes.len() * 2).max(1024);
                self.record(|| HookChange::NotesExpired { by_ms: now_ms() });
            }
            let until = now + Duration::from_millis(ttl_ms);
            state
                .notes
                .insert(key.to_owned(), (value.to_owned(), until));
            self.record(|| HookChange::NotePut {
                key: key.to_owned(),
                value: value.to_owned(),
                expires_ms: now_ms().saturating_add(ttl_ms),
            });
            Ok(true)
        })
        .await
    }

    async fn note(&self, key: &str) -> Result<Option<String>, Error> {
        let state = self.state.lock();
        Ok(state
            .notes
            .get(key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(value, _)| value.clone()))
    }

    async fn put_person(&self, person: &PersonRecord, audit: &AuditEntry) -> Result<(), Error> {
        self.put_person_in(person, audit).await
    }

    async fn people(&self, tenant: &str) -> Result<Vec<PersonRecord>, Error> {
        Ok(self.people_of(tenant))
    }

    async fn delete_person(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.delete_person_in(tenant, id, audit).await
    }

    async fn person_of(&self, tenant: &str, identity: &str) -> Result<Option<PersonRecord>, Error> {
        Ok(self.person_of_identity(tenant, identity))
    }

    async fn put_policies(
        &self,
        set: &PolicySetRecord,
        audit: &AuditEntry,
    ) -> Result<PolicySetRecord, Error> {
        self.put_policies_in(set, audit).await
    }

    async fn policies(&self, tenant: &str) -> Result<Option<PolicySetRecord>, Error> {
        Ok(self.policy_set(tenant))
    }

    async fn policies_version(&self, tenant: &str) -> Result<u64, Error> {
        Ok(self.policy_set(tenant).map_or(0, |s| s.version))
    }

    async fn put_grant(&self, grant: &GrantRecord, audit: &AuditEntry) -> Result<(), Error> {
        self.put_grant_in(grant, audit).await
    }

    async fn grants(&self, tenant: &str) -> Result<Vec<GrantRecord>, Error> {
        Ok(self.grants_of(tenant))
    }

    async fn revoke_grant(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.revoke_grant_in(tenant, id, audit).await
    }

    async fn grants_version(&self, tenant: &str) -> Result<u64, Error> {
        Ok(self.grants_version_of(tenant))
    }
}

mod people;
mod rules;
mod state;
#[cfg(test)]
mod tests;
