//! A tenant's policy set as the hook stores keep it (`service Policies`,
//! docs/policy.md): the Cedar text and schema as the admin put them, the mode, and a
//! version every node compares to know its compiled copy is current. Compiling and
//! deciding are the server's (`askgate_server::policy`).

use serde::{Deserialize, Serialize};

use super::Error;

/// How a tenant's policies act on its asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decisions apply: a forbid denies, an allowing permit allows, an asking one fills.
    #[default]
    Enforce,
    /// Decisions are recorded only (audit, metric, the ask's `policy`): every ask is asked.
    Shadow,
}

impl Mode {
    /// The wire name: `enforce` or `shadow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
        }
    }

    /// The mode `text` names (empty: enforce); BAD_REQUEST on `field` otherwise.
    pub fn parse(field: &str, text: &str) -> Result<Self, Error> {
        match text {
            "" | "enforce" => Ok(Self::Enforce),
            "shadow" => Ok(Self::Shadow),
            _ => Err(Error::bad_request(field, "is \"enforce\" or \"shadow\"")),
        }
    }
}

/// A tenant's policy set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySetRecord {
    pub tenant: String,
    /// The policies, in Cedar's syntax (empty: none).
    pub text: String,
    /// The tenant's Cedar schema (empty: none; the policies are then only parsed).
    #[serde(default)]
    pub schema: String,
    #[serde(default)]
    pub mode: Mode,
    /// Counts the tenant's puts from 1 (the store sets it); 0: never put.
    #[serde(default)]
    pub version: u64,
    pub updated_ms: u64,
    /// Each policy's id, in the set's order (as compiled when it was put).
    #[serde(default)]
    pub policy_ids: Vec<String>,
}

/// Where a standing grant holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantScope {
    /// Asks of the session it was granted in.
    Session,
    /// Asks of the agent the approved ask named.
    Agent,
    /// Every ask of the tenant.
    Tenant,
}

impl GrantScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Agent => "agent",
            Self::Tenant => "tenant",
        }
    }

    /// The scope `text` names; BAD_REQUEST on `field` otherwise.
    pub fn parse(field: &str, text: &str) -> Result<Self, Error> {
        match text {
            "session" => Ok(Self::Session),
            "agent" => Ok(Self::Agent),
            "tenant" => Ok(Self::Tenant),
            _ => Err(Error::bad_request(
                field,
                "is \"session\", \"agent\" or \"tenant\"",
            )),
        }
    }
}

/// Longest a grant may hold.
pub const MAX_GRANT_TTL_MS: u64 = 30 * 24 * 3600 * 1000;
/// Longest `match_json` of a grant, in bytes.
pub const MAX_GRANT_MATCH_BYTES: usize = 4096;
/// Grants one tenant may hold at once (expired ones do not count).
pub const MAX_GRANTS_PER_TENANT: usize = 1000;

/// A standing grant (`service Grants`): an approving human's "allow this from now on",
/// which allows later asks of the same action in its scope until it expires or is
/// revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRecord {
    pub tenant: String,
    pub id: String,
    pub scope: GrantScope,
    /// The session (scope `session`) or agent (scope `agent`) it holds for.
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub agent_id: String,
    pub action_name: String,
    /// The approved action's digest: later arguments must be equal, unless
    /// `match_json` says which of them must be.
    pub action_digest: String,
    /// A JSON object the later arguments must contain; empty: equal arguments.
    #[serde(default)]
    pub match_json: String,
    pub granted_by: String,
    /// The subject that asked the approved ask: an `agent` grant holds for that
    /// credential's asks only (an agent id is the asker's word, checked for liveness
    /// only once an ask is registered, which an allowed ask never is).
    #[serde(default)]
    pub asked_by: String,
    /// The ask whose answer granted it.
    pub rpc_id: String,
    pub created_ms: u64,
    pub expires_ms: u64,
}

/// What a grant is held against: a later ask with an action.
pub struct GrantedAsk<'a> {
    pub session_id: &'a str,
    /// The asking credential's subject.
    pub asked_by: &'a str,
    pub agent_id: &'a str,
    pub action_name: &'a str,
    pub action_digest: &'a str,
    /// The action's arguments, parsed.
    pub arguments: &'a serde_json::Value,
    pub now_ms: u64,
}

