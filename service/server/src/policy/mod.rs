//! A tenant's policy before asking: Cedar policies, validated against
//! the tenant's Cedar schema, that decide an ask with an action before a human is
//! bothered: denied (a `forbid` matched), allowed (a `permit` annotated
//! `@decision("allow")` matched, and no `forbid`), or asked (a `permit` annotated
//! `@decision("ask")`, whose annotations fill what the ask left unset, or nothing
//! matched at all).
//!
//! The request Cedar judges: principal `Agent::"<subject>"` (its `groups` the
//! credential's), action `Action::"<the action's name>"`, resource `Session::"<session
//! id>"`, context `{arguments: <the action's arguments>, labels: <"key=value" set>}`.
//! With a schema (Cedar's schema syntax: Cedar has no open records, so it declares
//! each action it decides and the shape of its arguments; askgate adds the `Agent` and
//! `Session` entity types) the policies are validated strictly against it, and an ask
//! whose action the schema does not declare, or whose arguments do not fit, is not
//! decided here: a human is asked, and the decision records why. Without one the
//! policies are only parsed, and an ask on which a policy fails to evaluate (it reads
//! an argument the ask does not have) is not judged either: a policy that might have
//! forbidden it never lets it through.

use std::{
    collections::{BTreeMap, HashMap},
    str::FromStr as _,
    time::Duration,
};

use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, PolicyId, PolicySet, Request, RestrictedExpression, Schema, ValidationMode,
    Validator,
};

/// What askgate's request model adds to every tenant's schema.
const BASE_SCHEMA: &str = "entity Agent = { groups: Set<String> };\nentity Session;\n";

/// Most policies one tenant's set may hold.
pub const MAX_POLICIES: usize = 1000;
/// Longest policy set or schema text, in bytes.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
/// Longest annotation value, in bytes.
const MAX_ANNOTATION_BYTES: usize = 1024;
/// Most names a policy's `@approvers` may hold (as an ask's approvers).
const MAX_APPROVERS: usize = 32;
/// Most approvals a policy's `@quorum` may ask for (as an ask's quorum; 1: none).
const MAX_QUORUM: u32 = *askgate_core::domain::approval::QUORUM.end();

/// What a tenant's policies decided about one ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A `forbid` matched: the agent gets DENIED_BY_POLICY with the policy's reason.
    Deny { policy: String, reason: String },
    /// A `permit` with `@decision("allow")` matched and no `forbid` did.
    Allow { policy: String },
    /// A `permit` with `@decision("ask")` matched (and no `forbid`, no allowing permit):
    /// asked, with what its annotations say.
    Ask { policy: String, fill: Fill },
    /// Nothing matched: asked, as without policies.
    NoMatch,
    /// The ask could not be judged (its action is not in the schema, its arguments do
    /// not fit): asked, with Cedar's reason recorded.
    NotJudged(String),
}

/// What an asking permit's annotations fill in an ask that left them unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fill {
    /// `@approvers("ana, group:sre")`: who may answer.
    pub approvers: Vec<String>,
    /// `@quorum("2")`: approvals needed.
    pub quorum: Option<u32>,
    /// `@ttl("15m")`: how long the ask waits for a human.
    pub ttl: Option<Duration>,
    /// `@default("Reject")`: the option chosen when nobody answers in time.
    pub default: Option<String>,
}

/// One tenant's policies, parsed and validated against its schema.
pub struct Policies {
    set: PolicySet,
    /// The tenant's schema with askgate's declarations, when the tenant gave one.
    schema: Option<Schema>,
    /// Each policy's name (its `@id`, else Cedar's `policy<N>`), by Cedar's id.
    names: BTreeMap<PolicyId, String>,
    authorizer: Authorizer,
}

/// One ask, as the policies see it.
pub struct Asked<'a> {
    pub subject: &'a str,
    pub groups: &'a [String],
    pub action: &'a str,
    pub session: &'a str,
    /// The action's arguments: a JSON object.
    pub arguments: &'a serde_json::Value,
    pub labels: &'a HashMap<String, String>,
}

