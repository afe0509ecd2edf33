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

use std::{collections::HashMap, str::FromStr as _, time::Duration};

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Entities, Entity, EntityId, EntityTypeName, EntityUid,
    PolicyId, PolicySet, Request, RestrictedExpression, Schema, ValidationMode, Validator,
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
    /// The policies sliced by the action they name: Cedar evaluates every policy of a
    /// set it is given (about a microsecond each, whatever their scope), so an ask is
    /// judged by its action's slice and the policies that name no single action only.
    slices: Slices,
    /// The tenant's schema with askgate's declarations, when the tenant gave one.
    schema: Option<Schema>,
    /// What askgate reads of each policy, by Cedar's id: read once, when the set is
    /// compiled (Cedar parses an annotation's key at every lookup).
    meta: HashMap<PolicyId, Meta>,
    authorizer: Authorizer,
    types: Types,
}

/// What askgate reads of one policy.
struct Meta {
    /// Its place in the set.
    order: usize,
    /// Its `@id`, else Cedar's `policy<N>`.
    name: String,
    forbid: bool,
    /// A permit's `@decision("allow")`.
    allows: bool,
    /// A forbid's `@reason`.
    reason: String,
    /// An asking permit's annotations.
    fill: Fill,
}

/// The policies of a set by the action their scope names.
struct Slices {
    /// Policies whose scope is `action == Action::"<name>"` (or, without a schema and
    /// so without action groups, `action in [...]`), under each action they name.
    by_action: HashMap<EntityUid, PolicySet>,
    /// Every other policy (any action, or `action in` a group of the schema).
    general: PolicySet,
}

impl Slices {
    fn of(set: &PolicySet, grouped: bool) -> Result<Self, String> {
        let mut by_action: HashMap<EntityUid, PolicySet> = HashMap::new();
        let mut general = PolicySet::new();
        for policy in set.policies() {
            let actions = match policy.action_constraint() {
                ActionConstraint::Eq(action) => vec![action],
                ActionConstraint::In(actions) if !grouped => actions,
                ActionConstraint::In(_) | ActionConstraint::Any => Vec::new(),
            };
            let add = |slice: &mut PolicySet| slice.add(policy.clone()).map_err(|e| e.to_string());
            if actions.is_empty() {
                add(&mut general)?;
            }
            for action in actions {
                add(by_action.entry(action).or_default())?;
            }
        }
        Ok(Self { by_action, general })
    }

    /// The slices that may hold a policy deciding `action`.
    fn for_action(&self, action: &EntityUid) -> impl Iterator<Item = &PolicySet> {
        self.by_action
            .get(action)
            .into_iter()
            .chain(std::iter::once(&self.general))
    }
}

/// The entity types of askgate's requests, parsed once.
struct Types {
    agent: EntityTypeName,
    action: EntityTypeName,
    session: EntityTypeName,
}

