//! People (docs/approvals.md "People"): the identities that count as one person on
//! every channel, their groups, and who answers for them while they are away. What a
//! `PutPerson` may hold, and the one spelling of an identity by which answers find
//! their person.

use askgate_proto::v1::{Delegate as DelegateProto, Identity, Person};
use serde::{Deserialize, Serialize};

use super::{Error, Violation, approval, echo};

/// A person of a tenant as the hook stores keep them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonRecord {
    pub tenant: String,
    /// The person's id, chosen by the admin (`ana`).
    pub id: String,
    pub display_name: String,
    /// Groups an ask's approvers may name, besides those of a credential.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Their identities' keys ([`identity_key`]): a credential's subject (`ana`), or
    /// `slack:<team>/<user>`, `telegram:<user id>`, `email:<address>`. Each belongs to
    /// one person of the tenant at most.
    pub identities: Vec<String>,
    /// Who answers for them while they are away, and until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    pub updated_ms: u64,
}

impl PersonRecord {
    /// What people read for this person: the display name, else the id.
    pub fn shown_name(&self) -> &str {
        match self.display_name.is_empty() {
            true => &self.id,
            false => &self.display_name,
        }
    }
}

/// A person answering for another while they are away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegate {
    /// The id of the person who answers for them.
    pub to_person: String,
    /// Until when, in ms since the epoch.
    pub until_ms: u64,
}

/// Longest person id, in bytes.
pub const MAX_PERSON_ID_BYTES: usize = 64;
/// Longest display name, in bytes.
pub const MAX_DISPLAY_NAME_BYTES: usize = 256;
/// Most identities of one person.
pub const MAX_IDENTITIES: usize = 32;
/// Most groups of one person.
pub const MAX_PERSON_GROUPS: usize = 64;
/// Longest identity value or group, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// The kinds of identity, as `Identity.kind` names them.
pub const KINDS: [&str; 4] = ["subject", "slack", "telegram", "email"];

/// The key of an identity: how answers through its channel name their person
/// (`ana`, `slack:t1/u2`, `telegram:42`, `email:ana@example.org`), as
/// [`approval::person`] spells it.
pub fn identity_key(kind: &str, value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() || value.len() > MAX_NAME_BYTES || value.chars().any(char::is_control) {
        return Err(format!(
            "the value must be 1-{MAX_NAME_BYTES} bytes without control characters"
        ));
    }
    let key = match kind {
        "subject" => {
            approval::credential_subject(value)?;
            value.to_owned()
        }
        "slack" => {
            // TEAM/USER, or TEAM:USER as Slack's admin pages write it.
            let (team, user) = value
                .split_once(['/', ':'])
                .filter(|(t, u)| slack_id(t) && slack_id(u))
                .ok_or("a Slack identity is TEAM/USER (e.g. T0123/U0456)")?;
            format!("slack:{team}/{user}")
        }
        "telegram" => {
            if !value.bytes().all(|b| b.is_ascii_digit()) || value.len() > 20 {
                return Err("a Telegram identity is the numeric user id".into());
            }
            format!("telegram:{value}")
        }
        "email" => {
            let (local, domain) = value
                .rsplit_once('@')
                .filter(|(l, d)| !l.is_empty() && d.contains('.') && !value.contains(' '))
                .ok_or("an email identity is an address (ana@example.org)")?;
            format!("email:{local}@{domain}")
        }
        other => {
            return Err(format!(
                "{} is no kind of identity: one of {}",
                echo(other),
                KINDS.join(", ")
            ));
        }
    };
    Ok(approval::person(&key))
}

fn slack_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A key as an `Identity` again (as compared: lower case).
pub fn identity(key: &str) -> Identity {
    let (kind, value) = match key.split_once(':') {
        Some((kind @ ("slack" | "telegram" | "email"), value)) => (kind, value),
        _ => ("subject", key),
    };
    Identity {
        kind: kind.to_owned(),
        value: value.to_owned(),
    }
}

/// A person id: 1-64 of `[A-Za-z0-9._@-]`.
pub fn person_id(field: &str, id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= MAX_PERSON_ID_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    match ok {
        true => Ok(()),
        false => Err(Error::bad_request(
            field,
            format!("must be 1-{MAX_PERSON_ID_BYTES} of [A-Za-z0-9._@-]"),
        )),
    }
}

