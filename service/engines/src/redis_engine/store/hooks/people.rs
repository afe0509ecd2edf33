//! The people of the Redis webhook store (`service People`): a tenant's people by id
//! and an index from each identity to its person, on the `{hooks}` slot, changed by
//! one script each so that an identity never belongs to two people.

use redis::AsyncCommands;

use askgate_core::{
    backend::{audit::AuditEntry, hooks::records::PersonRecord},
    domain::{Error, echo},
};

use super::{RedisHookStore, from_json, to_json};
use crate::redis_engine::{
    keys::HookKeys,
    store::{scripts::hook_scripts::*, unavailable},
};

impl RedisHookStore {
    pub(super) async fn put_person_in(
        &self,
        person: &PersonRecord,
        audit: &AuditEntry,
    ) -> Result<(), Error> {
        let mut script = PUT_PERSON.prepare_invoke();
        script
            .key(HookKeys::people(&person.tenant))
            .key(HookKeys::identities(&person.tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(&person.id)
            .arg(to_json(person)?)
            .arg(self.limits.max_people)
            .arg(&audit.id)
            .arg(to_json(audit)?);
        for identity in &person.identities {
            script.arg(identity);
        }
        let reply: Vec<String> = script
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        match reply.as_slice() {
            [ok] if ok == "ok" => Ok(()),
            [full] if full == "full" => Err(Error::TooManyWebhooks(format!(
                "at most {} people per tenant",
                self.limits.max_people
            ))),
            [taken, index, holder] if taken == "taken" => {
                let i: usize = index.parse().unwrap_or_default();
                let identity = person.identities.get(i).map_or("", String::as_str);
                Err(Error::bad_request(
                    format!("identities[{i}]"),
                    format!(
                        "{} belongs to person {} already",
                        echo(identity),
                        echo(holder)
                    ),
                ))
            }
            other => Err(Error::Internal(format!(
                "putting a person answered {other:?}"
            ))),
        }
    }

    pub(super) async fn people_of(&self, tenant: &str) -> Result<Vec<PersonRecord>, Error> {
        let values: Vec<String> = self
            .conn()
            .hvals(HookKeys::people(tenant))
            .await
            .map_err(unavailable)?;
        let mut people = values
            .iter()
            .map(|json| from_json::<PersonRecord>(json))
            .collect::<Result<Vec<_>, _>>()?;
        people.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(people)
    }

    pub(super) async fn delete_person_in(
        &self,
        tenant: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, Error> {
        let removed: i64 = DELETE_PERSON
            .key(HookKeys::people(tenant))
            .key(HookKeys::identities(tenant))
            .key(HookKeys::unaudited())
            .key(HookKeys::unaudited_order())
            .key(HookKeys::unaudited_seq())
            .arg(id)
            .arg(&audit.id)
            .arg(to_json(audit)?)
            .invoke_async(&mut self.acked())
            .await
            .map_err(unavailable)?;
        Ok(removed == 1)
    }

    pub(super) async fn person_of_identity(
        &self,
        tenant: &str,
        identity: &str,
    ) -> Result<Option<PersonRecord>, Error> {
        let mut conn = self.conn();
        let id: Option<String> = conn
            .hget(HookKeys::identities(tenant), identity)
            .await
            .map_err(unavailable)?;
        let Some(id) = id else {
            return Ok(None);
        };
        let json: Option<String> = conn
            .hget(HookKeys::people(tenant), &id)
            .await
            .map_err(unavailable)?;
        json.as_deref().map(from_json).transpose()
    }
}
