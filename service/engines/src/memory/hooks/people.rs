//! The people of the in-memory webhook store (`service People`): per tenant by id,
//! with an index from each identity to its person.

use std::collections::{BTreeMap, HashMap};

use askgate_core::{
    backend::{
        audit::AuditEntry,
        hooks::{identity_taken, records::PersonRecord},
    },
    domain::Error,
};

use super::{MemoryHookStore, State};
use crate::memory::journal::HookChange;

/// The people of every tenant.
#[derive(Default)]
pub(super) struct People {
    /// Per tenant, by id.
    by_id: HashMap<String, BTreeMap<String, PersonRecord>>,
    /// (tenant, identity) → person id.
    by_identity: HashMap<(String, String), String>,
}

impl People {
    /// Puts `person` in place of the one with their id, if any.
    pub(super) fn put(&mut self, person: PersonRecord) {
        self.remove(&person.tenant, &person.id);
        for identity in &person.identities {
            let key = (person.tenant.clone(), identity.clone());
            self.by_identity.insert(key, person.id.clone());
        }
        self.by_id
            .entry(person.tenant.clone())
            .or_default()
            .insert(person.id.clone(), person);
    }

    /// Removes the person `id` of `tenant`; whether they were there.
    pub(super) fn remove(&mut self, tenant: &str, id: &str) -> bool {
        let Some(person) = self.by_id.get_mut(tenant).and_then(|p| p.remove(id)) else {
            return false;
        };
        for identity in person.identities {
            self.by_identity.remove(&(tenant.to_owned(), identity));
        }
        true
    }

    fn of(&self, tenant: &str) -> Vec<PersonRecord> {
        self.by_id
            .get(tenant)
            .map(|people| people.values().cloned().collect())
            .unwrap_or_default()
    }
}

impl MemoryHookStore {
    pub(super) async fn put_person_in(
        &self,
        person: &PersonRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        self.change(|state: &mut State| {
            let others = state.people.of(&person.tenant);
            if let Some(taken) = identity_taken(person, &others) {
                return Err(taken);
            }
            let new = !others.iter().any(|o| o.id == person.id);
            if new && others.len() >= self.limits.max_people {
                return Err(Error::TooManyWebhooks(format!(
                    "at most {} people per tenant",
                    self.limits.max_people
                )));
            }
            state.people.put(person.clone());
            let change = HookChange::PersonPut {
                record: Box::new(person.clone()),
            };
            self.record_audited(state, change, audit);
            Ok(())
        })
        .await
    }

    pub(super) fn people_of(&self, tenant: &str) -> Vec<PersonRecord> {
        self.state.lock().people.of(tenant)
    }

    pub(super) async fn delete_person_in(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        self.change(|state: &mut State| {
            if !state.people.remove(tenant, id) {
                return Ok(false);
            }
            let change = HookChange::PersonDeleted {
                tenant: tenant.to_owned(),
                id: id.to_owned(),
            };
            self.record_audited(state, change, audit);
            Ok(true)
        })
        .await
    }

    pub(super) fn person_of_identity(&self, tenant: &str, identity: &str) -> Option<PersonRecord> {
        let state = self.state.lock();
        let people = &state.people;
        let id = people
            .by_identity
            .get(&(tenant.to_owned(), identity.to_owned()))?;
        people.by_id.get(tenant)?.get(id).cloned()
    }
}