impl Policies {
    /// Parses `policies` and the tenant's `schema` (Cedar's own syntax; empty: none)
    /// and validates the one against the other; the error is Cedar's message, or names
    /// what askgate requires besides: every `permit` says `@decision("allow")` or
    /// `@decision("ask")`, `@id`s are unique, annotations are well-formed.
    pub fn new(policies: &str, schema: &str) -> Result<Self, String> {
        for (what, text) in [("the policy set", policies), ("the schema", schema)] {
            if text.len() > MAX_TEXT_BYTES {
                return Err(format!("{what} is longer than {MAX_TEXT_BYTES} bytes"));
            }
        }
        let schema = match schema.trim().is_empty() {
            true => None,
            false => Some(
                Schema::from_cedarschema_str(&format!("{BASE_SCHEMA}{schema}"))
                    .map_err(|e| format!("the schema: {e}"))?
                    .0,
            ),
        };
        let set = PolicySet::from_str(policies).map_err(|e| format!("the policy set: {e}"))?;
        let count = set.policies().count();
        if count > MAX_POLICIES {
            return Err(format!("at most {MAX_POLICIES} policies, not {count}"));
        }
        if set.templates().next().is_some() {
            return Err("templates are not supported: write each policy whole".into());
        }
        if let Some(schema) = &schema {
            let validation = Validator::new(schema.clone()).validate(&set, ValidationMode::Strict);
            if let Some(error) = validation.validation_errors().next() {
                return Err(format!("the policy set does not fit the schema: {error}"));
            }
        }
        let mut names = BTreeMap::new();
        for policy in set.policies() {
            let name = match policy.annotation("id") {
                Some(id) => id.to_owned(),
                None => policy.id().to_string(),
            };
            if names.values().any(|n| *n == name) {
                return Err(format!("two policies are named {name:?}: each @id once"));
            }
            check_annotations(policy, &name)?;
            names.insert(policy.id().clone(), name);
        }
        Ok(Self {
            set,
            schema,
            names,
            authorizer: Authorizer::new(),
        })
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Each policy's name, in the set's order.
    pub fn ids(&self) -> Vec<String> {
        let mut named: Vec<(&PolicyId, &String)> = self.names.iter().collect();
        named.sort_by_key(|(id, _)| order(id));
        named.into_iter().map(|(_, name)| name.clone()).collect()
    }

    /// What the policies decide about `asked`.
    pub fn decide(&self, asked: &Asked<'_>) -> Decision {
        self.judge(asked).0
    }

    /// What the policies decide about `asked`, and the names of those that matched,
    /// in the set's order.
    pub fn judge(&self, asked: &Asked<'_>) -> (Decision, Vec<String>) {
        let request = match self.request(asked) {
            Ok(request) => request,
            Err(why) => return (Decision::NotJudged(why), Vec::new()),
        };
        let (request, entities) = request;
        let response = self
            .authorizer
            .is_authorized(&request, &self.set, &entities);
        // In the set's order (Cedar reports a set): the first of several names it.
        let mut matched: Vec<&PolicyId> = response.diagnostics().reason().collect();
        matched.sort_by_key(|id| order(id));
        let names = matched.iter().map(|id| self.name(id)).collect();
        // A forbid that failed to evaluate might have denied: not judged. A permit that
        // failed matched nothing, which only ever leads to asking.
        let failed_forbid = response.diagnostics().errors().find(|error| {
            let cedar_policy::AuthorizationError::PolicyEvaluationError(failed) = error;
            self.set
                .policy(failed.policy_id())
                .is_none_or(|p| p.effect() == cedar_policy::Effect::Forbid)
        });
        if let Some(error) = failed_forbid {
            return (Decision::NotJudged(error.to_string()), names);
        }
        (self.decision(response.decision(), &matched), names)
    }

    fn decision(&self, decision: CedarDecision, matched: &[&PolicyId]) -> Decision {
        match decision {
            CedarDecision::Deny => match matched.first() {
                Some(id) => {
                    let reason = self
                        .set
                        .policy(id)
                        .and_then(|p| p.annotation("reason"))
                        .unwrap_or("denied by policy")
                        .to_owned();
                    Decision::Deny {
                        policy: self.name(id),
                        reason,
                    }
                }
                None => Decision::NoMatch,
            },
            CedarDecision::Allow => {
                let decision =
                    |id: &&PolicyId| self.set.policy(id).and_then(|p| p.annotation("decision"));
                if let Some(id) = matched.iter().find(|id| decision(id) == Some("allow")) {
                    return Decision::Allow {
                        policy: self.name(id),
                    };
                }
                match matched.first() {
                    Some(id) => Decision::Ask {
                        policy: self.name(id),
                        fill: self.set.policy(id).map(fill_of).unwrap_or_default(),
                    },
                    None => Decision::NoMatch,
                }
            }
        }
    }

    fn name(&self, id: &PolicyId) -> String {
        self.names
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string())
    }