impl GrantRecord {
    /// Whether the grant allows `ask`.
    pub fn allows(&self, ask: &GrantedAsk<'_>) -> bool {
        if self.expires_ms <= ask.now_ms || self.action_name != ask.action_name {
            return false;
        }
        let in_scope = match self.scope {
            GrantScope::Session => self.session_id == ask.session_id,
            GrantScope::Agent => {
                !self.agent_id.is_empty()
                    && self.agent_id == ask.agent_id
                    && self.asked_by == ask.asked_by
            }
            GrantScope::Tenant => true,
        };
        if !in_scope {
            return false;
        }
        match self.match_json.is_empty() {
            true => self.action_digest == ask.action_digest,
            false => serde_json::from_str::<serde_json::Value>(&self.match_json)
                .is_ok_and(|wanted| contains(ask.arguments, &wanted)),
        }
    }
}

/// Whether `value` contains `wanted`: an object each of whose keys `value` has with a
/// value that contains the wanted one; anything else, an equal value.
pub fn contains(value: &serde_json::Value, wanted: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (value, wanted) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(key, w)| have.get(key).is_some_and(|h| contains(h, w))),
        _ => value == wanted,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grant(scope: GrantScope, match_json: &str) -> GrantRecord {
        GrantRecord {
            tenant: "t".into(),
            id: "g1".into(),
            scope,
            session_id: "s1".into(),
            agent_id: "a1".into(),
            action_name: "Bash".into(),
            action_digest: "d1".into(),
            match_json: match_json.into(),
            granted_by: "ana".into(),
            asked_by: "bot".into(),
            rpc_id: "r1".into(),
            created_ms: 0,
            expires_ms: 1000,
        }
    }

    #[test]
    fn a_grant_holds_in_its_scope_for_its_action_until_it_expires() {
        let arguments = json!({ "command": "make test", "timeout": 5 });
        let ask = |session, agent, name, digest, now_ms| GrantedAsk {
            session_id: session,
            asked_by: "bot",
            agent_id: agent,
            action_name: name,
            action_digest: digest,
            arguments: &arguments,
            now_ms,
        };
        let exact = grant(GrantScope::Session, "");
        assert!(exact.allows(&ask("s1", "", "Bash", "d1", 999)));
        assert!(!exact.allows(&ask("s1", "", "Bash", "d1", 1000)), "expired");
        assert!(
            !exact.allows(&ask("s2", "", "Bash", "d1", 5)),
            "another session"
        );
        assert!(
            !exact.allows(&ask("s1", "", "Bash", "d2", 5)),
            "other arguments"
        );
        assert!(
            !exact.allows(&ask("s1", "", "Edit", "d1", 5)),
            "another action"
        );
        let agent = grant(GrantScope::Agent, "");
        assert!(agent.allows(&ask("s9", "a1", "Bash", "d1", 5)));
        assert!(!agent.allows(&ask("s1", "", "Bash", "d1", 5)), "no agent");
        let spoofed = GrantedAsk {
            asked_by: "another-bot",
            ..ask("s9", "a1", "Bash", "d1", 5)
        };
        assert!(
            !agent.allows(&spoofed),
            "another credential naming the agent"
        );
        let subset = grant(GrantScope::Tenant, r#"{"command":"make test"}"#);
        assert!(subset.allows(&ask("s9", "", "Bash", "other", 5)));
        let other = grant(GrantScope::Tenant, r#"{"command":"make deploy"}"#);
        assert!(!other.allows(&ask("s9", "", "Bash", "other", 5)));
    }

    #[test]
    fn containment_is_recursive_on_objects_and_exact_elsewhere() {
        let value = json!({ "a": { "b": 1, "c": [1, 2] }, "d": "x" });
        assert!(contains(&value, &json!({})));
        assert!(contains(&value, &json!({ "a": { "b": 1 } })));
        assert!(contains(&value, &json!({ "a": { "c": [1, 2] }, "d": "x" })));
        assert!(
            !contains(&value, &json!({ "a": { "c": [1] } })),
            "arrays are equal or not"
        );
        assert!(!contains(&value, &json!({ "e": null })));
    }
}