/// The record a `PutPerson` of `person` in `tenant` keeps, checked whole.
pub fn record(tenant: &str, person: Person, now_ms: u64) -> Result<PersonRecord, Error> {
    let mut violations = Vec::new();
    if let Err(Error::BadRequest(v)) = person_id("id", &person.id) {
        violations.extend(v);
    }
    let display_name = person.display_name.trim().to_owned();
    if display_name.len() > MAX_DISPLAY_NAME_BYTES || display_name.chars().any(char::is_control) {
        violations.push(Violation::new(
            "display_name",
            format!("must be at most {MAX_DISPLAY_NAME_BYTES} bytes without control characters"),
        ));
    }
    if person.groups.len() > MAX_PERSON_GROUPS {
        violations.push(Violation::new(
            "groups",
            format!("at most {MAX_PERSON_GROUPS}"),
        ));
    }
    let mut groups: Vec<String> = Vec::new();
    for (i, group) in person.groups.into_iter().enumerate() {
        if group.is_empty() || group.len() > MAX_NAME_BYTES || group.chars().any(char::is_control) {
            violations.push(Violation::new(
                format!("groups[{i}]"),
                format!("must be 1-{MAX_NAME_BYTES} bytes without control characters"),
            ));
        } else if !groups.contains(&group) {
            groups.push(group);
        }
    }
    if person.identities.len() > MAX_IDENTITIES {
        violations.push(Violation::new(
            "identities",
            format!("at most {MAX_IDENTITIES}"),
        ));
    }
    let mut identities: Vec<String> = Vec::new();
    for (i, Identity { kind, value }) in person.identities.iter().enumerate() {
        match identity_key(kind, value) {
            Ok(key) if !identities.contains(&key) => identities.push(key),
            Ok(_) => {}
            Err(e) => violations.push(Violation::new(format!("identities[{i}]"), e)),
        }
    }
    let delegate = match person.delegate {
        None => None,
        Some(DelegateProto { to_person, until }) => {
            if let Err(Error::BadRequest(v)) = person_id("delegate.to_person", &to_person) {
                violations.extend(v);
            } else if to_person == person.id {
                violations.push(Violation::new(
                    "delegate.to_person",
                    "a person cannot be their own delegate",
                ));
            }
            let until_ms = until
                .and_then(|t| std::time::SystemTime::try_from(t).ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64);
            match until_ms {
                Some(until_ms) => Some(Delegate {
                    to_person,
                    until_ms,
                }),
                None => {
                    violations.push(Violation::new(
                        "delegate.until",
                        "when the delegation ends (a time after 1970)",
                    ));
                    None
                }
            }
        }
    };
    if !violations.is_empty() {
        return Err(Error::BadRequest(violations));
    }
    Ok(PersonRecord {
        tenant: tenant.to_owned(),
        id: person.id,
        display_name,
        groups,
        identities,
        delegate,
        updated_ms: now_ms,
    })
}

/// A record as `ListPeople` shows it.
pub fn to_proto(record: &PersonRecord) -> Person {
    Person {
        id: record.id.clone(),
        display_name: record.display_name.clone(),
        groups: record.groups.clone(),
        identities: record.identities.iter().map(|k| identity(k)).collect(),
        delegate: record.delegate.as_ref().map(|d| DelegateProto {
            to_person: d.to_person.clone(),
            until: Some(
                (std::time::UNIX_EPOCH + std::time::Duration::from_millis(d.until_ms)).into(),
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_spelt_one_way() {
        assert_eq!(identity_key("subject", "Ana").as_deref(), Ok("ana"));
        assert_eq!(
            identity_key("slack", "T0123:U0456").as_deref(),
            Ok("slack:t0123/u0456")
        );
        assert_eq!(
            identity_key("slack", "T0123/U0456"),
            identity_key("slack", "t0123:u0456")
        );
        assert_eq!(
            identity_key("email", "Ana+ops@Example.org").as_deref(),
            Ok("email:ana@example.org")
        );
        assert_eq!(identity_key("telegram", "42").as_deref(), Ok("telegram:42"));
        for (kind, value) in [
            ("telegram", "@ana"),
            ("slack", "U0456"),
            ("email", "ana"),
            ("subject", "askgate:default"),
            ("subject", ""),
            ("phone", "+1555"),
        ] {
            assert!(identity_key(kind, value).is_err(), "{kind} {value}");
        }
        // The key reads back as the identity it came from (as compared).
        for key in ["ana", "slack:t1/u2", "telegram:42", "email:ana@example.org"] {
            let Identity { kind, value } = identity(key);
            assert_eq!(identity_key(&kind, &value).as_deref(), Ok(key));
        }
    }

    #[test]
    fn a_person_is_checked_whole() {
        let person = Person {
            id: "ana".into(),
            display_name: " Ana ".into(),
            groups: vec!["ops".into(), "ops".into()],
            identities: vec![
                Identity {
                    kind: "subject".into(),
                    value: "ana".into(),
                },
                Identity {
                    kind: "subject".into(),
                    value: "ANA".into(),
                },
            ],
            delegate: None,
        };
        let record = record("acme", person.clone(), 7).expect("valid");
        assert_eq!(
            (
                record.display_name.as_str(),
                record.groups.len(),
                record.identities.len()
            ),
            ("Ana", 1, 1)
        );
        let wrong = Person {
            id: "a b".into(),
            identities: vec![Identity {
                kind: "fax".into(),
                value: "1".into(),
            }],
            delegate: Some(DelegateProto {
                to_person: "a b".into(),
                until: None,
            }),
            ..person
        };
        let Err(Error::BadRequest(violations)) = super::record("acme", wrong, 7) else {
            panic!("refused");
        };
        let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "id",
                "identities[0]",
                "delegate.to_person",
                "delegate.until"
            ]
        );
    }
}