    /// Cedar's request for `asked`, with the entities it needs; an error says why the
    /// ask does not fit the schema.
    fn request(&self, asked: &Asked<'_>) -> Result<(Request, Entities), String> {
        let uid = |kind: &str, id: &str| -> Result<EntityUid, String> {
            let kind = EntityTypeName::from_str(kind).map_err(|e| e.to_string())?;
            Ok(EntityUid::from_type_name_and_id(kind, EntityId::new(id)))
        };
        let principal = uid("Agent", asked.subject)?;
        let action = uid("Action", asked.action)?;
        let resource = uid("Session", asked.session)?;
        let labels: Vec<String> = asked
            .labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let context = serde_json::json!({ "arguments": asked.arguments, "labels": labels });
        let schema = self.schema.as_ref();
        let context = Context::from_json_value(context, schema.map(|s| (s, &action)))
            .map_err(|e| e.to_string())?;
        let groups = RestrictedExpression::new_set(
            asked
                .groups
                .iter()
                .map(|g| RestrictedExpression::new_string(g.clone())),
        );
        let agent = Entity::new(
            principal.clone(),
            [("groups".to_owned(), groups)].into_iter().collect(),
            Default::default(),
        )
        .map_err(|e| e.to_string())?;
        let entities = Entities::from_entities([agent], schema).map_err(|e| e.to_string())?;
        let request = Request::new(principal, action, resource, context, schema)
            .map_err(|e| e.to_string())?;
        Ok((request, entities))
    }
}

/// Where a policy stands in its set: Cedar names the policies it parses `policy0`,
/// `policy1`, ... in their order.
fn order(id: &PolicyId) -> (usize, String) {
    let name = id.to_string();
    let index = name
        .strip_prefix("policy")
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    (index, name)
}

/// Checks a policy's annotations: what askgate reads of them must be well-formed.
fn check_annotations(policy: &cedar_policy::Policy, name: &str) -> Result<(), String> {
    let bad = |what: &str, why: &str| Err(format!("policy {name:?}: @{what} {why}"));
    for (key, value) in policy.annotations() {
        if value.len() > MAX_ANNOTATION_BYTES {
            return bad(key, &format!("is longer than {MAX_ANNOTATION_BYTES} bytes"));
        }
    }
    let permit = policy.effect() == cedar_policy::Effect::Permit;
    match (permit, policy.annotation("decision")) {
        (true, Some("allow" | "ask")) => {}
        (true, Some(_)) => return bad("decision", "is \"allow\" or \"ask\""),
        (true, None) => {
            return bad(
                "decision",
                "is needed on every permit: \"allow\" (no human asked) or \"ask\"",
            );
        }
        (false, Some(_)) => return bad("decision", "belongs on a permit: a forbid denies"),
        (false, None) => {}
    }
    if let Some(quorum) = policy.annotation("quorum") {
        match quorum.trim().parse::<u32>() {
            Ok(n) if (1..=MAX_QUORUM).contains(&n) => {}
            _ => return bad("quorum", &format!("is a number from 1 to {MAX_QUORUM}")),
        }
    }
    if let Some(ttl) = policy.annotation("ttl")
        && humantime::parse_duration(ttl.trim()).is_err()
    {
        return bad("ttl", "is a duration such as 15m or 2h");
    }
    if let Some(approvers) = policy.annotation("approvers") {
        let named = names(approvers);
        if named.is_empty() {
            return bad("approvers", "names someone: \"ana, group:sre\"");
        }
        if named.len() > MAX_APPROVERS {
            return bad("approvers", &format!("names at most {MAX_APPROVERS}"));
        }
    }
    Ok(())
}

/// The comma-separated names of an `@approvers` annotation.
fn names(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What an `@approvers` annotation names, as an ask's approvers: `group:<name>` a
/// group, any other name a subject (None when it names nobody).
pub fn approvers(names: &[String]) -> Option<askgate_proto::v1::Approvers> {
    let mut approvers = askgate_proto::v1::Approvers::default();
    for name in names {
        match name.strip_prefix("group:") {
            Some(group) => approvers.groups.push(group.to_owned()),
            None => approvers.subjects.push(name.clone()),
        }
    }
    (!approvers.subjects.is_empty() || !approvers.groups.is_empty()).then_some(approvers)
}

/// What an asking permit's annotations fill (checked when the set was put).
fn fill_of(policy: &cedar_policy::Policy) -> Fill {
    Fill {
        approvers: policy
            .annotation("approvers")
            .map(names)
            .unwrap_or_default(),
        quorum: policy
            .annotation("quorum")
            .and_then(|q| q.trim().parse().ok()),
        ttl: policy
            .annotation("ttl")
            .and_then(|t| humantime::parse_duration(t.trim()).ok()),
        default: policy.annotation("default").map(str::to_owned),
    }
}

pub mod book;

#[cfg(test)]
mod tests;
