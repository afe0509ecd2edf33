//! Who answers, as a person (docs/approvals.md "People"): an answer's identity found
//! among the tenant's people, so that their other identities and groups count, and
//! those of whom they stand in for while a delegation holds. Asked only for asks that
//! must tell people apart (approvers, a quorum): a plain ask reads nothing.

use askgate_proto::v1::Requested;

use super::{
    audit::AuditEntry,
    hooks::{HookStore, records::PersonRecord},
};
use crate::{
    clock::now_ms,
    domain::{Error, approval},
};

/// Where an answerer stands on an ask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    /// Their person, when the tenant knows their identity.
    pub person: Option<PersonRecord>,
    /// The person they stand in for, when only a delegation makes them an approver.
    pub for_person: Option<String>,
}

/// Whether `requested` must know who answers as a person: it names approvers, or
/// counts a quorum.
pub fn needs_person(requested: &Requested) -> bool {
    approval::names_approvers(requested) || requested.quorum.is_some_and(|q| q.count > 1)
}

/// The person of the tenant whose identity `identity` is (any spelling of it).
pub async fn person_of(
    store: &dyn HookStore,
    tenant: &str,
    identity: &str,
) -> Result<Option<PersonRecord>, Error> {
    store.person_of(tenant, &approval::person(identity)).await
}

/// Where the person answering as `identity` (None: a channel that cannot tell who
/// answers), with a credential naming `groups`, stands on `requested`: NOT_AN_APPROVER
/// unless its approvers name them (their identity, or any of their person's; a group
/// of the credential's or their person's), or a person who named them their delegate
/// while the delegation holds. `cancelling`: the approvers bind a cancel only with
/// `cancel_too`. Without a store (no webhooks on the node) no person is known.
pub async fn standing(
    store: Option<&dyn HookStore>,
    tenant: &str,
    requested: &Requested,
    identity: Option<&str>,
    groups: &[String],
    cancelling: bool,
) -> Result<Standing, Error> {
    let person = match (store, identity.filter(|_| needs_person(requested))) {
        (Some(store), Some(identity)) => person_of(store, tenant, identity).await?,
        _ => None,
    };
    let now = now_ms();
    // As they stand now: widened or replaced by the escalation steps that came.
    let Some(approvers) = approval::approvers_at(requested, now) else {
        return Ok(Standing {
            person,
            for_person: None,
        });
    };
    if cancelling && !approvers.cancel_too {
        return Ok(Standing {
            person,
            for_person: None,
        });
    }
    let refused = || Error::NotAnApprover {
        approvers: approval::approvers_text(&approvers),
    };
    let Some(identity) = identity else {
        return Err(refused());
    };
    let mut identities = vec![identity];
    let mut all_groups = groups.to_vec();
    if let Some(person) = &person {
        identities.extend(person.identities.iter().map(String::as_str));
        all_groups.extend(person.groups.iter().cloned());
    }
    if approval::names(&approvers, &identities, &all_groups) {
        return Ok(Standing {
            person,
            for_person: None,
        });
    }
    // Standing in for someone away.
    let (Some(me), Some(store)) = (&person, store) else {
        return Err(refused());
    };
    let away = store.people(tenant).await?.into_iter().find(|absent| {
        let holds = absent
            .delegate
            .as_ref()
            .is_some_and(|d| d.to_person == me.id && d.until_ms > now);
        let ids: Vec<&str> = absent.identities.iter().map(String::as_str).collect();
        holds && approval::names(&approvers, &ids, &absent.groups)
    });
    match away {
        Some(absent) => Ok(Standing {
            person,
            for_person: Some(absent.id),
        }),
        None => Err(refused()),
    }
}

/// How long a link code is good.
pub const LINK_TTL_MS: u64 = 10 * 60 * 1000;
/// The characters of a link code: no 0/O, 1/I/L to misread.
const CODE_ALPHABET: &[u8; 31] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Characters of a link code (40 bits).
const CODE_LENGTH: usize = 8;

/// The note of a link code: unambiguous whatever the tenant holds.
fn link_note(tenant: &str, code: &str) -> String {
    format!("link:{}", serde_json::json!([tenant, code]))
}

/// A one-time code that links a channel identity to person `person` of `tenant`, and
/// when it expires (ms since the epoch).
pub async fn start_link(
    store: &dyn HookStore,
    tenant: &str,
    person: &str,
) -> Result<(String, u64), Error> {
    let random = uuid::Uuid::new_v4().into_bytes();
    let code: String = random[..CODE_LENGTH]
        .iter()
        .map(|b| char::from(CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()]))
        .collect();
    store
        .put_note(&link_note(tenant, &code), person, LINK_TTL_MS, true)
        .await?;
    Ok((code, now_ms() + LINK_TTL_MS))
}

/// Links `identity` (a channel identity's key, e.g. `telegram:42`) to the person whose
/// code `code` of `tenant` is: good once, while it lasts. `audit` names the change.
/// BAD_REQUEST naming `code` when it is unknown, used or expired, or naming the
/// identity when it belongs to another person.
pub async fn link(
    store: &dyn HookStore,
    tenant: &str,
    code: &str,
    identity: &str,
    audit: impl FnOnce(&PersonRecord) -> AuditEntry,
) -> Result<PersonRecord, Error> {
    let code = code.trim().to_ascii_uppercase();
    let refused = || Error::bad_request("code", "unknown, used or expired: ask for a new one");
    if code.len() != CODE_LENGTH || !code.bytes().all(|b| CODE_ALPHABET.contains(&b)) {
        return Err(refused());
    }
    let note = link_note(tenant, &code);
    let Some(person_id) = store.note(&note).await? else {
        return Err(refused());
    };
    if !store
        .put_note(&format!("{note}:used"), "1", LINK_TTL_MS, true)
        .await?
    {
        return Err(refused());
    }
    let people = store.people(tenant).await?;
    let Some(mut person) = people.into_iter().find(|p| p.id == person_id) else {
        return Err(refused());
    };
    let key = approval::person(identity);
    if !person.identities.contains(&key) {
        if person.identities.len() >= crate::domain::people::MAX_IDENTITIES {
            return Err(Error::bad_request(
                "identities",
                format!(
                    "{} has as many identities as a person may",
                    crate::domain::echo(&person.id)
                ),
            ));
        }
        person.identities.push(key);
    }
    person.updated_ms = now_ms();
    store.put_person(&person, &audit(&person)).await?;
    Ok(person)
}
