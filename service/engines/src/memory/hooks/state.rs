//! The in-memory webhook store's state kept in order: deliveries made due or not,
//! finished ones trimmed, and what a durable store kept put back in place at start.

use std::time::{Duration, Instant};

use askgate_core::{backend::hooks::records::Status, clock::now_ms};

use super::State;
use crate::memory::journal::StoredHooks;

impl State {
    /// Makes delivery `id` due at `at` (or no longer due).
    pub(super) fn set_due(&mut self, id: &str, at: Option<u64>) {
        if let Some(was) = self.due_at.remove(id) {
            self.due.remove(&(was, id.to_owned()));
        }
        if let Some(at) = at {
            self.due.insert((at, id.to_owned()));
            self.due_at.insert(id.to_owned(), at);
        }
    }

    /// Forgets the oldest finished deliveries of `tenant` beyond `keep`; hands their
    /// ids to `trimmed`.
    pub(super) fn trim(&mut self, tenant: &str, keep: usize, mut trimmed: impl FnMut(String)) {
        let Some(log) = self.tenants.get_mut(tenant) else {
            return;
        };
        while log.finished.len() > keep {
            let Some((_, id)) = log.finished.pop_first() else {
                break;
            };
            self.deliveries.remove(&id);
            log.ids.retain(|i| *i != id);
            trimmed(id);
        }
    }

    /// Puts what a store kept in place.
    pub(super) fn restore(&mut self, stored: StoredHooks) {
        let mut last = 0;
        for (position, endpoint) in stored.endpoints {
            last = last.max(position);
            let list = self.endpoints.entry(endpoint.tenant.clone()).or_default();
            list.push(endpoint);
        }
        for (position, due_ms, delivery) in stored.deliveries {
            last = last.max(position);
            let log = self.tenants.entry(delivery.tenant.clone()).or_default();
            log.ids.push_back(delivery.id.clone());
            match delivery.status {
                Status::Pending => {
                    log.queued += 1;
                    self.set_due(&delivery.id, due_ms.or(Some(delivery.next_attempt_ms)));
                }
                _ => {
                    log.finished
                        .insert((delivery.last_attempt_ms, delivery.id.clone()));
                }
            }
            self.deliveries.insert(delivery.id.clone(), delivery);
        }
        for person in stored.people {
            self.people.put(person);
        }
        for set in stored.policies {
            self.policies.insert(set.tenant.clone(), set);
        }
        for grant in stored.grants {
            self.grants.restore(grant);
        }
        for (due_ms, timer) in stored.timers {
            let id = timer.id();
            self.timers_due.insert((due_ms, id.clone()));
            self.timers.insert(id, (due_ms, timer));
        }
        let (now, wall) = (Instant::now(), now_ms());
        for (key, value, expires_ms) in stored.notes {
            if expires_ms > wall {
                let until = now + Duration::from_millis(expires_ms - wall);
                self.notes.insert(key, (value, until));
            }
        }
        self.next_position = last + 1;
    }
}