impl Types {
    fn new() -> Result<Self, String> {
        let parse = |name: &str| EntityTypeName::from_str(name).map_err(|e| e.to_string());
        Ok(Self {
            agent: parse("Agent")?,
            action: parse("Action")?,
            session: parse("Session")?,
        })
    }
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
        let mut meta: HashMap<PolicyId, Meta> = HashMap::new();
        for policy in set.policies() {
            let name = match policy.annotation("id") {
                Some(id) => id.to_owned(),
                None => policy.id().to_string(),
            };
            if meta.values().any(|m| m.name == name) {
                return Err(format!("two policies are named {name:?}: each @id once"));
            }
            check_annotations(policy, &name)?;
            let forbid = policy.effect() == cedar_policy::Effect::Forbid;
            let about = Meta {
                order: order(policy.id()),
                name,
                forbid,
                allows: policy.annotation("decision") == Some("allow"),
                reason: policy
                    .annotation("reason")
                    .unwrap_or("denied by policy")
                    .to_owned(),
                fill: match forbid {
                    true => Fill::default(),
                    false => fill_of(policy),
                },
            };
            meta.insert(policy.id().clone(), about);
        }
        Ok(Self {
            slices: Slices::of(&set, schema.is_some())?,
            schema,
            meta,
            authorizer: Authorizer::new(),
            types: Types::new()?,
        })
    }

    /// How many policies the set holds.
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Each policy's name, in the set's order.
    pub fn ids(&self) -> Vec<String> {
        let mut named: Vec<&Meta> = self.meta.values().collect();
        named.sort_by_key(|m| m.order);
        named.into_iter().map(|m| m.name.clone()).collect()
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
        let mut matched: Vec<&Meta> = Vec::new();
        let mut failed_forbid = None;
        let action = request.action().cloned().unwrap_or_else(|| {
            EntityUid::from_type_name_and_id(self.types.action.clone(), EntityId::new(""))
        });
        for slice in self.slices.for_action(&action) {
            let response = self.authorizer.is_authorized(&request, slice, &entities);
            matched.extend(
                response
                    .diagnostics()
                    .reason()
                    .filter_map(|id| self.meta.get(id)),
            );
            // A forbid that failed to evaluate might have denied: not judged. A permit
            // that failed matched nothing, which only ever leads to asking.
            failed_forbid = failed_forbid.or_else(|| {
                response
                    .diagnostics()
                    .errors()
                    .find(|error| {
                        let cedar_policy::AuthorizationError::PolicyEvaluationError(failed) = error;
                        self.meta.get(failed.policy_id()).is_none_or(|m| m.forbid)
                    })
                    .map(ToString::to_string)
            });
        }
        // In the set's order (Cedar reports a set): the first of several names it.
        matched.sort_by_key(|m| m.order);
        let names = matched.iter().map(|m| m.name.clone()).collect();
        if let Some(error) = failed_forbid {
            return (Decision::NotJudged(error), names);
        }
        (decision(&matched), names)
    }

    /// Cedar's request for `asked`, with the entities it needs; an error says why the
    /// ask does not fit the schema.
    fn request(&self, asked: &Asked<'_>) -> Result<(Request, Entities), String> {
        let uid = |kind: &EntityTypeName, id: &str| {
            EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id))
        };
        let principal = uid(&self.types.agent, asked.subject);
        let action = uid(&self.types.action, asked.action);
        let resource = uid(&self.types.session, asked.session);
        let labels = asked
            .labels
            .iter()
            .map(|(key, value)| RestrictedExpression::new_string(format!("{key}={value}")));
        let schema = self.schema.as_ref();
        let context = match schema {
            // The schema says what each argument is (an `ipaddr`, a `decimal`, ...):
            // Cedar reads the JSON with it.
            Some(schema) => {
                let labels: Vec<String> = asked
                    .labels
                    .iter()
                    .map(|(key, value)| format!("{key}={value}"))
                    .collect();
                let context = serde_json::json!({ "arguments": asked.arguments, "labels": labels });
                Context::from_json_value(context, Some((schema, &action)))
                    .map_err(|e| e.to_string())?
            }
            // Without one, the arguments are what JSON says: built directly, a tenth of
            // the time of Cedar's JSON reader.
            None => Context::from_pairs([
                ("arguments".to_owned(), expression(asked.arguments)?),
                ("labels".to_owned(), RestrictedExpression::new_set(labels)),
            ])
            .map_err(|e| e.to_string())?,
        };
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

/// A JSON value as Cedar reads it without a schema: strings, booleans, integers,
/// arrays as sets, objects as records. A number that is no 64-bit integer, or a
/// `null`, has no Cedar value: the ask is not judged.
fn expression(value: &serde_json::Value) -> Result<RestrictedExpression, String> {
    use serde_json::Value;
    Ok(match value {
        Value::String(text) => RestrictedExpression::new_string(text.clone()),
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(long) => RestrictedExpression::new_long(long),
            None => {
                return Err(format!(
                    "the number {n} is no Cedar value (a 64-bit integer)"
                ));
            }
        },
        Value::Array(items) => RestrictedExpression::new_set(
            items
                .iter()
                .map(expression)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Object(fields) => RestrictedExpression::new_record(
            fields
                .iter()
                .map(|(key, value)| Ok((key.clone(), expression(value)?)))
                .collect::<Result<Vec<_>, String>>()?,
        )
        .map_err(|e| e.to_string())?,
        Value::Null => return Err("null is no Cedar value".into()),
    })
}

/// What the policies that matched (in the set's order) decide: the first forbid denies;
/// else the first allowing permit allows; else the first asking permit asks.
fn decision(matched: &[&Meta]) -> Decision {
    if let Some(forbid) = matched.iter().find(|m| m.forbid) {
        return Decision::Deny {
            policy: forbid.name.clone(),
            reason: forbid.reason.clone(),
        };
    }
    if let Some(allow) = matched.iter().find(|m| m.allows) {
        return Decision::Allow {
            policy: allow.name.clone(),
        };
    }
    match matched.first() {
        Some(ask) => Decision::Ask {
            policy: ask.name.clone(),
            fill: ask.fill.clone(),
        },
        None => Decision::NoMatch,
    }
}

/// Where a policy stands in its set: Cedar names the policies it parses `policy0`,
/// `policy1`, ... in their order.
fn order(id: &PolicyId) -> usize {
    id.to_string()
        .strip_prefix("policy")
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
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
